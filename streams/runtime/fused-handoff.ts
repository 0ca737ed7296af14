/**
 * Records others write into a fused process's intermediate topics
 * (group-complete, penalized): an operator's `dlq redrive` or `replay
 * --to-topic`, leftovers of separate stages. The fused chain hands its own
 * records on in process, marked with the hand-off header (headers.ts) and
 * processed in the transaction that wrote them; it must also process every
 * unmarked record there, once.
 *
 * Per task and intermediate node, a position: every offset of the node's
 * input partition before `pos` is accounted for (processed, or marked, or a
 * transaction marker). The fast path: when a transaction's first write to
 * the node's topic lands exactly at `expectedEnd` (nothing but the task's
 * own previous commit marker since `pos`), nobody else wrote there, and
 * the node's group offset moves past the writes in the same transaction.
 * Otherwise the offset stays at `pos`, the node is dirty, and the task
 * reads [pos, end) itself (read_committed, by offset), skips the marked
 * records and runs the others through the rest of the chain in its own
 * transactions, committing the offset past them; then the fast path
 * resumes. An idle chain notices foreign writes by the partitions' end
 * offsets (polled by the task manager).
 */
import type { InputRecord } from '../api/stage.js';
import { isHandedOff } from '../api/headers.js';
import type { KafkaAdmin, OffsetReader } from '../kafka/types.js';

/** Offsets read per request while catching up. */
export const CATCH_UP_WINDOW = 256;

export interface Handoff {
  /** Everything before this offset is accounted for (and the group's committed offset is at most here). */
  pos: bigint;
  /** The end offset of the partition if nobody else wrote since `pos`. */
  expectedEnd: bigint;
  /** Someone else may have written at or after `pos`: read it before trusting the fast path. */
  dirty: boolean;
}

/** How a fused task reads its intermediate partitions. */
export interface ForeignReader {
  admin: Pick<KafkaAdmin, 'committedOffsets' | 'topicOffsets'>;
  reader: Pick<OffsetReader, 'read'>;
}

/** Where a node's catch-up starts: the group's committed offset, or the log start when it has none (or retention passed it). */
export async function startOf(f: ForeignReader, groupId: string, topic: string, partition: number): Promise<bigint> {
  const committed = (await f.admin.committedOffsets(groupId, topic)).get(partition);
  const { low } = await boundsOf(f, topic, partition);
  return committed === undefined || BigInt(committed) < low ? low : BigInt(committed);
}

export async function boundsOf(f: ForeignReader, topic: string, partition: number): Promise<{ low: bigint; high: bigint }> {
  const o = (await f.admin.topicOffsets(topic)).find((x) => x.partition === partition);
  return o ? { low: BigInt(o.low), high: BigInt(o.high) } : { low: 0n, high: 0n };
}

/**
 * The records of [from, to) (at most CATCH_UP_WINDOW offsets) not handed
 * off, in offset order, and the offset after the window. Offsets holding
 * no committed record (markers, aborted records) are absent; one held back
 * by an open transaction makes the reader throw (retriable).
 */
export async function readForeign(f: ForeignReader, topic: string, partition: number, from: bigint, to: bigint): Promise<{ records: InputRecord[]; next: bigint }> {
  const end = to < from + BigInt(CATCH_UP_WINDOW) ? to : from + BigInt(CATCH_UP_WINDOW);
  const offsets: string[] = [];
  for (let o = from; o < end; o++) offsets.push(o.toString());
  const found = await f.reader.read(topic, partition, offsets);
  const records: InputRecord[] = [];
  for (const o of offsets) {
    const r = found.get(o);
    if (!r || isHandedOff(r.headers)) continue;
    records.push({ topic, partition, offset: o, key: r.key, value: r.value, timestamp: r.timestamp });
  }
  return { records, next: end };
}

/**
 * A TransactionalSink that writes values above their topic's limit as chunk
 * sets (docs/design-chunked-records.md §2), inside the transaction the
 * caller opened on the sink it wraps: stage outputs, dead letters and batch
 * progress of every client (applied where the stage runner builds its
 * sinks). Each record is placed on its partition first (its own, else
 * murmur2 of its key), so that every chunk of a set lands on that one
 * partition; `planSends` then cuts the sends. The positions it answers are
 * one per input record: the first chunk's offset, with `lastOffset` the last
 * chunk's.
 *
 * A send the broker refuses as too large (`record_limit_changed`: someone
 * lowered a topic's `max.message.bytes` under the running stage) makes the
 * limits of its topics be read again; the error goes on to the task, whose
 * transaction aborts and which rebuilds (task_migrated).
 */
import { RolloutStreamError } from '../../errors/index.js';
import { placeRecord } from '../kafka/placement.js';
import type { TxState } from '../kafka/transaction-state.js';
import type { OutgoingRecord, PartitionOffset, RecordPosition, TransactionalSink } from '../kafka/types.js';
import { crashPoint } from '../runtime/crash-points.js';
import { planSends, positionsOf, type ChunkedPosition } from './chunk-writer.js';
import type { RecordLimits } from './record-limits.js';

export interface ChunkedSendOptions {
  limits: RecordLimits;
  /** Partition count of a topic (cached by the caller). */
  partitionsOf: (topic: string) => Promise<number>;
  /** Bytes of one request in all (`kafka.max_message_bytes`). */
  requestBudget: number;
  /** Topics whose records are never chunked (compacted: compaction would keep one chunk per key). */
  neverChunk?: ReadonlySet<string>;
  /** False (`kafka.chunk_records: false`): nothing is chunked, every record goes whole. */
  enabled?: boolean;
  /** A new set id (tests). */
  setId?: () => Buffer;
}

/**
 * Places `records`, plans their sends and sends them one after the other
 * with `send`; calls the crash point `chunks.mid-set` after each send that
 * left a set partly written. Shared by the stage sink here and the edge's
 * chunking sink.
 */
export async function sendChunked(records: readonly OutgoingRecord[], send: (records: OutgoingRecord[]) => Promise<RecordPosition[]>, o: ChunkedSendOptions): Promise<ChunkedPosition[]> {
  if (records.length === 0) return [];
  const topics = new Set(records.map((r) => r.topic));
  await o.limits.load(topics);
  const placed: OutgoingRecord[] = [];
  for (const r of records) placed.push(r.partition !== undefined ? r : { ...r, partition: await placeRecord(r, o.partitionsOf) });
  const enabled = o.enabled !== false;
  const plan = planSends(placed, {
    limitOf: (t) => o.limits.limit(t),
    requestBudget: o.requestBudget,
    chunkable: (t) => enabled && !(o.neverChunk?.has(t) ?? false),
    ...(o.setId ? { setId: o.setId } : {}),
  });
  // Sends whose end leaves a set open: chunk k of n written, k < n.
  const midSet = new Set<number>();
  for (const p of plan.records) if (p.chunks > 1) for (let s = p.first.send; s < p.last.send; s++) midSet.add(s);
  const acked: RecordPosition[][] = [];
  for (let i = 0; i < plan.sends.length; i++) {
    try {
      acked.push(await send(plan.sends[i]!));
    } catch (e) {
      if (e instanceof RolloutStreamError && e.code === 'record_limit_changed') o.limits.forget(topics);
      throw e;
    }
    if (midSet.has(i)) crashPoint('chunks.mid-set');
  }
  return positionsOf(plan, acked);
}

export class ChunkingTransactionalSink implements TransactionalSink {
  constructor(
    private readonly inner: TransactionalSink,
    private readonly o: ChunkedSendOptions,
  ) {}

  get transactionalId(): string {
    return this.inner.transactionalId;
  }

  get state(): TxState {
    return this.inner.state;
  }

  init(): Promise<void> {
    return this.inner.init();
  }

  begin(): Promise<void> {
    return this.inner.begin();
  }

  /** One position per input record: the first chunk's offset, `lastOffset` the last chunk's. */
  send(records: OutgoingRecord[]): Promise<ChunkedPosition[]> {
    return sendChunked(records, (r) => this.inner.send(r), this.o);
  }

  sendOffsets(groupId: string, offsets: PartitionOffset[]): Promise<void> {
    return this.inner.sendOffsets(groupId, offsets);
  }

  commit(): Promise<void> {
    return this.inner.commit();
  }

  abort(): Promise<void> {
    return this.inner.abort();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

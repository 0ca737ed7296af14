/**
 * The kafkajs scan (KafkaClient.scan): reads chosen partitions from a start
 * offset up to an end offset with read_committed, committing nothing. The
 * reader joins a throw-away consumer group whose only member is assigned
 * exactly the requested partitions (nothing else is fetched), and the group
 * is deleted when the scan ends.
 */
import './speedups.js'; // before kafkajs loads: its patches and the send-retry fix (send-retry.ts)
import { randomUUID } from 'node:crypto';
import { AssignerProtocol, type Assigner, type Kafka, type PartitionAssigner } from 'kafkajs';
import type { PartitionRange, ScanCallback, ScanOptions, ScanResult } from '../types.js';

/** Assigns the wanted partitions to the group's members (a scan group has exactly one). */
function fixedAssigner(wanted: Record<string, number[]>): PartitionAssigner {
  return (): Assigner => ({
    name: 'RolloutStreamFixedAssigner',
    version: 1,
    async assign({ members }) {
      return members.map((m, i) => ({
        memberId: m.memberId,
        memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 1, assignment: i === 0 ? wanted : {}, userData: Buffer.alloc(0) }),
      }));
    },
    protocol({ topics }) {
      return { name: 'RolloutStreamFixedAssigner', metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData: Buffer.alloc(0) }) };
    },
  });
}

/**
 * Reads every record of `ranges` (read_committed, in offset order per
 * partition, partitions interleaved) and passes it to `onRecord`; returning
 * `false` stops the scan. Resolves when every range was read to its end
 * offset, when asked to stop, or after the idle timeout (then `complete` is
 * false and `unfinished` names the partitions). Records re-delivered after a
 * consumer restart are skipped, so each offset is seen once.
 */
export async function scanRanges(
  kafka: Kafka,
  ranges: PartitionRange[],
  onRecord: ScanCallback,
  options: ScanOptions = {},
): Promise<ScanResult> {
  const active = new Map<string, { range: PartitionRange; next: bigint; end: bigint }>();
  for (const r of ranges) {
    if (BigInt(r.start) < BigInt(r.end)) active.set(`${r.topic}/${r.partition}`, { range: r, next: BigInt(r.start), end: BigInt(r.end) });
  }
  const result: ScanResult = { records: 0, complete: true, unfinished: [] };
  if (active.size === 0) return result;

  const wanted: Record<string, number[]> = {};
  for (const { range } of active.values()) (wanted[range.topic] ??= []).push(range.partition);
  const groupId = `rollout-stream.${options.purpose ?? 'scan'}.${randomUUID()}`;
  const consumer = kafka.consumer({
    groupId,
    readUncommitted: false,
    ...(options.maxBytes ? { maxBytes: options.maxBytes, maxBytesPerPartition: options.maxBytes } : {}),
    maxWaitTimeInMs: 200,
    allowAutoTopicCreation: false,
    partitionAssigners: [fixedAssigner(wanted)],
  });
  const idleMs = options.idleTimeoutMs ?? 30_000;
  let stopped = false;
  let timedOut = false;
  let finish!: () => void;
  let fail!: (e: Error) => void;
  const finished = new Promise<void>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  let idleTimer: NodeJS.Timeout | undefined;
  const touch = () => {
    clearTimeout(idleTimer);
    if (stopped) return;
    idleTimer = setTimeout(() => {
      result.complete = false;
      timedOut = true;
      stopped = true;
      finish();
    }, idleMs);
    idleTimer.unref();
  };
  const markRead = (key: string, lastOffset: bigint) => {
    const a = active.get(key);
    if (!a) return;
    if (lastOffset + 1n > a.next) a.next = lastOffset + 1n;
    if (a.next >= a.end) {
      active.delete(key);
      if (active.size === 0) {
        stopped = true;
        finish();
      }
    }
  };

  await consumer.connect();
  try {
    consumer.on(consumer.events.END_BATCH_PROCESS, (e) => {
      touch();
      // Batches of only control records or aborted records still move the position.
      if (e.payload.lastOffset !== null && e.payload.lastOffset !== undefined) markRead(`${e.payload.topic}/${e.payload.partition}`, BigInt(e.payload.lastOffset));
    });
    consumer.on(consumer.events.CRASH, (e) => {
      if (!e.payload.restart) fail(e.payload.error);
    });
    await consumer.subscribe({ topics: Object.keys(wanted), fromBeginning: true });
    touch();
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const key = `${batch.topic}/${batch.partition}`;
        for (const m of batch.messages) {
          if (stopped) return;
          const a = active.get(key);
          if (!a) return;
          const offset = BigInt(m.offset);
          if (offset < a.next) continue;
          if (offset >= a.end) {
            markRead(key, a.end - 1n);
            return;
          }
          const headers: Record<string, Buffer> = {};
          for (const [k, v] of Object.entries(m.headers ?? {})) if (Buffer.isBuffer(v)) headers[k] = v;
          const more = await onRecord({
            topic: batch.topic,
            partition: batch.partition,
            offset: m.offset,
            timestamp: m.timestamp,
            key: m.key ?? null,
            value: m.value ?? null,
            headers,
          });
          result.records++;
          a.next = offset + 1n;
          if (more === false) {
            stopped = true;
            result.complete = false;
            finish();
            return;
          }
        }
        options.onProgress?.(result.records);
      },
    });
    for (const { range } of active.values()) consumer.seek({ topic: range.topic, partition: range.partition, offset: range.start });
    await finished;
  } finally {
    clearTimeout(idleTimer);
    stopped = true;
    if (timedOut) result.unfinished = [...active.keys()];
    await consumer.disconnect();
    await deleteGroup(kafka, groupId);
  }
  return result;
}

/** Removes a throw-away group (it committed nothing); best effort: an empty group also expires by itself. */
async function deleteGroup(kafka: Kafka, groupId: string): Promise<void> {
  const admin = kafka.admin();
  try {
    await admin.connect();
    await admin.deleteGroups([groupId]);
  } catch {
    // left to expire
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

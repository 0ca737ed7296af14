/**
 * Reading a bounded slice of topics for the operations commands (replay,
 * trace, dlq): chosen partitions from a start offset (or a timestamp) up to
 * the end offsets captured when the scan starts, with read_committed, so a
 * scan always ends, however busy the topic. No offsets are committed: the
 * reader joins a throw-away consumer group whose only member is assigned
 * exactly the requested partitions (nothing else is fetched), and the group
 * is deleted when the scan ends. The changelog restore reads this way too.
 */
import { randomUUID } from 'node:crypto';
import { AssignerProtocol, type Admin, type Assigner, type Kafka, type PartitionAssigner } from 'kafkajs';
import { RolloutStreamError } from '../../errors/index.js';

/** Where to start reading each partition. */
export type StartPosition =
  | { kind: 'beginning' }
  /** `offset` ≥ 0: that offset on every partition; < 0: that many records before each partition's end. */
  | { kind: 'offset'; offset: bigint }
  /** The first record with a timestamp ≥ `timeMs` (the end when there is none). */
  | { kind: 'time'; timeMs: number };

/** Offsets `[start, end)` of one partition; offsets are decimal strings. */
export interface PartitionRange {
  topic: string;
  partition: number;
  start: string;
  end: string;
}

export interface ScanRecord {
  topic: string;
  partition: number;
  offset: string;
  /** Record timestamp, epoch ms as a decimal string (as the broker gives it). */
  timestamp: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer>;
}

export interface ScanResult {
  /** Records handed to the callback. */
  records: number;
  /** False when the scan stopped early: the callback asked to stop, or the idle timeout passed. */
  complete: boolean;
  /** Partitions not read to their end (idle timeout), as `topic/partition`. */
  unfinished: string[];
}

export interface ScanOptions {
  /** Give up when no progress was made for this long (default 30 s; an open transaction holds read_committed readers back). */
  idleTimeoutMs?: number;
  /** Called after every fetched batch with the records read so far. */
  onProgress?: (records: number) => void;
  /** Largest fetch (bytes, per request and per partition); kafkajs's default 10 MiB when absent. */
  maxBytes?: number;
  /** Names the throw-away group `rollout-stream.<purpose>.<uuid>` (default `scan`). */
  purpose?: string;
}

/** Partition count of `topic`; throws a clear error when it does not exist. */
export async function partitionCount(admin: Admin, topic: string): Promise<number> {
  const existing = new Set(await admin.listTopics());
  if (!existing.has(topic)) throw new RolloutStreamError('unknown_topic', `topic ${topic} does not exist`);
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  return meta.topics[0]!.partitions.length;
}

/**
 * The ranges to read on `topic` from `from` to the current end of each
 * partition (or only `partitions` when given). The start is clamped to the
 * partition's retained offsets.
 */
export async function partitionRanges(admin: Admin, topic: string, from: StartPosition, partitions?: number[]): Promise<PartitionRange[]> {
  const offsets = await admin.fetchTopicOffsets(topic);
  const byTime = from.kind === 'time' ? new Map((await admin.fetchTopicOffsetsByTimestamp(topic, from.timeMs)).map((o) => [o.partition, BigInt(o.offset)])) : null;
  const ranges: PartitionRange[] = [];
  for (const o of offsets.sort((a, b) => a.partition - b.partition)) {
    if (partitions && !partitions.includes(o.partition)) continue;
    const low = BigInt(o.low);
    const end = BigInt(o.high);
    let start: bigint;
    if (from.kind === 'beginning') start = low;
    else if (from.kind === 'time') start = byTime!.get(o.partition) ?? end;
    else start = from.offset >= 0n ? from.offset : end + from.offset;
    if (start < low) start = low;
    if (start > end) start = end;
    ranges.push({ topic, partition: o.partition, start: start.toString(), end: end.toString() });
  }
  return ranges;
}

/**
 * What consumer group `groupId` has not consumed yet on `topic`, per
 * partition: from its committed offset (the log start where it has none) to
 * the high watermark. Past a transactional writer's offset, the range may
 * hold only commit markers.
 */
export async function unconsumedRanges(admin: Admin, topic: string, groupId: string): Promise<PartitionRange[]> {
  const [ends, committed] = await Promise.all([admin.fetchTopicOffsets(topic), admin.fetchOffsets({ groupId, topics: [topic] })]);
  const done = new Map((committed[0]?.partitions ?? []).map((p) => [p.partition, p.offset]));
  return ends.map((e) => {
    const c = done.get(e.partition) ?? '-1';
    return { topic, partition: e.partition, start: BigInt(c) < 0n ? e.low : c, end: e.high };
  });
}

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
  onRecord: (r: ScanRecord) => void | boolean | Promise<void | boolean>,
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

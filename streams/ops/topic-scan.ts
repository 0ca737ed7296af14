/**
 * Which slice of a topic to read, for the operations commands (replay,
 * trace, dlq) and the restore: chosen partitions from a start offset (or a
 * timestamp) up to the end offsets captured when the scan starts, so a scan
 * always ends, however busy the topic. The reading itself is the client's
 * (`KafkaClient.scan`: read_committed, no offsets committed).
 */
import type { KafkaAdmin, PartitionRange } from '../kafka/types.js';

export type { PartitionRange, ScanOptions, ScanRecord, ScanResult } from '../kafka/types.js';

/** Where to start reading each partition. */
export type StartPosition =
  | { kind: 'beginning' }
  /** `offset` ≥ 0: that offset on every partition; < 0: that many records before each partition's end. */
  | { kind: 'offset'; offset: bigint }
  /** The first record with a timestamp ≥ `timeMs` (the end when there is none). */
  | { kind: 'time'; timeMs: number };

/**
 * The ranges to read on `topic` from `from` to the current end of each
 * partition (or only `partitions` when given). The start is clamped to the
 * partition's retained offsets.
 */
export async function partitionRanges(admin: KafkaAdmin, topic: string, from: StartPosition, partitions?: number[]): Promise<PartitionRange[]> {
  const offsets = await admin.topicOffsets(topic);
  const byTime = from.kind === 'time' ? await admin.offsetsForTime(topic, from.timeMs) : null;
  const ranges: PartitionRange[] = [];
  for (const o of offsets) {
    if (partitions && !partitions.includes(o.partition)) continue;
    const low = BigInt(o.low);
    const end = BigInt(o.high);
    let start: bigint;
    if (from.kind === 'beginning') start = low;
    else if (from.kind === 'time') start = BigInt(byTime!.get(o.partition) ?? end);
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
export async function unconsumedRanges(admin: KafkaAdmin, topic: string, groupId: string): Promise<PartitionRange[]> {
  const [ends, committed] = await Promise.all([admin.topicOffsets(topic), admin.committedOffsets(groupId, topic)]);
  return ends.map((e) => ({ topic, partition: e.partition, start: committed.get(e.partition) ?? e.low, end: e.high }));
}

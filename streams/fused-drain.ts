/**
 * Fused mode commits the downstream stages' offsets just past the records it
 * writes to their input topics. Taking a partition over is safe only when the
 * separate stages have processed everything before that point; otherwise
 * their leftover records would be skipped. This check finds such leftovers.
 */
import type { Admin, Kafka } from 'kafkajs';
import { scanRanges, type PartitionRange } from './topic-scan.js';

export interface DrainTarget {
  /** The downstream stage's input topic. */
  topic: string;
  /** Its consumer group. */
  groupId: string;
}

/**
 * The first `topic/partition` (of `partitions`, every partition when omitted)
 * holding a committed data record its group has not processed, or null when
 * all are drained. Only commit markers may lie past a group's offset.
 */
export async function firstUndrained(kafka: Kafka, admin: Admin, targets: DrainTarget[], partitions?: number[]): Promise<string | null> {
  const ranges: PartitionRange[] = [];
  for (const t of targets) {
    const [ends, committed] = await Promise.all([admin.fetchTopicOffsets(t.topic), admin.fetchOffsets({ groupId: t.groupId, topics: [t.topic] })]);
    const done = new Map((committed[0]?.partitions ?? []).map((p) => [p.partition, p.offset]));
    for (const e of ends) {
      if (partitions && !partitions.includes(e.partition)) continue;
      const c = done.get(e.partition) ?? '-1';
      const start = c === '-1' ? BigInt(e.low) : BigInt(c);
      if (start < BigInt(e.high)) ranges.push({ topic: t.topic, partition: e.partition, start: start.toString(), end: e.high });
    }
  }
  if (ranges.length === 0) return null;
  let found: string | null = null;
  const scan = await scanRanges(
    kafka,
    ranges,
    (r) => {
      found = `${r.topic}/${r.partition} (from offset ${r.offset})`;
      return false;
    },
    { idleTimeoutMs: 10_000 },
  );
  if (found === null && !scan.complete) return `${scan.unfinished.join(', ')} (unreadable: an open transaction holds it)`;
  return found;
}

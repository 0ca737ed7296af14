/**
 * Fused mode commits the downstream stages' offsets just past the records it
 * writes to their input topics. Taking a partition over is safe only when the
 * separate stages have processed everything before that point; otherwise
 * their leftover records would be skipped. This check finds such leftovers.
 */
import type { KafkaAdmin, KafkaClient, PartitionRange } from '../kafka/types.js';
import { unconsumedRanges } from '../ops/topic-scan.js';

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
export async function firstUndrained(client: KafkaClient, admin: KafkaAdmin, targets: DrainTarget[], partitions?: number[]): Promise<string | null> {
  const ranges: PartitionRange[] = [];
  for (const t of targets) {
    for (const r of await unconsumedRanges(admin, t.topic, t.groupId)) {
      if ((!partitions || partitions.includes(r.partition)) && BigInt(r.start) < BigInt(r.end)) ranges.push(r);
    }
  }
  if (ranges.length === 0) return null;
  let found: string | null = null;
  const scan = await client.scan(
    ranges,
    (r) => {
      found = `${r.topic}/${r.partition} (from offset ${r.offset})`;
      return false;
    },
    // From committed offsets: chunks of a set handed on before them are no leftovers.
    { idleTimeoutMs: 10_000, trustedStarts: true },
  );
  if (found === null && !scan.complete) return `${scan.unfinished.join(', ')} (unreadable: an open transaction holds it)`;
  return found;
}

/**
 * Reads a task's compacted changelog partitions from the beginning up to
 * their end offsets (read_committed), feeding each record to a callback.
 * Only the task's own partitions are fetched (the client's scan reads
 * exactly the ranges it is given).
 */
import { RolloutStreamError } from '../../errors/index.js';
import type { ChangelogRecord } from '../api/stage.js';
import type { KafkaAdmin, KafkaClient } from '../kafka/types.js';
import { partitionRanges } from '../ops/topic-scan.js';

export interface RestoreStats {
  records: number;
  bytes: number;
  ms: number;
}

/** A restore that makes no progress for this long fails (the runner retries it with a fresh reader). */
const RESTORE_IDLE_MS = 120_000;

export async function restoreChangelog(
  client: KafkaClient,
  admin: KafkaAdmin,
  topic: string,
  partitions: number[],
  onRecord: (partition: number, record: ChangelogRecord) => Promise<void>,
  maxBytes: number,
): Promise<RestoreStats> {
  const t0 = Date.now();
  const stats: RestoreStats = { records: 0, bytes: 0, ms: 0 };
  // [low, high) of each own partition; with no open transaction on them (we
  // hold their transactional ids), high is the stable end. The scan finishes
  // only at those ends, never on an empty fetch: right after a broker restart
  // fetches come back empty while leaders load, and stopping then would
  // restore a partial state.
  const ranges = (await partitionRanges(admin, topic, { kind: 'beginning' }, partitions)).filter((r) => BigInt(r.start) < BigInt(r.end));
  if (ranges.length === 0) return { ...stats, ms: Date.now() - t0 };
  const scan = await client.scan(
    ranges,
    async (r) => {
      stats.records++;
      stats.bytes += r.value?.length ?? 0;
      await onRecord(r.partition, { key: r.key?.toString('utf8') ?? '', value: r.value });
    },
    // Changelogs are compacted and never hold chunk sets: read as stored.
    { idleTimeoutMs: RESTORE_IDLE_MS, maxBytes, purpose: 'restore', raw: true },
  );
  if (!scan.complete) {
    throw new RolloutStreamError('restore_stalled', `restoring ${topic} made no progress for ${RESTORE_IDLE_MS / 1000} s (unfinished: ${scan.unfinished.join(', ')})`);
  }
  return { ...stats, ms: Date.now() - t0 };
}

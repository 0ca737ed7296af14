/**
 * Reads compacted changelog partitions from the beginning up to their end
 * offset (read_committed), feeding each record to a callback. kafkajs has no
 * manual partition assignment, so this uses a throw-away consumer group that
 * reads the whole topic and keeps only the wanted partitions; the group is
 * deleted afterwards.
 */
import { randomUUID } from 'node:crypto';
import type { Admin, Kafka } from 'kafkajs';
import type { ChangelogRecord } from '../api/stage.js';

export interface RestoreStats {
  records: number;
  bytes: number;
  ms: number;
}

export async function restoreChangelog(
  kafka: Kafka,
  admin: Admin,
  topic: string,
  partitions: number[],
  onRecord: (partition: number, record: ChangelogRecord) => Promise<void>,
  maxBytes: number,
): Promise<RestoreStats> {
  const t0 = Date.now();
  const stats: RestoreStats = { records: 0, bytes: 0, ms: 0 };
  const wanted = new Set(partitions);
  const offsets = await admin.fetchTopicOffsets(topic);
  // Offsets to reach per partition: [low, high); with no open transaction on
  // our partitions (we hold their transactional ids), high is the stable end.
  const remaining = new Map<number, bigint>();
  for (const o of offsets) {
    if (wanted.has(o.partition) && BigInt(o.high) > BigInt(o.low)) remaining.set(o.partition, BigInt(o.high));
  }
  if (remaining.size === 0) return { ...stats, ms: Date.now() - t0 };

  const groupId = `rollout-stream.restore.${randomUUID()}`;
  const consumer = kafka.consumer({
    groupId,
    readUncommitted: false,
    maxBytes,
    maxBytesPerPartition: maxBytes,
    maxWaitTimeInMs: 100,
    allowAutoTopicCreation: false,
  });
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      // Never hang a partition's start-up: a restore that makes no progress
      // for two minutes fails, and the runner retries it with a fresh consumer.
      let watchdog = setTimeout(() => reject(new Error(`restoring ${topic} made no progress for 120 s`)), 120_000);
      const progressed = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => reject(new Error(`restoring ${topic} made no progress for 120 s`)), 120_000);
      };
      const finish = () => {
        clearTimeout(watchdog);
        resolve();
      };
      const reached = (partition: number, lastOffset: string) => {
        const end = remaining.get(partition);
        if (end === undefined || BigInt(lastOffset) + 1n < end) return;
        remaining.delete(partition);
        if (remaining.size === 0) finish();
      };
      // A batch's last offset counts transaction markers and aborted records
      // too, and batches holding only those never reach eachBatch but do end
      // with this event: that is how a partition whose tail is a commit
      // marker (always, for a transactional changelog) is seen to be done.
      consumer.on(consumer.events.END_BATCH_PROCESS, (e) => {
        if (remaining.has(e.payload.partition)) progressed();
        reached(e.payload.partition, e.payload.lastOffset);
      });
      // No shortcut on empty fetches: right after a broker restart fetches
      // come back empty while leaders load, and finishing then would restore
      // a partial state (rows lost from open groups). A stalled restore fails
      // by the watchdog instead and is retried.
      consumer
        .run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            const end = remaining.get(batch.partition);
            if (end === undefined) return;
            progressed();
            for (const m of batch.messages) {
              if (BigInt(m.offset) >= end) break;
              stats.records++;
              stats.bytes += m.value?.length ?? 0;
              await onRecord(batch.partition, { key: m.key?.toString('utf8') ?? '', value: m.value });
            }
            reached(batch.partition, batch.lastOffset());
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
    await admin.deleteGroups([groupId]).catch(() => undefined);
  }
  return { ...stats, ms: Date.now() - t0 };
}

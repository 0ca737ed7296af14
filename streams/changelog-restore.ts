/**
 * Reads compacted changelog partitions from the beginning up to their end
 * offset (read_committed), feeding each record to a callback. kafkajs has no
 * manual partition assignment, so this uses a throw-away consumer group that
 * reads the whole topic and keeps only the wanted partitions; the group is
 * deleted afterwards.
 */
import { randomUUID } from 'node:crypto';
import type { Admin, Kafka } from 'kafkajs';
import type { ChangelogRecord } from './stage.js';

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
      // A partition whose tail is only transaction markers yields no batch
      // that reaches `end`; after a few empty fetch rounds it is done too.
      let idleFetches = 0;
      consumer.on(consumer.events.FETCH, () => {
        if (++idleFetches >= 5 && remaining.size > 0) {
          remaining.clear();
          resolve();
        }
      });
      consumer
        .run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            const end = remaining.get(batch.partition);
            if (end === undefined) return;
            idleFetches = 0;
            for (const m of batch.messages) {
              if (BigInt(m.offset) >= end) break;
              stats.records++;
              stats.bytes += m.value?.length ?? 0;
              await onRecord(batch.partition, { key: m.key?.toString('utf8') ?? '', value: m.value });
            }
            // Transaction markers occupy offsets too, so "reached" means the
            // fetch position passed the end, not that a record sat at end-1.
            if (BigInt(batch.lastOffset()) + 1n >= end || BigInt(batch.highWatermark) <= BigInt(batch.lastOffset()) + 1n) {
              remaining.delete(batch.partition);
              if (remaining.size === 0) resolve();
            }
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

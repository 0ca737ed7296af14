/**
 * Reads partition ranges read_committed with no consumer group: Fetch
 * requests to each partition's leader through a `Consumer` that never joins
 * its (throw-away) group. Partitions are read one after another, each in
 * offset order.
 */
import { randomUUID } from 'node:crypto';
import { Consumer, FetchIsolationLevels } from '@platformatic/kafka';
import type { PartitionRange, ScanCallback, ScanOptions, ScanResult } from '../types.js';
import { codedCall } from './errors.js';
import type { PlatformaticBaseOptions } from './options.js';
import { decodeBatches } from './source.js';

export async function scanRanges(base: PlatformaticBaseOptions, ranges: PartitionRange[], onRecord: ScanCallback, options: ScanOptions = {}): Promise<ScanResult> {
  const idle = options.idleTimeoutMs ?? 30_000;
  const maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
  const consumer = new Consumer({ ...base, groupId: `${options.purpose ?? 'scan'}.${randomUUID()}`, isolationLevel: FetchIsolationLevels.READ_COMMITTED, autocommit: false, maxWaitTime: 200 });
  for (const r of ranges) consumer.topics.track(r.topic);
  let count = 0;
  const unfinished: string[] = [];
  let stopped = false;
  try {
    for (const r of ranges) {
      let pos = BigInt(r.start);
      const end = BigInt(r.end);
      let lastProgress = Date.now();
      while (pos < end && !stopped) {
        const meta = await codedCall(`reading the metadata of ${r.topic}`, () => consumer.metadata({ topics: [r.topic] }));
        const t = meta.topics.get(r.topic)!;
        const res = await codedCall(`fetching ${r.topic}/${r.partition}`, () =>
          consumer.fetch({
            node: t.partitions[r.partition]!.leader,
            maxWaitTime: 200,
            maxBytes,
            isolationLevel: FetchIsolationLevels.READ_COMMITTED,
            topics: [{ topicId: t.id, partitions: [{ partition: r.partition, fetchOffset: pos, partitionMaxBytes: maxBytes, currentLeaderEpoch: -1, lastFetchedEpoch: -1 }] }],
          }),
        );
        const pr = res.responses[0]?.partitions.find((p) => p.partitionIndex === r.partition);
        const { records, next } = decodeBatches(r.topic, r.partition, (pr?.records ?? []) as never, pos);
        for (const rec of records) {
          if (BigInt(rec.offset) >= end) break;
          count++;
          const go = await onRecord({ ...rec, timestamp: String(rec.timestamp) });
          if (go === false) {
            stopped = true;
            break;
          }
        }
        // Past the last stable offset nothing more can come: an open transaction holds us here.
        if (next > pos) {
          pos = next;
          lastProgress = Date.now();
          options.onProgress?.(count);
        } else if (Date.now() - lastProgress > idle) {
          unfinished.push(`${r.topic}/${r.partition}`);
          break;
        }
      }
      if (stopped) break;
    }
  } finally {
    await consumer.close(true).catch(() => undefined);
  }
  return { records: count, complete: !stopped && unfinished.length === 0, unfinished };
}

/**
 * Reads partition ranges read_committed with no consumer group: a librdkafka
 * consumer that is assigned each range in turn (it never joins or commits
 * to its throw-away group). Partitions are read one after another, each in
 * offset order; the partition's end is seen through librdkafka's partition
 * EOF (its fetch position, past markers and aborted records).
 */
import { randomUUID } from 'node:crypto';
import type { KafkaConsumer, Message } from '@confluentinc/kafka-javascript';
import type { PartitionRange, ScanCallback, ScanOptions, ScanResult } from '../types.js';
import { codedCall } from './errors.js';
import { CONNECT, confluent, consumeReadyMessages } from './library.js';
import type { RdkafkaProperties } from './options.js';

function consume(c: KafkaConsumer): Promise<Message[]> {
  return new Promise((resolve, reject) => c.consume(500, (err, ms) => (err ? reject(err) : resolve(ms ?? []))));
}

export async function scanRanges(base: RdkafkaProperties, ranges: PartitionRange[], onRecord: ScanCallback, options: ScanOptions = {}): Promise<ScanResult> {
  const idle = options.idleTimeoutMs ?? 30_000;
  const maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
  const consumer = new confluent.KafkaConsumer(
    {
      ...base,
      'group.id': `${options.purpose ?? 'scan'}.${randomUUID()}`,
      'isolation.level': 'read_committed',
      'enable.auto.commit': false,
      'enable.auto.offset.store': false,
      'enable.partition.eof': true,
      'allow.auto.create.topics': false,
      'fetch.max.bytes': Math.max(1000, maxBytes),
      'max.partition.fetch.bytes': maxBytes,
      'message.max.bytes': Math.max(1000, Math.min(1_000_000, maxBytes)),
      'receive.message.max.bytes': Math.max(100_000_000, maxBytes + 512),
      'fetch.wait.max.ms': 200,
    } as never,
    {},
  );
  consumer.setDefaultConsumeTimeout(200);
  consumeReadyMessages(consumer);
  let end: { topic: string; partition: number; offset: number } | null = null;
  consumer.on('partition.eof', (e: { topic: string; partition: number; offset: number }) => void (end = e));
  await codedCall('connecting the scan consumer', () => new Promise<void>((resolve, reject) => consumer.connect(CONNECT, (err) => (err ? reject(err) : resolve()))));
  let count = 0;
  const unfinished: string[] = [];
  let stopped = false;
  try {
    for (const r of ranges) {
      const stop = BigInt(r.end);
      let pos = BigInt(r.start);
      if (pos >= stop) continue;
      end = null;
      consumer.assign([{ topic: r.topic, partition: r.partition, offset: Number(pos) }]);
      let lastProgress = Date.now();
      while (pos < stop && !stopped) {
        const messages = await codedCall(`fetching ${r.topic}/${r.partition}`, () => consume(consumer));
        for (const m of messages) {
          if (m.topic !== r.topic || m.partition !== r.partition || BigInt(m.offset) < pos) continue;
          if (BigInt(m.offset) >= stop) {
            pos = stop;
            break;
          }
          pos = BigInt(m.offset) + 1n;
          lastProgress = Date.now();
          count++;
          const headers: Record<string, Buffer> = {};
          for (const h of m.headers ?? []) for (const [k, v] of Object.entries(h)) headers[k] = Buffer.isBuffer(v) ? v : Buffer.from(v);
          const key = m.key === undefined || m.key === null ? null : Buffer.isBuffer(m.key) ? m.key : Buffer.from(m.key);
          const go = await onRecord({ topic: m.topic, partition: m.partition, offset: String(m.offset), timestamp: String(m.timestamp ?? 0), key, value: m.value ?? null, headers });
          if (go === false) {
            stopped = true;
            break;
          }
        }
        if (messages.length > 0) options.onProgress?.(count);
        // At the partition's end (the last stable offset): past `end` the rest were markers or aborted records.
        const e = end as { topic: string; partition: number; offset: number } | null;
        if (e && e.topic === r.topic && e.partition === r.partition && BigInt(e.offset) > pos) {
          pos = BigInt(e.offset);
          lastProgress = Date.now();
        }
        if (pos < stop && !stopped && Date.now() - lastProgress > idle) {
          unfinished.push(`${r.topic}/${r.partition}`);
          break;
        }
      }
      if (stopped) break;
    }
  } finally {
    await new Promise<void>((resolve) => consumer.disconnect(() => resolve())).catch(() => undefined);
  }
  return { records: count, complete: !stopped && unfinished.length === 0, unfinished };
}

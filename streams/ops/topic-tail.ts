/**
 * Following topics as records arrive (read_committed, from the beginning,
 * no offsets committed): what `demo` uses to watch packed groups and dead
 * letters come out of a running pipeline. Unlike `scanRanges` it has no end;
 * the caller stops it.
 */
import { randomUUID } from 'node:crypto';
import type { Kafka } from 'kafkajs';
import type { ScanRecord } from './topic-scan.js';

export interface TopicTail {
  /** Rejects if the consumer crashed for good. */
  readonly failed: Promise<never>;
  stop(): Promise<void>;
}

/** Starts following `topics`; resolves once the consumer joined and `onRecord` will see every record from offset 0. */
export async function tailTopics(kafka: Kafka, topics: string[], onRecord: (r: ScanRecord) => void | Promise<void>): Promise<TopicTail> {
  const consumer = kafka.consumer({ groupId: `rollout-stream.tail.${randomUUID()}`, readUncommitted: false, maxWaitTimeInMs: 100 });
  let fail!: (e: Error) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => undefined);
  await consumer.connect();
  consumer.on(consumer.events.CRASH, (e) => {
    if (!e.payload.restart) fail(e.payload.error);
  });
  await consumer.subscribe({ topics, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      const headers: Record<string, Buffer> = {};
      for (const [k, v] of Object.entries(message.headers ?? {})) if (Buffer.isBuffer(v)) headers[k] = v;
      await onRecord({ topic, partition, offset: message.offset, timestamp: message.timestamp, key: message.key ?? null, value: message.value ?? null, headers });
    },
  });
  return { failed, stop: () => consumer.disconnect() };
}

/**
 * The kafkajs tail (OpsClient.tail): follows topics as records arrive
 * (read_committed, from the beginning, no offsets committed), e.g. `demo`
 * watching packed groups and dead letters come out of a running pipeline,
 * or `bench compression` reading back what it sent. A throw-away consumer
 * group subscribed to the topics; removed again when the tail stops.
 */
import { randomUUID } from 'node:crypto';
import type { Kafka } from 'kafkajs';
import type { ScanRecord, TailOptions, TopicTail } from '../types.js';
import { KafkajsAdmin } from './admin.js';

/** Starts following `topics`; resolves once the consumer joined and `onRecord` will see every record from offset 0. */
export async function tailTopics(kafka: Kafka, topics: string[], onRecord: (r: ScanRecord) => void | Promise<void>, o: TailOptions = {}): Promise<TopicTail> {
  const groupId = `rollout-stream.tail.${randomUUID()}`;
  const consumer = kafka.consumer({
    groupId,
    readUncommitted: false,
    maxWaitTimeInMs: o.maxWaitMs ?? 100,
    allowAutoTopicCreation: false,
    ...(o.maxBytes !== undefined ? { maxBytes: o.maxBytes } : {}),
    ...(o.maxBytesPerPartition !== undefined ? { maxBytesPerPartition: o.maxBytesPerPartition } : {}),
  });
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
  const all = topics.map((topic) => ({ topic }));
  return {
    failed,
    pause: () => consumer.pause(all),
    resume: () => consumer.resume(all),
    async stop() {
      await consumer.disconnect();
      // Best effort: the group committed nothing, and an empty group also expires by itself.
      const admin = await KafkajsAdmin.connect(kafka).catch(() => null);
      await admin?.deleteGroups([groupId]).catch(() => undefined);
      await admin?.close();
    },
  };
}

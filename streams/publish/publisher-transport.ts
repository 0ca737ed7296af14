/**
 * The one place the publisher touches the Kafka client (STYLE.md: hide the
 * client library behind our own small interfaces). A transport sends
 * records to partitions the caller chose and reports how many partitions
 * the topic has; the publisher decides everything else.
 */
import type { Kafka, Producer } from 'kafkajs';
import { RolloutStreamError } from '../../errors/index.js';
import { compressionType, type CompressionName } from '../kafka/kafkajs/compression.js';
import { sendEveryPartition } from '../kafka/kafkajs/send-every-partition.js';

/** One record with its partition already chosen (the publisher picks it, never the client). */
export interface OutgoingRecord {
  key: string;
  value: Buffer;
  partition: number;
}

export interface PublisherTransport {
  /** The topic's partition count, read once at connect. */
  readonly partitions: number;
  /** Sends `records` in order and resolves once all of them are acknowledged by every in-sync replica. */
  send(records: OutgoingRecord[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * A kafkajs producer for `topic`: idempotent (so a retried request never
 * writes a record twice), acks=all, one request in flight (so records of a
 * partition keep their order across retries), no topic auto-creation.
 * Throws `RolloutStreamError` (`topic_missing`) when the topic does not exist.
 */
export async function connectKafkaTransport(kafka: Kafka, topic: string, compression: CompressionName = 'none'): Promise<PublisherTransport> {
  const admin = kafka.admin();
  await admin.connect();
  let partitions: number;
  try {
    // This topic's metadata only: a request for every topic (listTopics)
    // fails while any partition anywhere in the cluster has no leader.
    const meta = await admin.fetchTopicMetadata({ topics: [topic] }).catch((e: { type?: string }) => {
      if (e.type !== 'UNKNOWN_TOPIC_OR_PARTITION') throw e;
      throw new RolloutStreamError('topic_missing', `topic ${topic} does not exist; create it with ./rollout-stream topics create (with the same --prefix)`);
    });
    partitions = meta.topics[0]!.partitions.length;
  } finally {
    await admin.disconnect();
  }
  const producer: Producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  await producer.connect();
  const codec = compressionType(compression);
  return {
    partitions,
    async send(records) {
      if (records.length === 0) return;
      // Every partition checked in kafkajs's answer: a leader change can make it skip one (send-every-partition.ts).
      await sendEveryPartition(producer, topic, records.map((r) => ({ key: r.key, value: r.value, partition: r.partition })), codec);
    },
    close: () => producer.disconnect(),
  };
}

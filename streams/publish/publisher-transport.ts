/**
 * The one place the publisher touches Kafka (STYLE.md: hide the client
 * library behind our own small interfaces). A transport sends records to
 * partitions the caller chose and reports how many partitions the topic
 * has; the publisher decides everything else.
 */
import { RolloutStreamError } from '../../errors/index.js';
import type { CompressionName, OpsClient } from '../kafka/types.js';

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
 * A transport over `kafka`'s chunking sink for `topic`: idempotent (so a
 * retried request never writes a record twice), acks=all, one request in
 * flight (so records of a partition keep their order across retries), no
 * topic auto-creation, every partition checked in the broker's answer (a
 * leader change can make the client skip one: OpsClient.idempotentSink).
 * A row above the topic's `max.message.bytes` is written as a chunk set in
 * a transaction of its own (OpsClient.chunkingSink; `transactionalId` names
 * that producer, default `rollout-stream.publisher.<uuid>`); `send` resolves
 * once that transaction committed too. Closing the transport closes `kafka`.
 * Throws `RolloutStreamError` (`topic_missing`) when the topic does not exist.
 */
export async function connectKafkaTransport(kafka: OpsClient, topic: string, compression: CompressionName = 'none', transactionalId?: string): Promise<PublisherTransport> {
  const admin = await kafka.admin();
  let partitions: number;
  try {
    // This topic's metadata only: a request for every topic (listTopics)
    // fails while any partition anywhere in the cluster has no leader.
    partitions = await admin.partitionCount(topic).catch((e: unknown) => {
      if (!(e instanceof RolloutStreamError) || e.code !== 'unknown_topic') throw e;
      throw new RolloutStreamError('topic_missing', `topic ${topic} does not exist; create it with ./rollout-stream topics create (with the same --prefix)`);
    });
  } finally {
    await admin.close();
  }
  const sink = await kafka.chunkingSink({ compression, ...(transactionalId !== undefined ? { transactionalId } : {}) });
  return {
    partitions,
    async send(records) {
      if (records.length === 0) return;
      await sink.send(records.map((r) => ({ topic, key: r.key, value: r.value, partition: r.partition })));
    },
    async close() {
      await sink.close();
      await kafka.close();
    },
  };
}

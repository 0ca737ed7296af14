/**
 * The one load of @confluentinc/kafka-javascript (a CommonJS module with a
 * native addon, librdkafka): the adapter's files take its classes from here.
 */
import { createRequire } from 'node:module';

export type Confluent = typeof import('@confluentinc/kafka-javascript');

export const confluent: Confluent = createRequire(import.meta.url)('@confluentinc/kafka-javascript') as Confluent;

/**
 * Makes `consume(n)` wait its timeout for the first message only and then
 * take what is ready (the node binding's own KafkaJS API does this; the
 * setter is not in its typings). Otherwise each call waits for `n` messages.
 */
export function consumeReadyMessages(c: import('@confluentinc/kafka-javascript').KafkaConsumer): void {
  (c as unknown as { setDefaultIsTimeoutOnlyForFirstMessage(v: boolean): void }).setDefaultIsTimeoutOnlyForFirstMessage(true);
}

/** What `connect` asks for: the cluster's brokers, not every topic's metadata (which fails while any partition anywhere has no leader). */
export const CONNECT = { allTopics: false, timeout: 30_000 };

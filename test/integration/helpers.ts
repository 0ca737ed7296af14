/** Shared helpers for integration tests: a config with its own topic prefix per test. */
import { randomUUID } from 'node:crypto';
import '../../streams/kafka/kafkajs/speedups.js'; // before kafkajs loads: createKafka refuses a kafkajs without the send-retry fix
import kafkajs, { type Admin, type Kafka } from 'kafkajs';
import { loadConfig } from '../../config/load.js';
import type { Config } from '../../config/schema.js';
import type { LoadgenEvent } from '../../loadgen/index.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { createKafka } from '../../streams/kafka/kafkajs/client.js';
import { KafkajsAdmin } from '../../streams/kafka/kafkajs/admin.js';
import { KafkajsOpsClient } from '../../streams/kafka/kafkajs/ops-client.js';
import type { OpsAdmin, OpsClient } from '../../streams/kafka/types.js';
import { compressionType, type CompressionName } from '../../streams/kafka/kafkajs/compression.js';
import { createRegistry } from '../../streams/codecs/schema-registry.js';
import { RowProducer } from '../../tools/row-producer.js';
import type { SchemaRegistryClient } from '../../streams/codecs/schema-registry.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { createTopics } from '../../streams/topics/create.js';
import { sleep } from './stage-processes.js';

export interface TestEnv {
  config: Config;
  prefix: string;
  kafka: Kafka;
  admin: Admin;
  /** The ops seam over `kafka` and `admin` (row producer, topic creation). */
  ops: OpsClient;
  opsAdmin: OpsAdmin;
  registry: SchemaRegistryClient;
  close(): Promise<void>;
}

/** A fresh prefix (`it.<name>.<random>.`), its topics created, and connected clients. */
export async function testEnv(name: string, overrides: Array<[string[], unknown]> = []): Promise<TestEnv> {
  const prefix = `it.${name}.${randomUUID().slice(0, 8)}.`;
  const { config } = loadConfig({ file: undefined, overrides: [[['topics', 'prefix'], prefix], ...overrides] });
  const kafka = createKafka(config.kafka, `test-${name}`);
  const admin = kafka.admin();
  await admin.connect();
  const registry = createRegistry(config.kafka);
  const opsAdmin = KafkajsAdmin.over(admin);
  await createTopics(opsAdmin, registry, config);
  return { config, prefix, kafka, admin, ops: new KafkajsOpsClient(kafka), opsAdmin, registry, close: () => admin.disconnect() };
}

/** A connected producer of the prefix's row topic (Avro rows through the registry). */
export async function connectRowProducer(e: TestEnv, flushBytes = 64 * 1024): Promise<RowProducer> {
  const names = topicNames(e.prefix);
  const codec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), e.registry).init();
  const producer = new RowProducer({ kafka: e.ops, topic: names.rowCompleted, codec, flushBytes });
  await producer.connect();
  return producer;
}

/** Sends `events` in `slices` parts with a pause after each, so a run spans a disturbance; then disconnects. */
export async function sendInSlices(producer: RowProducer, events: LoadgenEvent[], slices: number, pauseMs: number): Promise<void> {
  const size = Math.ceil(events.length / slices);
  for (let i = 0; i < slices; i++) {
    await producer.send(events.slice(i * size, (i + 1) * size));
    await sleep(pauseMs);
  }
  await producer.disconnect();
}

/** Deterministic "random" numbers in [0, 1) (a linear congruential generator), so a failure can be replayed. */
export function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const { CompressionCodecs } = kafkajs;

/** Counts the batches kafkajs decompresses with `name` while `fn` runs: proof the broker handed them out compressed. */
export async function countingDecompressions<T>(name: CompressionName, fn: () => Promise<T>): Promise<{ result: T; batches: number }> {
  if (name === 'none') return { result: await fn(), batches: 0 };
  const type = compressionType(name) as Exclude<ReturnType<typeof compressionType>, 0>;
  const original = CompressionCodecs[type] as () => { compress(e: unknown): Promise<Buffer>; decompress(b: Buffer): Promise<Buffer> };
  let batches = 0;
  CompressionCodecs[type] = () => {
    const codec = original();
    return { compress: (e: unknown) => codec.compress(e), decompress: (b: Buffer) => (batches++, codec.decompress(b)) };
  };
  try {
    return { result: await fn(), batches };
  } finally {
    CompressionCodecs[type] = original;
  }
}

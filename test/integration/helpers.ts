/** Shared helpers for integration tests: a config with its own topic prefix per test. */
import { randomUUID } from 'node:crypto';
import type { Admin, Kafka } from 'kafkajs';
import { loadConfig } from '../../config/load.js';
import type { Config } from '../../config/schema.js';
import { createKafka, createRegistry } from '../../streams/kafka-client.js';
import type { SchemaRegistryClient } from '../../streams/schema-registry.js';
import { createTopics } from '../../streams/topics.js';

export interface TestEnv {
  config: Config;
  prefix: string;
  kafka: Kafka;
  admin: Admin;
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
  await createTopics(admin, registry, config);
  return { config, prefix, kafka, admin, registry, close: () => admin.disconnect() };
}

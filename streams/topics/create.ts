/** Idempotent creation of the topics of `names.ts` and registration of their value schemas under `<topic>-value`. */
import type { Admin } from 'kafkajs';
import type { Config } from '../../config/schema.js';
import { avroSchema } from '../../schemas/index.js';
import type { SchemaRegistryClient } from '../codecs/schema-registry.js';
import { subjectOf, topicSpecs } from './names.js';

export interface CreateTopicsResult {
  created: string[];
  existing: string[];
  schemaIds: Record<string, number>;
}

/** Creates missing topics and registers every value schema; running it again changes nothing. */
export async function createTopics(admin: Admin, registry: SchemaRegistryClient, config: Config): Promise<CreateTopicsResult> {
  const specs = topicSpecs(config);
  const existing = new Set(await admin.listTopics());
  const missing = specs.filter((s) => !existing.has(s.topic));
  if (missing.length > 0) {
    await admin.createTopics({
      waitForLeaders: true,
      topics: missing.map((s) => ({
        topic: s.topic,
        numPartitions: s.numPartitions,
        replicationFactor: config.topics.replication_factor,
        configEntries: s.configEntries,
      })),
    });
  }
  const schemaIds: Record<string, number> = {};
  for (const s of specs) {
    if (s.kind) schemaIds[subjectOf(s.topic)] = await registry.register(subjectOf(s.topic), avroSchema(s.kind));
  }
  return {
    created: missing.map((s) => s.topic),
    existing: specs.filter((s) => existing.has(s.topic)).map((s) => s.topic),
    schemaIds,
  };
}

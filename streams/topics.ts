/**
 * The topics of SPEC §1 (names, prefixes, configs) and their idempotent
 * creation with schema registration under `<topic>-value`.
 */
import type { Admin } from 'kafkajs';
import type { Config } from '../config/schema.js';
import { avroSchema, type RecordKind } from '../schemas/index.js';
import type { SchemaRegistryClient } from './schema-registry.js';

export type TopicRole = 'rowCompleted' | 'groupComplete' | 'penalized' | 'packed' | 'deadLetter' | 'metrics';

export const BASE_TOPIC_NAMES: Record<TopicRole, string> = {
  rowCompleted: 'rollout.row-completed',
  groupComplete: 'rollout.group-complete',
  penalized: 'rollout.penalized',
  packed: 'rollout.packed',
  deadLetter: 'rollout.dead-letter',
  metrics: 'rollout.metrics',
};

/** The accumulator's compacted changelog (internal, not Avro-registered). */
export const ACCUMULATE_CHANGELOG = 'rollout-stream.accumulate-changelog';
/** Internal, keyed by batch id: per-partition batch closes and per-group metric rows (streams/batch-progress.ts). */
export const BATCH_PROGRESS = 'rollout-stream.batch-progress';
/** The batch-metrics aggregator's compacted changelog. */
export const BATCH_METRICS_CHANGELOG = 'rollout-stream.batch-metrics-changelog';

export type TopicNames = Record<TopicRole, string> & {
  accumulateChangelog: string;
  batchProgress: string;
  batchMetricsChangelog: string;
};

export function topicNames(prefix: string): TopicNames {
  const names = Object.fromEntries(
    Object.entries(BASE_TOPIC_NAMES).map(([role, name]) => [role, `${prefix}${name}`]),
  ) as Record<TopicRole, string>;
  return {
    ...names,
    accumulateChangelog: `${prefix}${ACCUMULATE_CHANGELOG}`,
    batchProgress: `${prefix}${BATCH_PROGRESS}`,
    batchMetricsChangelog: `${prefix}${BATCH_METRICS_CHANGELOG}`,
  };
}

export const subjectOf = (topic: string): string => `${topic}-value`;

export interface TopicSpec {
  topic: string;
  kind: RecordKind | null;
  numPartitions: number;
  configEntries: Array<{ name: string; value: string }>;
}

/** Every topic with its configuration: partition counts, size limits, cleanup policy. */
export function topicSpecs(config: Config): TopicSpec[] {
  const names = topicNames(config.topics.prefix);
  const maxBytes = String(config.kafka.max_message_bytes);
  const common = [
    { name: 'max.message.bytes', value: maxBytes },
    { name: 'cleanup.policy', value: 'delete' },
  ];
  const specs: TopicSpec[] = (Object.keys(BASE_TOPIC_NAMES) as TopicRole[]).map((role) => ({
    topic: names[role],
    kind: role,
    numPartitions: config.topics.partitions,
    configEntries: common,
  }));
  const compacted = [
    { name: 'max.message.bytes', value: maxBytes },
    { name: 'cleanup.policy', value: 'compact' },
    { name: 'min.compaction.lag.ms', value: '60000' },
  ];
  for (const topic of [names.accumulateChangelog, names.batchMetricsChangelog]) {
    specs.push({ topic, kind: null, numPartitions: config.topics.partitions, configEntries: compacted });
  }
  specs.push({ topic: names.batchProgress, kind: null, numPartitions: config.topics.partitions, configEntries: common });
  return specs;
}

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

/**
 * The topics of SPEC §1: names, prefixes and configs (pure; creating them is
 * `create.ts`).
 */
import type { Config } from '../../config/schema.js';
import type { RecordKind } from '../../schemas/index.js';

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
/** Internal, keyed by batch id: per-partition batch closes and per-group metric rows (streams/stages/batch-progress.ts). */
export const BATCH_PROGRESS = 'rollout-stream.batch-progress';
/** The batch-metrics aggregator's compacted changelog. */
export const BATCH_METRICS_CHANGELOG = 'rollout-stream.batch-metrics-changelog';
/** Pack's compacted ledger of the groups it packed (streams/stages/pack-ledger.ts): a group is packed once. */
export const PACK_LEDGER = 'rollout-stream.pack-ledger';

export type TopicNames = Record<TopicRole, string> & {
  accumulateChangelog: string;
  batchProgress: string;
  batchMetricsChangelog: string;
  packLedger: string;
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
    packLedger: `${prefix}${PACK_LEDGER}`,
  };
}

export const subjectOf = (topic: string): string => `${topic}-value`;

export interface TopicSpec {
  topic: string;
  kind: RecordKind | null;
  numPartitions: number;
  configEntries: Array<{ name: string; value: string }>;
}

/** Every topic with its configuration: partition counts, size limits, cleanup policy, retention, the packed topic's compression. */
export function topicSpecs(config: Config): TopicSpec[] {
  const names = topicNames(config.topics.prefix);
  // Writers read each topic's limit back (streams/chunks/record-limits.ts) and chunk what is above it;
  // compaction would keep one chunk per key, so the changelogs keep the client's own limit.
  const maxBytes = String(config.topics.max_message_bytes ?? config.kafka.max_message_bytes);
  const changelogBytes = String(config.kafka.max_message_bytes);
  // retention.ms only where records are deleted: compaction keeps the last value per key regardless.
  const common = [
    { name: 'max.message.bytes', value: maxBytes },
    { name: 'cleanup.policy', value: 'delete' },
    { name: 'retention.ms', value: String(config.topics.retention_ms) },
  ];
  const packedCompression = config.topics.packed_compression;
  const specs: TopicSpec[] = (Object.keys(BASE_TOPIC_NAMES) as TopicRole[]).map((role) => ({
    topic: names[role],
    kind: role,
    numPartitions: config.topics.partitions,
    configEntries:
      role === 'packed' ? [...common, { name: 'compression.type', value: packedCompression === 'none' ? 'uncompressed' : packedCompression }] : common,
  }));
  const compacted = [
    { name: 'max.message.bytes', value: changelogBytes },
    { name: 'cleanup.policy', value: 'compact' },
    { name: 'min.compaction.lag.ms', value: '60000' },
  ];
  for (const topic of [names.accumulateChangelog, names.batchMetricsChangelog, names.packLedger]) {
    specs.push({ topic, kind: null, numPartitions: config.topics.partitions, configEntries: compacted });
  }
  specs.push({ topic: names.batchProgress, kind: null, numPartitions: config.topics.partitions, configEntries: common });
  return specs;
}

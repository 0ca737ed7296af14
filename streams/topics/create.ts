/** Idempotent creation of the topics of `names.ts` and registration of their value schemas under `<topic>-value`. */
import type { Config, TopicsConfig } from '../../config/schema.js';
import { ConfigError } from '../../errors/index.js';
import { avroSchema } from '../../schemas/index.js';
import type { SchemaRegistryClient } from '../codecs/schema-registry.js';
import type { OpsAdmin } from '../kafka/types.js';
import { subjectOf, topicSpecs, type TopicSpec } from './names.js';


export interface CreateTopicsResult {
  created: string[];
  existing: string[];
  /** Configs of existing topics that differ from what `topics create` would give them now (it changes none). */
  differing: ConfigDifference[];
  schemaIds: Record<string, number>;
  /** The replication the created topics got, and where it came from. */
  replication: Replication;
}

export interface ConfigDifference {
  topic: string;
  name: string;
  /** What the topic has (absent: the broker did not report it). */
  actual: string | undefined;
  /** What the configuration asks for. */
  wanted: string;
}

/**
 * The configs of `specs`' existing topics that differ from their spec (the
 * spec's own entries; replication is not compared). `topics create` creates
 * missing topics only, so a setting changed later — e.g.
 * `topics.packed_compression` — reaches an existing topic only by an alter.
 */
export async function configDifferences(admin: Pick<OpsAdmin, 'topicConfigs'>, specs: readonly TopicSpec[]): Promise<ConfigDifference[]> {
  const names = [...new Set(specs.flatMap((s) => s.configEntries.map((c) => c.name)))];
  const actual = await admin.topicConfigs(
    specs.map((s) => s.topic),
    names,
  );
  return specs.flatMap((s) =>
    s.configEntries
      .map((c) => ({ topic: s.topic, name: c.name, actual: actual.get(s.topic)?.[c.name], wanted: c.value }))
      .filter((d) => d.actual !== d.wanted),
  );
}

export interface Replication {
  replicationFactor: number;
  minInsyncReplicas: number;
  /** Brokers the cluster reported when it was decided. */
  brokers: number;
  /** 'config' when both figures were given, else 'cluster' (decided from `brokers`). */
  source: 'config' | 'cluster';
}

/**
 * The replication factor and `min.insync.replicas` for new topics (SPEC §8.1):
 * `topics.replication_factor` / `topics.min_insync_replicas` when set, else
 * from the live brokers (one broker: 1 and 1; three or more: 3 and 2). Throws
 * a ConfigError naming the key when the cluster cannot satisfy the request.
 */
export async function resolveReplication(admin: Pick<OpsAdmin, 'brokers'>, topics: TopicsConfig): Promise<Replication> {
  const brokers = await admin.brokers();
  const n = brokers.length;
  const rf = topics.replication_factor ?? Math.min(3, n);
  if (rf > n) {
    throw new ConfigError(
      'topics.replication_factor',
      `${rf} replicas requested but the cluster has ${n} live broker(s) (${brokers.map((b) => `${b.host}:${b.port}`).join(', ')}); ` +
        'lower topics.replication_factor (or leave it unset to follow the cluster) or start the missing brokers',
    );
  }
  const minIsr = topics.min_insync_replicas ?? (rf >= 3 ? 2 : 1);
  if (minIsr > rf) {
    throw new ConfigError(
      'topics.min_insync_replicas',
      `${minIsr} is more than the replication factor (${rf}${topics.replication_factor === null ? `, decided from ${n} broker(s)` : ''}): no write could ever succeed; lower it or raise topics.replication_factor`,
    );
  }
  return {
    replicationFactor: rf,
    minInsyncReplicas: minIsr,
    brokers: n,
    source: topics.replication_factor !== null && topics.min_insync_replicas !== null ? 'config' : 'cluster',
  };
}

/** Creates those of `specs` that do not exist yet, replicated as `resolveReplication` decides; returns the names created. */
export async function createMissingTopics(admin: OpsAdmin, specs: readonly TopicSpec[], topics: TopicsConfig): Promise<{ created: string[]; replication: Replication }> {
  const ops = admin;
  const replication = await resolveReplication(ops, topics);
  const existing = await ops.existingTopics(specs.map((s) => s.topic));
  const missing = specs.filter((s) => !existing.has(s.topic));
  if (missing.length > 0) {
    await ops.createTopics(
      missing.map((s) => ({
        topic: s.topic,
        numPartitions: s.numPartitions,
        replicationFactor: replication.replicationFactor,
        configEntries: [...s.configEntries, { name: 'min.insync.replicas', value: String(replication.minInsyncReplicas) }],
      })),
    );
  }
  await ops.waitForLeaders(missing.map((s) => s.topic));
  return { created: missing.map((s) => s.topic), replication };
}

/** Creates missing topics and registers every value schema; running it again changes nothing. */
export async function createTopics(admin: OpsAdmin, registry: SchemaRegistryClient, config: Config): Promise<CreateTopicsResult> {
  const specs = topicSpecs(config);
  const { created, replication } = await createMissingTopics(admin, specs, config.topics);
  const schemaIds: Record<string, number> = {};
  for (const s of specs) {
    if (s.kind) schemaIds[subjectOf(s.topic)] = await registry.register(subjectOf(s.topic), avroSchema(s.kind));
  }
  const existing = specs.filter((s) => !created.includes(s.topic));
  return {
    created,
    existing: existing.map((s) => s.topic),
    differing: await configDifferences(admin, existing),
    schemaIds,
    replication,
  };
}

/** KafkaAdmin (and OpsAdmin) over the kafkajs admin client: the cluster questions the runtime and the commands ask. */
import './speedups.js'; // before kafkajs loads: its patches and the send-retry fix (send-retry.ts)
import kafkajs, { type Admin, type Kafka } from 'kafkajs';
import { RolloutStreamError } from '../../../errors/index.js';
import type { NewTopic, Offset, OpsAdmin, PartitionOffsets } from '../types.js';
import { kafkaErrorCode } from './errors.js';

const { ConfigResourceTypes } = kafkajs;

async function coded<T>(doing: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof RolloutStreamError) throw e;
    const code = kafkaErrorCode(e);
    if (code === null) throw e;
    throw new RolloutStreamError(code, `${doing}: ${(e as Error).message}`, { cause: e, retriable: code !== 'authorization_failed' });
  }
}

/** The protocol error's name kafkajs gives a broker's answer (`UNKNOWN_TOPIC_OR_PARTITION`), if any. */
const errorType = (e: unknown): string | undefined => (e as { type?: string } | null)?.type;

export class KafkajsAdmin implements OpsAdmin {
  private constructor(
    readonly admin: Admin,
    /** False: the caller connects and disconnects the client (`close` leaves it alone). */
    private readonly owned = true,
  ) {}

  /** Over an admin client the caller owns. */
  static over(admin: Admin): KafkajsAdmin {
    return new KafkajsAdmin(admin, false);
  }

  static async connect(kafka: Kafka): Promise<KafkajsAdmin> {
    const admin = kafka.admin();
    await coded('connecting the admin client', () => admin.connect());
    return new KafkajsAdmin(admin);
  }

  listTopics(): Promise<string[]> {
    return coded('listing topics', () => this.admin.listTopics());
  }

  /**
   * Asks for this topic's metadata only: a metadata request for every topic
   * fails while any partition anywhere in the cluster has no leader (a
   * replication-1 topic on a lost broker), which must not stop us.
   */
  async partitionCount(topic: string): Promise<number> {
    try {
      const meta = await this.admin.fetchTopicMetadata({ topics: [topic] });
      return meta.topics[0]!.partitions.length;
    } catch (e) {
      if ((e as { type?: string }).type === 'UNKNOWN_TOPIC_OR_PARTITION') throw new RolloutStreamError('unknown_topic', `topic ${topic} does not exist`, { cause: e });
      return coded(`reading the metadata of ${topic}`, () => Promise.reject(e));
    }
  }

  async topicOffsets(topic: string): Promise<PartitionOffsets[]> {
    const offsets = await coded(`reading the offsets of ${topic}`, () => this.admin.fetchTopicOffsets(topic));
    return offsets.map((o) => ({ partition: o.partition, low: o.low, high: o.high })).sort((a, b) => a.partition - b.partition);
  }

  async offsetsForTime(topic: string, timeMs: number): Promise<Map<number, Offset>> {
    const offsets = await coded(`finding the offsets of ${topic} at ${timeMs}`, () => this.admin.fetchTopicOffsetsByTimestamp(topic, timeMs));
    return new Map(offsets.map((o) => [o.partition, o.offset]));
  }

  async committedOffsets(groupId: string, topic: string): Promise<Map<number, Offset>> {
    const res = await coded(`reading the offsets of group ${groupId}`, () => this.admin.fetchOffsets({ groupId, topics: [topic] }));
    return new Map((res[0]?.partitions ?? []).filter((p) => BigInt(p.offset) >= 0n).map((p) => [p.partition, p.offset]));
  }

  async brokerCount(): Promise<number> {
    const cluster = await coded('describing the cluster', () => this.admin.describeCluster());
    return cluster.brokers.length;
  }

  async describeGroup(groupId: string): Promise<{ state: string; protocol: string; members: number }> {
    const { groups } = await coded(`describing group ${groupId}`, () => this.admin.describeGroups([groupId]));
    const g = groups[0];
    return { state: g?.state ?? 'Dead', protocol: g?.protocol ?? '', members: g?.members.length ?? 0 };
  }

  async brokers(): Promise<Array<{ host: string; port: number }>> {
    const cluster = await coded('describing the cluster', () => this.admin.describeCluster());
    return cluster.brokers.map((b) => ({ host: b.host, port: b.port }));
  }

  async existingTopics(topics: readonly string[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (const topic of topics) {
      try {
        await this.admin.fetchTopicMetadata({ topics: [topic] });
        out.add(topic);
      } catch (e) {
        if (errorType(e) !== 'UNKNOWN_TOPIC_OR_PARTITION') await coded(`reading the metadata of ${topic}`, () => Promise.reject(e));
      }
    }
    return out;
  }

  async createTopics(topics: NewTopic[]): Promise<void> {
    await coded(`creating ${topics.map((t) => t.topic).join(', ')}`, () =>
      this.admin.createTopics({
        waitForLeaders: false,
        topics: topics.map((t) => ({
          topic: t.topic,
          numPartitions: t.numPartitions,
          ...(t.replicationFactor !== undefined ? { replicationFactor: t.replicationFactor } : {}),
          ...(t.configEntries ? { configEntries: t.configEntries } : {}),
        })),
      }),
    );
  }

  async topicConfigs(topics: readonly string[], names: readonly string[]): Promise<Map<string, Record<string, string>>> {
    if (topics.length === 0) return new Map();
    const described = await coded(`describing the configs of ${topics.join(', ')}`, () =>
      this.admin.describeConfigs({
        includeSynonyms: false,
        resources: topics.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: [...names] })),
      }),
    );
    return new Map(
      described.resources.map((r) => [r.resourceName, Object.fromEntries(r.configEntries.map((e) => [e.configName, e.configValue]))]),
    );
  }

  /**
   * Polls each topic's metadata. kafkajs's own wait (`createTopics` with
   * `waitForLeaders`) gives up when the broker it asks has not caught up with
   * the new topics yet ("does not host this topic-partition", as a
   * just-restarted broker of a cluster answers for a moment); that, and no
   * leader yet, are waited out here.
   */
  async waitForLeaders(topics: readonly string[], timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (const topic of topics) {
      for (;;) {
        try {
          const meta = await this.admin.fetchTopicMetadata({ topics: [topic] });
          if (meta.topics[0]!.partitions.every((p) => p.leader >= 0)) break;
        } catch (e) {
          const type = errorType(e);
          if ((type !== 'UNKNOWN_TOPIC_OR_PARTITION' && type !== 'LEADER_NOT_AVAILABLE') || Date.now() > until) {
            await coded(`waiting for the leaders of ${topic}`, () => Promise.reject(e));
          }
        }
        if (Date.now() > until) {
          throw new RolloutStreamError('partition_unavailable', `topic ${topic} has partitions without a leader ${timeoutMs / 1000} s after it was created`, { retriable: true });
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  async deleteTopics(topics: string[]): Promise<void> {
    await coded(`deleting ${topics.join(', ')}`, () => this.admin.deleteTopics({ topics }));
  }

  /** Deletes consumer groups (they must be empty). */
  async deleteGroups(groupIds: string[]): Promise<void> {
    await coded(`deleting groups ${groupIds.join(', ')}`, () => this.admin.deleteGroups(groupIds));
  }

  async close(): Promise<void> {
    if (this.owned) await this.admin.disconnect().catch(() => undefined);
  }
}

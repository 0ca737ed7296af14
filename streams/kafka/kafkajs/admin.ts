/** KafkaAdmin over the kafkajs admin client: the cluster questions the runtime and the commands ask. */
import type { Admin, Kafka } from 'kafkajs';
import { RolloutStreamError } from '../../../errors/index.js';
import type { KafkaAdmin, Offset, PartitionOffsets } from '../types.js';
import { kafkaErrorCode } from './errors.js';

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

export class KafkajsAdmin implements KafkaAdmin {
  private constructor(
    readonly admin: Admin,
    /** False: the caller connects and disconnects the client (`close` leaves it alone). */
    private readonly owned = true,
  ) {}

  /** Over an admin client the caller owns. */
  static over(admin: Admin): KafkaAdmin {
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

  async close(): Promise<void> {
    if (this.owned) await this.admin.disconnect().catch(() => undefined);
  }
}

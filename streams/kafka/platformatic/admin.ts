/** KafkaAdmin over the @platformatic/kafka admin client: the cluster questions the runtime and the commands ask. */
import { Admin, ConfigResourceTypes } from '@platformatic/kafka';
import { RolloutStreamError } from '../../../errors/index.js';
import type { KafkaAdmin, Offset, PartitionOffsets } from '../types.js';
import { codedCall } from './errors.js';
import type { PlatformaticBaseOptions } from './options.js';

export class PlatformaticAdmin implements KafkaAdmin {
  readonly admin: Admin;

  constructor(base: PlatformaticBaseOptions) {
    this.admin = new Admin({ ...base });
  }

  listTopics(): Promise<string[]> {
    return codedCall('listing topics', () => this.admin.listTopics());
  }

  /** Asks for this topic's metadata only (a request for every topic fails while any partition anywhere has no leader). */
  async partitionCount(topic: string): Promise<number> {
    const meta = await codedCall(`reading the metadata of ${topic}`, () => this.admin.metadata({ topics: [topic], forceUpdate: true })).catch((e: unknown) => {
      // The client answers a missing topic with a UserError "Unknown topic <name>." (autocreateTopics off).
      const missing = (e instanceof RolloutStreamError && e.code === 'partition_unavailable') || /^Unknown topic /.test((e as Error)?.message ?? '');
      if (missing) throw new RolloutStreamError('unknown_topic', `topic ${topic} does not exist`, { cause: e });
      throw e;
    });
    const t = meta.topics.get(topic);
    if (!t) throw new RolloutStreamError('unknown_topic', `topic ${topic} does not exist`);
    return t.partitionsCount;
  }

  /** Per partition, the offset ListOffsets answers for `timestamp` (-2 log start, -1 high watermark). */
  private async listed(topic: string, timestamp: bigint): Promise<Map<number, bigint>> {
    const count = await this.partitionCount(topic);
    const res = await codedCall(`reading the offsets of ${topic}`, () =>
      this.admin.listOffsets({ topics: [{ name: topic, partitions: [...Array(count).keys()].map((partitionIndex) => ({ partitionIndex, timestamp })) }] }),
    );
    return new Map((res[0]?.partitions ?? []).map((p) => [p.partitionIndex, p.offset]));
  }

  async topicOffsets(topic: string): Promise<PartitionOffsets[]> {
    const [low, high] = [await this.listed(topic, -2n), await this.listed(topic, -1n)];
    return [...high].map(([partition, h]) => ({ partition, low: (low.get(partition) ?? 0n).toString(), high: h.toString() })).sort((a, b) => a.partition - b.partition);
  }

  async offsetsForTime(topic: string, timeMs: number): Promise<Map<number, Offset>> {
    const [at, high] = [await this.listed(topic, BigInt(timeMs)), await this.listed(topic, -1n)];
    return new Map([...high].map(([p, h]) => [p, (at.get(p) !== undefined && at.get(p)! >= 0n ? at.get(p)! : h).toString()]));
  }

  async committedOffsets(groupId: string, topic: string): Promise<Map<number, Offset>> {
    const count = await this.partitionCount(topic);
    const res = await codedCall(`reading the offsets of group ${groupId}`, () =>
      this.admin.listConsumerGroupOffsets({ groups: [{ groupId, topics: [{ name: topic, partitionIndexes: [...Array(count).keys()] }] }] }),
    );
    const parts = res[0]?.topics.find((t) => t.name === topic)?.partitions ?? [];
    return new Map(parts.filter((p) => p.committedOffset >= 0n).map((p) => [p.partitionIndex, p.committedOffset.toString()]));
  }

  async brokerCount(): Promise<number> {
    const meta = await codedCall('describing the cluster', () => this.admin.metadata({ topics: [], forceUpdate: true }));
    return meta.brokers.size;
  }

  async describeGroup(groupId: string): Promise<{ state: string; protocol: string; members: number }> {
    const groups = await codedCall(`describing group ${groupId}`, () => this.admin.describeGroups({ groups: [groupId] }));
    const g = groups.get(groupId);
    return { state: g?.state ?? 'Dead', protocol: g?.protocol ?? '', members: g?.members.size ?? 0 };
  }

  async topicConfigs(topics: readonly string[], names: readonly string[]): Promise<Map<string, Record<string, string>>> {
    if (topics.length === 0) return new Map();
    const described = await codedCall(`describing the configs of ${topics.join(', ')}`, () =>
      this.admin.describeConfigs({ resources: topics.map((resourceName) => ({ resourceType: ConfigResourceTypes.TOPIC, resourceName, configurationKeys: [...names] })) }),
    );
    return new Map(
      described.map((r) => [r.resourceName, Object.fromEntries(r.configs.filter((c) => c.value !== null).map((c) => [c.name, c.value as string]))]),
    );
  }

  async close(): Promise<void> {
    await this.admin.close().catch(() => undefined);
  }
}

/**
 * KafkaAdmin over librdkafka's AdminClient (the cluster questions the
 * runtime and the commands ask), plus a producer handle for Metadata, which
 * the admin API does not expose (the broker count).
 */
import type { IAdminClient, Producer } from '@confluentinc/kafka-javascript';
import { RolloutStreamError } from '../../../errors/index.js';
import type { KafkaAdmin, Offset, PartitionOffsets } from '../types.js';
import { callback, coded, codedCall, confluentErrorCode } from './errors.js';
import { CONNECT, confluent } from './library.js';
import type { RdkafkaProperties } from './options.js';

const TIMEOUT_MS = 30_000;
/** librdkafka's ConsumerGroupStates, in the names kafkajs and the broker use. */
const STATES = ['Unknown', 'PreparingRebalance', 'CompletingRebalance', 'Stable', 'Dead', 'Empty'];

export class ConfluentAdmin implements KafkaAdmin {
  private readonly admin: IAdminClient;
  private metadataClient: Promise<Producer> | null = null;

  constructor(private readonly base: RdkafkaProperties) {
    this.admin = confluent.AdminClient.create({ ...base } as never);
  }

  listTopics(): Promise<string[]> {
    return codedCall('listing topics', () => callback<string[]>((cb) => this.admin.listTopics({ timeout: TIMEOUT_MS }, cb)));
  }

  /** Describes this topic only (a request for every topic fails while any partition anywhere has no leader). */
  async partitionCount(topic: string): Promise<number> {
    const described = await callback<Array<{ partitions: unknown[]; error?: unknown }>>((cb) => this.admin.describeTopics([topic], { timeout: TIMEOUT_MS }, cb)).catch((e: unknown) => {
      throw this.missing(e, topic);
    });
    const t = described[0];
    if (!t || t.error) throw this.missing(t?.error ?? new Error(`no description of ${topic}`), topic);
    return t.partitions.length;
  }

  private missing(e: unknown, topic: string): unknown {
    const code = confluentErrorCode(e);
    if (code === 'partition_unavailable') return new RolloutStreamError('unknown_topic', `topic ${topic} does not exist`, { cause: e });
    return code === null ? e : new RolloutStreamError(code, `describing ${topic}: ${(e as Error).message}`, { cause: e, retriable: true });
  }

  /** Per partition, the offset ListOffsets answers for `spec` (-2 log start, -1 high watermark, else a timestamp). */
  private async listed(topic: string, spec: number): Promise<Map<number, bigint>> {
    const count = await this.partitionCount(topic);
    const res = await codedCall(`reading the offsets of ${topic}`, () =>
      callback<Array<{ partition: number; offset: number }>>((cb) =>
        this.admin.listOffsets(
          [...Array(count).keys()].map((partition) => ({ topic, partition, offset: new confluent.OffsetSpec(spec) })),
          { timeout: TIMEOUT_MS, isolationLevel: 0 },
          cb,
        ),
      ),
    );
    return new Map(res.map((p) => [p.partition, BigInt(p.offset)]));
  }

  async topicOffsets(topic: string): Promise<PartitionOffsets[]> {
    const [low, high] = [await this.listed(topic, -2), await this.listed(topic, -1)];
    return [...high].map(([partition, h]) => ({ partition, low: (low.get(partition) ?? 0n).toString(), high: h.toString() })).sort((a, b) => a.partition - b.partition);
  }

  async offsetsForTime(topic: string, timeMs: number): Promise<Map<number, Offset>> {
    const [at, high] = [await this.listed(topic, timeMs), await this.listed(topic, -1)];
    return new Map([...high].map(([p, h]) => [p, (at.get(p) !== undefined && at.get(p)! >= 0n ? at.get(p)! : h).toString()]));
  }

  /**
   * Stable offsets only: a partition whose offset a transaction has not yet
   * settled comes back with an error (UNSTABLE_OFFSET_COMMIT) rather than
   * being retried by librdkafka, so the question is asked again (up to 10 s).
   */
  async committedOffsets(groupId: string, topic: string): Promise<Map<number, Offset>> {
    const count = await this.partitionCount(topic);
    for (let attempt = 0; ; attempt++) {
      const res = await codedCall(`reading the offsets of group ${groupId}`, () =>
        callback<Array<{ error?: unknown; partitions: Array<{ topic: string; partition: number; offset: number; error?: unknown }> }>>((cb) =>
          this.admin.listConsumerGroupOffsets([{ groupId, partitions: [...Array(count).keys()].map((partition) => ({ topic, partition })) }], { timeout: TIMEOUT_MS, requireStableOffsets: true }, cb),
        ),
      );
      const group = res[0];
      const unsettled = group?.error ?? group?.partitions.find((p) => p.error)?.error;
      if (unsettled && attempt < 100) {
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      if (unsettled) throw coded(unsettled, `reading the offsets of group ${groupId}`);
      const parts = (group?.partitions ?? []).filter((p) => p.topic === topic && p.offset >= 0);
      return new Map(parts.map((p) => [p.partition, String(p.offset)]));
    }
  }

  async brokerCount(): Promise<number> {
    this.metadataClient ??= (async () => {
      const p = new confluent.Producer({ ...this.base } as never);
      await new Promise<void>((resolve, reject) => p.connect(CONNECT, (err) => (err ? reject(err) : resolve())));
      return p;
    })();
    const p = await codedCall('connecting for metadata', () => this.metadataClient!);
    const meta = await codedCall('describing the cluster', () => callback<{ brokers: unknown[] }>((cb) => p.getMetadata({ allTopics: false, timeout: TIMEOUT_MS }, cb)));
    return meta.brokers.length;
  }

  async describeGroup(groupId: string): Promise<{ state: string; protocol: string; members: number }> {
    const res = await codedCall(`describing group ${groupId}`, () =>
      callback<{ groups: Array<{ state: number; protocol: string; members: unknown[]; error?: unknown }> }>((cb) => this.admin.describeGroups([groupId], { timeout: TIMEOUT_MS }, cb)),
    );
    const g = res.groups[0];
    if (!g || g.error) return { state: 'Dead', protocol: '', members: 0 };
    return { state: STATES[g.state] ?? 'Unknown', protocol: g.protocol ?? '', members: g.members.length };
  }

  async close(): Promise<void> {
    this.admin.disconnect();
    const p = await this.metadataClient?.catch(() => null);
    if (p) await new Promise<void>((resolve) => p.disconnect(5_000, () => resolve())).catch(() => undefined);
  }
}

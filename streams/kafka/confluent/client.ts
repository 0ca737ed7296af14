/**
 * KafkaClient over @confluentinc/kafka-javascript 1.10.1 (librdkafka
 * 2.15.1; issue 13 item 2, the client comparison): group sources
 * (source.ts: librdkafka's group membership and fetcher, our own pull),
 * transactional sinks (sink.ts), the admin and scans. Built from our config
 * by `createConfluentClient`.
 *
 * Differences from the kafkajs adapter, all documented where they live:
 * librdkafka runs no custom assignor, so members announce builtin assignors
 * standing in for our protocol names (protocols.ts: a confluent member never
 * shares a group with a kafkajs or @platformatic/kafka one); transactional
 * offsets need a member of the group built by this same client (KIP-447
 * generation check; sink.ts); no transactions v2 (KIP-890). Not the default:
 * kafkajs stays unless the bench says otherwise (bench/README.md "Kafka
 * clients").
 */
import type { KafkaConsumer } from '@confluentinc/kafka-javascript';
import type { KafkaConfig } from '../../../config/schema.js';
import { ConfigError } from '../../../errors/index.js';
import type {
  GroupSource,
  GroupSourceOptions,
  KafkaAdmin,
  KafkaClient,
  PartitionRange,
  ScanCallback,
  ScanOptions,
  ScanResult,
  TransactionalSink,
  TransactionalSinkOptions,
} from '../types.js';
import { ConfluentAdmin } from './admin.js';
import { confluent } from './library.js';
import { baseProperties, type RdkafkaProperties } from './options.js';
import { scanRanges } from './scan.js';
import { ConfluentTransactionalSink, type GroupMembers } from './sink.js';
import { ConfluentGroupSource } from './source.js';

export class ConfluentClient implements KafkaClient, GroupMembers {
  /** The started group sources, by group id (the latest one of a group). */
  private readonly members = new Map<string, ConfluentGroupSource>();

  constructor(
    readonly base: RdkafkaProperties,
    private readonly maxMessageBytes: number,
  ) {}

  member(groupId: string): KafkaConsumer | undefined {
    return this.members.get(groupId)?.consumer;
  }

  groupSource(o: GroupSourceOptions): GroupSource {
    const source: ConfluentGroupSource = new ConfluentGroupSource(
      this.base,
      {
        groupId: o.groupId,
        topic: o.topic,
        sessionTimeoutMs: o.sessionTimeoutMs,
        maxBytes: o.maxBytes,
        ...(o.maxBytesPerPartition !== undefined ? { maxBytesPerPartition: o.maxBytesPerPartition } : {}),
        ...(o.concurrency !== undefined ? { concurrency: o.concurrency } : {}),
        ...(o.protocols ? { protocols: o.protocols } : {}),
      },
      () => {
        if (this.members.get(o.groupId) === source) this.members.delete(o.groupId);
      },
    );
    this.members.set(o.groupId, source);
    return source;
  }

  transactionalSink(transactionalId: string, o: TransactionalSinkOptions): TransactionalSink {
    return new ConfluentTransactionalSink(this.base, transactionalId, {
      transactionTimeoutMs: o.transactionTimeoutMs,
      partitionsOf: o.partitionsOf,
      ...(o.compression ? { compression: o.compression } : {}),
      maxMessageBytes: this.maxMessageBytes,
      members: this,
    });
  }

  async admin(): Promise<KafkaAdmin> {
    return new ConfluentAdmin(this.base);
  }

  scan(ranges: PartitionRange[], onRecord: ScanCallback, options?: ScanOptions): Promise<ScanResult> {
    return scanRanges(this.base, ranges, onRecord, options);
  }

  async close(): Promise<void> {
    // Every producer, consumer and admin is its own librdkafka instance, closed by its user.
  }
}

/**
 * A KafkaClient over @confluentinc/kafka-javascript for `config`;
 * `clientSuffix` distinguishes the processes' client ids. Throws ConfigError
 * when `kafka.compression` names a codec this build of librdkafka lacks
 * (zstd needs libzstd's headers when it is built: `confluent.features`).
 */
export function createConfluentClient(config: KafkaConfig, clientSuffix = ''): ConfluentClient {
  const codec = config.compression;
  if (codec !== 'none' && !confluent.features.includes(codec)) {
    throw new ConfigError('kafka.compression', `${codec} is not in this build of librdkafka (features: ${confluent.features.join(', ')}); for zstd, install libzstd's headers (libzstd-dev) and rebuild @confluentinc/kafka-javascript, or choose another codec`);
  }
  return new ConfluentClient(baseProperties(config, clientSuffix), config.max_message_bytes);
}

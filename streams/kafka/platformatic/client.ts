/**
 * KafkaClient over @platformatic/kafka 2.12.1 (issue 13 item 2, the client
 * comparison): group sources (source.ts: its group membership and low-level
 * fetch, our own pull loop), transactional sinks (sink.ts), the admin and
 * scans. Built from our config by `createPlatformaticClient`.
 *
 * Differences from the kafkajs adapter, all documented where they live:
 * transactional offsets need a member of the group built by this same
 * client (KIP-447 generation check; sink.ts), and there is no transactions
 * v2 (KIP-890). Not the default: kafkajs stays unless the bench says
 * otherwise (bench/README.md "Kafka clients").
 */
import type { Consumer } from '@platformatic/kafka';
import type { KafkaConfig } from '../../../config/schema.js';
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
import { PlatformaticAdmin } from './admin.js';
import { baseOptions, type PlatformaticBaseOptions } from './options.js';
import { scanRanges } from './scan.js';
import { PlatformaticTransactionalSink, type GroupMembers } from './sink.js';
import { PlatformaticGroupSource } from './source.js';

export class PlatformaticClient implements KafkaClient, GroupMembers {
  /** The started group sources, by group id (the latest one of a group). */
  private readonly members = new Map<string, PlatformaticGroupSource>();

  constructor(readonly base: PlatformaticBaseOptions) {}

  member(groupId: string): Consumer | undefined {
    return this.members.get(groupId)?.consumer;
  }

  groupSource(o: GroupSourceOptions): GroupSource {
    const source: PlatformaticGroupSource = new PlatformaticGroupSource(
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
    return new PlatformaticTransactionalSink(this.base, transactionalId, {
      transactionTimeoutMs: o.transactionTimeoutMs,
      partitionsOf: o.partitionsOf,
      ...(o.compression ? { compression: o.compression } : {}),
      members: this,
    });
  }

  async admin(): Promise<KafkaAdmin> {
    return new PlatformaticAdmin(this.base);
  }

  scan(ranges: PartitionRange[], onRecord: ScanCallback, options?: ScanOptions): Promise<ScanResult> {
    return scanRanges(this.base, ranges, onRecord, options);
  }

  async close(): Promise<void> {
    // Every producer, consumer and admin is its own client with its own connections, closed by its user.
  }
}

/** A KafkaClient over @platformatic/kafka for `config`; `clientSuffix` distinguishes the processes' client ids. */
export function createPlatformaticClient(config: KafkaConfig, clientSuffix = ''): PlatformaticClient {
  return new PlatformaticClient(baseOptions(config, clientSuffix));
}

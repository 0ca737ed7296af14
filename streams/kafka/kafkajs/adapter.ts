/**
 * KafkaClient over kafkajs: the one object a stage runner takes for
 * everything it does with Kafka (group sources, transactional sinks, the
 * admin, scans), built from our config by `createKafkaClient`.
 */
import './speedups.js'; // before kafkajs loads: its patches and the send-retry fix (send-retry.ts)
import { AssignerProtocol, type Kafka, type PartitionAssigner } from 'kafkajs';
import type { KafkaConfig } from '../../../config/schema.js';
import type {
  GroupSource,
  GroupSourceOptions,
  KafkaAdmin,
  KafkaClient,
  MemberProtocols,
  PartitionRange,
  ScanCallback,
  ScanOptions,
  ScanResult,
  TransactionalSink,
  TransactionalSinkOptions,
} from '../types.js';
import { KafkajsAdmin } from './admin.js';
import { createKafka } from './client.js';
import { scanRanges } from './scan.js';
import { KafkajsTransactionalSink } from './sink.js';
import { KafkajsGroupSource } from './source.js';

/** What a member that takes no partitions puts in its subscription's user data. */
const GUARD = Buffer.from('guard');

/**
 * One kafkajs assigner per protocol name: round robin (as kafkajs's own) over
 * the members that take partitions, in member-id order; a guard member gets an
 * empty assignment. The group's leader runs it, so every member must run this
 * same code (they all announce our names).
 */
export function protocolAssigners(protocols: MemberProtocols): PartitionAssigner[] {
  const userData = protocols.takesPartitions === false ? GUARD : Buffer.alloc(0);
  return protocols.names.map(
    (name): PartitionAssigner =>
      ({ cluster }) => ({
        name,
        version: 1,
        async assign({ members, topics }) {
          const takers = members
            .filter((m) => !AssignerProtocol.MemberMetadata.decode(m.memberMetadata)?.userData?.equals(GUARD))
            .map((m) => m.memberId)
            .sort();
          const assignment = new Map<string, Record<string, number[]>>(members.map((m) => [m.memberId, {}]));
          let i = 0;
          for (const topic of topics) {
            for (const p of cluster.findTopicPartitionMetadata(topic).map((m) => m.partitionId).sort((a, b) => a - b)) {
              if (takers.length === 0) break;
              const mine = assignment.get(takers[i++ % takers.length]!)!;
              (mine[topic] ??= []).push(p);
            }
          }
          return [...assignment].map(([memberId, a]) => ({
            memberId,
            memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 1, assignment: a, userData: Buffer.alloc(0) }),
          }));
        },
        protocol({ topics }) {
          return { name, metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData }) };
        },
      }),
  );
}

export class KafkajsClient implements KafkaClient {
  constructor(readonly kafka: Kafka) {}

  groupSource(o: GroupSourceOptions): GroupSource {
    return new KafkajsGroupSource(this.kafka, {
      groupId: o.groupId,
      topic: o.topic,
      sessionTimeoutMs: o.sessionTimeoutMs,
      maxBytes: o.maxBytes,
      ...(o.maxBytesPerPartition !== undefined ? { maxBytesPerPartition: o.maxBytesPerPartition } : {}),
      ...(o.concurrency !== undefined ? { concurrency: o.concurrency } : {}),
      ...(o.protocols ? { partitionAssigners: protocolAssigners(o.protocols) } : {}),
    });
  }

  transactionalSink(transactionalId: string, o: TransactionalSinkOptions): TransactionalSink {
    return new KafkajsTransactionalSink(this.kafka, transactionalId, o.transactionTimeoutMs, {
      partitionsOf: o.partitionsOf,
      ...(o.compression ? { compression: o.compression } : {}),
    });
  }

  admin(): Promise<KafkaAdmin> {
    return KafkajsAdmin.connect(this.kafka);
  }

  scan(ranges: PartitionRange[], onRecord: ScanCallback, options?: ScanOptions): Promise<ScanResult> {
    return scanRanges(this.kafka, ranges, onRecord, options);
  }

  async close(): Promise<void> {
    // kafkajs's Kafka object holds no connection of its own: each producer, consumer and admin closes its own.
  }
}

/** A KafkaClient for `config`; `clientSuffix` distinguishes the processes' client ids. */
export function createKafkaClient(config: KafkaConfig, clientSuffix = ''): KafkajsClient {
  return new KafkajsClient(createKafka(config, clientSuffix));
}

/**
 * OpsClient over kafkajs: the one object the edge (ops commands, the
 * publisher, the row producer, benchmarks) takes for what it does with
 * Kafka, built from our config by `createOpsClient`.
 */
import type { Kafka } from 'kafkajs';
import type { KafkaConfig } from '../../../config/schema.js';
import type {
  IdempotentSink,
  IdempotentSinkOptions,
  OpsAdmin,
  OpsClient,
  PartitionRange,
  ScanCallback,
  ScanOptions,
  ScanRecord,
  ScanResult,
  TailOptions,
  TopicTail,
} from '../types.js';
import { KafkajsAdmin } from './admin.js';
import { createKafka } from './client.js';
import { scanRanges } from './scan.js';
import { KafkajsEveryPartitionSink } from './sink.js';
import { tailTopics } from './tail.js';
import { chunkedOpsClient, chunkReaderOptions } from '../../chunks/chunked-client.js';

export class KafkajsOpsClient implements OpsClient {
  constructor(readonly kafka: Kafka) {}

  admin(): Promise<OpsAdmin> {
    return KafkajsAdmin.connect(this.kafka);
  }

  scan(ranges: PartitionRange[], onRecord: ScanCallback, options?: ScanOptions): Promise<ScanResult> {
    return scanRanges(this.kafka, ranges, onRecord, options);
  }

  idempotentSink(o?: IdempotentSinkOptions): Promise<IdempotentSink> {
    return KafkajsEveryPartitionSink.connect(this.kafka, o);
  }

  tail(topics: string[], onRecord: (r: ScanRecord) => void | Promise<void>, o?: TailOptions): Promise<TopicTail> {
    return tailTopics(this.kafka, topics, onRecord, o);
  }

  async close(): Promise<void> {
    // kafkajs's Kafka object holds no connection of its own: each producer, consumer and admin closes its own.
  }
}

/** An OpsClient for `config`; `clientSuffix` distinguishes the processes' client ids (`<client_id>-<suffix>`). */
export function createOpsClient(config: KafkaConfig, clientSuffix = ''): OpsClient {
  // Scans and tails hand on whole records; sets begun before a start are reported on stderr.
  return chunkedOpsClient(new KafkajsOpsClient(createKafka(config, clientSuffix)), chunkReaderOptions(config));
}

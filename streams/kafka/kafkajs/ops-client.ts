/**
 * OpsClient over kafkajs: the one object the edge (ops commands, the
 * publisher, the row producer, benchmarks) takes for what it does with
 * Kafka, built from our config by `createOpsClient`.
 */
import type { Kafka } from 'kafkajs';
import { kafkaConfigSchema, type KafkaConfig } from '../../../config/schema.js';
import { EdgeChunkingSink } from '../../chunks/edge-sink.js';
import type {
  ChunkingSinkOptions,
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
import { KafkajsEveryPartitionSink, KafkajsTransactionalSink } from './sink.js';
import { tailTopics } from './tail.js';
import { chunkedOpsClient, chunkReaderOptions } from '../../chunks/chunked-client.js';

/** A chunk producer's transaction timeout: how long a writer killed mid-set holds its partition's readers back. */
const CHUNK_TRANSACTION_TIMEOUT_MS = 30_000;

export class KafkajsOpsClient implements OpsClient {
  constructor(
    readonly kafka: Kafka,
    /** The limits and the chunking switch of `chunkingSink` (defaults when absent). */
    private readonly config: Pick<KafkaConfig, 'max_message_bytes' | 'max_value_bytes' | 'chunk_records'> = kafkaConfigSchema.parse({}),
  ) {}

  admin(): Promise<OpsAdmin> {
    return KafkajsAdmin.connect(this.kafka);
  }

  scan(ranges: PartitionRange[], onRecord: ScanCallback, options?: ScanOptions): Promise<ScanResult> {
    return scanRanges(this.kafka, ranges, onRecord, options);
  }

  idempotentSink(o?: IdempotentSinkOptions): Promise<IdempotentSink> {
    return KafkajsEveryPartitionSink.connect(this.kafka, o);
  }

  async chunkingSink(o: ChunkingSinkOptions = {}): Promise<EdgeChunkingSink> {
    const idempotent = await this.idempotentSink(o.compression ? { compression: o.compression } : {});
    const compression = o.compression;
    return new EdgeChunkingSink({
      idempotent,
      newTransactional: (id, partitionsOf) => new KafkajsTransactionalSink(this.kafka, id, CHUNK_TRANSACTION_TIMEOUT_MS, { partitionsOf, ...(compression ? { compression } : {}) }),
      ...(o.transactionalId !== undefined ? { transactionalId: o.transactionalId } : {}),
      admin: () => this.admin(),
      maxMessageBytes: this.config.max_message_bytes,
      maxValueBytes: this.config.max_value_bytes,
      chunkRecords: this.config.chunk_records,
      log: o.log ?? ((line) => void process.stderr.write(`${line}\n`)),
    });
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
  // Scans and tails hand on whole records (sets begun before a start are reported on stderr); chunkingSink writes them.
  return chunkedOpsClient(new KafkajsOpsClient(createKafka(config, clientSuffix), config), chunkReaderOptions(config));
}

/**
 * The TypeScript publisher of SPEC §2.2: how a rollout worker written in
 * TypeScript puts rows on `rollout.row-completed`. The same three calls as
 * the Python `RolloutPublisher` (`publish_row`, `publish_result`,
 * `end_batch`), with the same placement, so a group's records land on one
 * partition whichever language sent them:
 *
 * - the key is `group_id` and the partition is chosen here, explicitly, with
 *   the Java client's murmur2 (`partitionForKey`), never by a client default;
 * - a record is validated before anything of it is buffered
 *   (`PublishValidationError` names the field);
 * - `endBatch` sends everything published so far, then one `BatchEnd` to
 *   every partition, so each partition sees the batch's rows before its marker;
 * - the Kafka producer is idempotent with acks=all, so a retried request
 *   never duplicates a record, and a batch re-sent after a crash produces
 *   identical records that accumulate drops (SPEC §3 rule 3);
 * - a row above the topic's `max.message.bytes` (up to `kafka.max_value_bytes`)
 *   goes as a chunk set in a transaction of its own, on a second,
 *   transactional producer (`CreatePublisherOptions.transactionalId`), so no
 *   reader ever sees part of it; `flush` and `endBatch` wait for it as for
 *   any other record.
 *
 * Records are buffered and sent in batches: `publishRow` resolves once the
 * record is buffered (and waits for a send when the buffer is full, so a
 * fast caller is slowed down instead of growing memory); a buffered record
 * goes out after `lingerMs` at the latest. `flush()` resolves once every
 * record published before it is acknowledged. A failed send (after the
 * client's own retries) breaks the publisher: every later call throws it.
 *
 *   const publisher = await createPublisher(config);
 *   await publisher.publishRow(row);            // or publishResult({...identity, gym_row, gym_result})
 *   await publisher.endBatch('b000001', 128);
 *   await publisher.close();
 */
import type { Config } from '../../config/schema.js';
import { RolloutStreamError } from '../../errors/index.js';
import type { GymResult, RolloutRow } from '../../processors/types.js';
import { DEFAULT_MAX_VALUE_BYTES } from '../chunks/chunk-format.js';
import { TopicCodec } from '../codecs/codec.js';
import { createOpsClient } from '../kafka/kafkajs/ops-client.js';
import { createRegistry } from '../codecs/schema-registry.js';
import { partitionForKey } from '../topics/partitioner.js';
import { checkBatchEnd, checkGymResult, checkRow, encodeProblem, PublishValidationError } from './publish-validation.js';
import { connectKafkaTransport, type OutgoingRecord, type PublisherTransport } from './publisher-transport.js';
import type { RowCompletedEvent } from '../codecs/record-mapping.js';
import { subjectOf, topicNames } from '../topics/names.js';

export { PublishValidationError, jsonSafe, type PublishRejectReason } from './publish-validation.js';
export type { OutgoingRecord, PublisherTransport } from './publisher-transport.js';
export { batchIdentity, stampBatchIdentity, type StampedIdentity } from './batch-identity.js';

/** Where one published record goes and how big it is on the wire. */
export interface PublishReceipt {
  partition: number;
  bytes: number;
}

/** Counts since the publisher was created. */
export interface PublisherStats {
  rows: number;
  results: number;
  /** BatchEnd calls (each writes one record per partition). */
  batchEnds: number;
  /** Records published (buffered or sent), BatchEnd copies included. */
  records: number;
  /** Value bytes of those records. */
  bytes: number;
  /** Partitions that received a row or GymResult, ascending. */
  partitionsUsed: number[];
}

export interface RolloutPublisherOptions {
  transport: PublisherTransport;
  /** The value bytes of a row-completed event (a registry-backed `TopicCodec` in production). */
  encode: (event: RowCompletedEvent) => Buffer;
  /** Larger values are refused as `record_too_large` (`kafka.max_value_bytes`: below it the transport chunks what its topic cannot take whole; default 4 GiB). */
  maxRecordBytes?: number;
  /** Send when this many value bytes are buffered (default 1 MiB). */
  flushBytes?: number;
  /** Send when this many records are buffered (default 500). */
  flushRecords?: number;
  /** Longest a buffered record waits for company before it is sent (default 5 ms). */
  lingerMs?: number;
}

export class RolloutPublisher {
  private buffer: OutgoingRecord[] = [];
  private buffered = 0;
  /** The chain of sends, in order (one request in flight keeps per-partition order). */
  private sending: Promise<void> = Promise.resolve();
  private failure: unknown = undefined;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  private readonly counts = { rows: 0, results: 0, batchEnds: 0, records: 0, bytes: 0 };
  private readonly used = new Set<number>();
  private readonly maxRecordBytes: number;
  private readonly flushBytes: number;
  private readonly flushRecords: number;
  private readonly lingerMs: number;

  constructor(private readonly o: RolloutPublisherOptions) {
    this.maxRecordBytes = o.maxRecordBytes ?? DEFAULT_MAX_VALUE_BYTES;
    this.flushBytes = o.flushBytes ?? 1024 * 1024;
    this.flushRecords = o.flushRecords ?? 500;
    this.lingerMs = o.lingerMs ?? 5;
  }

  /** The topic's partition count (what `partitionForKey` is taken modulo). */
  get partitions(): number {
    return this.o.transport.partitions;
  }

  /**
   * Publishes one `RolloutRow` (SPEC §2) keyed by its `group_id`. Throws
   * `PublishValidationError` for any row `validateRow` rejects, except a
   * NaN logprob, which is sent for the pipeline to dead-letter.
   */
  async publishRow(row: RolloutRow): Promise<PublishReceipt> {
    this.usable();
    const valid = checkRow(row);
    return this.enqueue('row', valid, { kind: 'row', row: valid });
  }

  /**
   * Publishes one NeMo-Gym result (SPEC §2.1): the stream identity of §2
   * plus `gym_row` (the task row as sent) and `gym_result` (what NeMo-Gym
   * returned), all in one object: `{...identity, gym_row, gym_result}`, the
   * `GymResult` record, whose fields are Python `publish_result`'s
   * arguments. Output items' token ids, logprobs and routed experts travel
   * as binary columns (pass Int32Array / Float64Array or lists; see
   * docs/formats.md); elsewhere typed arrays are sent as lists and
   * non-finite numbers as "NaN"/"Infinity"/"-Infinity" (your object is not
   * modified). Throws `PublishValidationError` when the structure is
   * wrong (identity, row-index range, `gym_row`/`gym_result` objects,
   * `response.output` a list); the token-level conversion is accumulate's.
   */
  async publishResult(result: GymResult): Promise<PublishReceipt> {
    this.usable();
    const valid = checkGymResult(result);
    return this.enqueue('gym_result', valid, { kind: 'gym_result', result: valid });
  }

  /**
   * Closes batch `batchId` with `numRows` rows: sends everything published
   * so far, then one `BatchEnd` to every partition, and resolves once all
   * of it is acknowledged. Call it after the batch's last row.
   */
  async endBatch(batchId: string, numRows: number): Promise<void> {
    this.usable();
    const end = checkBatchEnd(batchId, numRows);
    const value = this.o.encode({ kind: 'batch_end', end });
    // Rows sent before the marker must precede it on every partition.
    await this.flush();
    for (let p = 0; p < this.partitions; p++) this.push({ key: end.batch_id, value, partition: p });
    this.counts.batchEnds++;
    await this.flush();
  }

  /** Sends what is buffered and resolves once everything published before this call is acknowledged. */
  async flush(): Promise<void> {
    this.throwIfFailed();
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.buffer.length > 0) {
      const records = this.buffer;
      this.buffer = [];
      this.buffered = 0;
      this.sending = this.sending.then(() => this.o.transport.send(records));
    }
    try {
      await this.sending;
    } catch (e) {
      this.failure ??= e;
      throw e;
    }
  }

  /** Flushes, then disconnects. Idempotent; the publisher refuses every call afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    try {
      if (this.failure === undefined) await this.flush();
    } finally {
      this.closed = true;
      if (this.timer !== null) clearTimeout(this.timer);
      this.timer = null;
      await this.o.transport.close();
    }
  }

  stats(): PublisherStats {
    return { ...this.counts, partitionsUsed: [...this.used].sort((a, b) => a - b) };
  }

  private async enqueue(record: 'row' | 'gym_result', id: { group_id: string; row_index: number }, event: RowCompletedEvent): Promise<PublishReceipt> {
    let value: Buffer;
    try {
      value = this.o.encode(event);
    } catch (cause) {
      throw new PublishValidationError(record, 'not_encodable', encodeProblem(event, cause), id, { cause });
    }
    if (value.length > this.maxRecordBytes) {
      throw new PublishValidationError(record, 'record_too_large', `${value.length} bytes exceed the ceiling of ${this.maxRecordBytes} (kafka.max_value_bytes)`, id);
    }
    const partition = partitionForKey(id.group_id, this.partitions);
    this.push({ key: id.group_id, value, partition });
    this.used.add(partition);
    if (record === 'row') this.counts.rows++;
    else this.counts.results++;
    if (this.buffered >= this.flushBytes || this.buffer.length >= this.flushRecords) await this.flush();
    else this.linger();
    return { partition, bytes: value.length };
  }

  private push(r: OutgoingRecord): void {
    this.buffer.push(r);
    this.buffered += r.value.length;
    this.counts.records++;
    this.counts.bytes += r.value.length;
  }

  private linger(): void {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      // A failure is kept and thrown by the next call.
      this.flush().catch(() => undefined);
    }, this.lingerMs);
  }

  private usable(): void {
    if (this.closed) throw new RolloutStreamError('publisher_closed', 'the publisher is closed');
    this.throwIfFailed();
  }

  private throwIfFailed(): void {
    if (this.failure !== undefined) {
      throw new RolloutStreamError('publish_failed', `an earlier send failed: ${(this.failure as Error)?.message ?? String(this.failure)}`, { cause: this.failure });
    }
  }
}

export interface CreatePublisherOptions {
  /** Suffix of the Kafka client id (default `publisher`). */
  clientSuffix?: string;
  /**
   * The transactional id of the producer that writes rows above the topic's
   * limit as chunk sets (default `rollout-stream.publisher.<uuid>`). A fixed
   * one lets a restarted publisher abort what a killed one left open at once
   * instead of after its transaction timeout; the user needs WRITE on it.
   */
  transactionalId?: string;
  /** Overrides of the buffering knobs. */
  flushBytes?: number;
  flushRecords?: number;
  lingerMs?: number;
}

/**
 * A connected publisher for `config`'s `<prefix>rollout.row-completed`:
 * registers the row-completed schema under `<topic>-value` (idempotent),
 * reads the partition count, connects the idempotent producer. Throws
 * `RolloutStreamError` (`topic_missing`) when the topic does not exist.
 */
export async function createPublisher(config: Config, options: CreatePublisherOptions = {}): Promise<RolloutPublisher> {
  const topic = topicNames(config.topics.prefix).rowCompleted;
  const kafka = createOpsClient(config.kafka, options.clientSuffix ?? 'publisher');
  // The topic first: a wrong prefix must not leave a schema subject behind.
  const transport = await connectKafkaTransport(kafka, topic, config.kafka.compression, options.transactionalId);
  let codec: TopicCodec<'rowCompleted'>;
  try {
    codec = await new TopicCodec('rowCompleted', subjectOf(topic), createRegistry(config.kafka)).init();
  } catch (e) {
    await transport.close();
    throw e;
  }
  return new RolloutPublisher({
    transport,
    encode: (e) => codec.encode(e),
    // Above the topic's limit a row travels as a chunk set (OpsClient.chunkingSink); only the ceiling refuses it.
    maxRecordBytes: config.kafka.max_value_bytes,
    ...(options.flushBytes !== undefined ? { flushBytes: options.flushBytes } : {}),
    ...(options.flushRecords !== undefined ? { flushRecords: options.flushRecords } : {}),
    ...(options.lingerMs !== undefined ? { lingerMs: options.lingerMs } : {}),
  });
}

/**
 * Publishes load-generator events to `rollout.row-completed` the way rollout
 * workers do: rows and GymResults keyed by group id (Avro, Confluent
 * framing), garbage bytes as-is, and each BatchEnd once to every partition.
 * Unlike `RolloutPublisher` it validates nothing: the load generator's
 * faults must reach the pipeline as they are. Sends are batched; the
 * producer is idempotent (acks=all), so a retry never duplicates a record.
 */
import type { GymResultEvent, LoadgenEvent } from '../loadgen/index.js';
import type { TopicCodec } from '../streams/codecs/codec.js';
import type { CompressionName, IdempotentSink, OpsClient } from '../streams/kafka/types.js';
import { partitionForKey } from '../streams/topics/partitioner.js';

/** One buffered record; its partition is chosen at flush unless given (BatchEnd copies). */
interface Pending {
  key: string | Buffer | null;
  value: Buffer;
  partition?: number;
}

export interface ProduceProgress {
  rows: number;
  /** GymResults (`loadgen --format gym-result`). */
  results: number;
  garbage: number;
  batchEnds: number;
  bytes: number;
}

export interface RowProducerOptions {
  /** The client (`createOpsClient`). */
  kafka: OpsClient;
  topic: string;
  codec: TopicCodec<'rowCompleted'>;
  /** Producer compression (default none; see bench/README.md "compression"). */
  compression?: CompressionName;
  /** Flush when this many bytes are buffered (default 4 MiB). */
  flushBytes?: number;
  /** Honour each event's delayMs (scaled); 0 = as fast as possible. */
  pace?: number;
  onProgress?: (p: ProduceProgress) => void;
  /** Called with the send time of every row (for latency measurements). */
  onRowSent?: (groupId: string, rowIndex: number, sentAtMs: number) => void;
}

export class RowProducer {
  private readonly kafka: OpsClient;
  private sink: IdempotentSink | null = null;
  private buffer: Pending[] = [];
  private buffered = 0;
  private partitions = 0;
  readonly progress: ProduceProgress = { rows: 0, results: 0, garbage: 0, batchEnds: 0, bytes: 0 };

  constructor(private readonly o: RowProducerOptions) {
    this.kafka = o.kafka;
  }

  /** Reads the topic's partition count (`unknown_topic` when it does not exist) and connects the producer. */
  async connect(): Promise<void> {
    const admin = await this.kafka.admin();
    try {
      this.partitions = await admin.partitionCount(this.o.topic);
    } finally {
      await admin.close();
    }
    this.sink = await this.kafka.chunkingSink({ compression: this.o.compression ?? 'none' });
  }

  async send(events: Iterable<LoadgenEvent | GymResultEvent>): Promise<ProduceProgress> {
    const pace = this.o.pace ?? 0;
    // Pacing follows an absolute schedule (start + scaled sum of delay hints),
    // so the time spent sending does not lower the rate.
    const start = Date.now();
    let scheduled = 0;
    for (const e of events) {
      scheduled += e.delayMs * pace;
      const wait = start + scheduled - Date.now();
      if (pace > 0 && wait > 0) {
        await this.flush();
        await new Promise((r) => setTimeout(r, wait));
      }
      if (e.kind === 'row') {
        const value = this.o.codec.encode({ kind: 'row', row: e.row });
        this.push({ key: e.row.group_id, value });
        this.progress.rows++;
        this.o.onRowSent?.(e.row.group_id, e.row.row_index, Date.now());
      } else if (e.kind === 'gym_result') {
        const value = this.o.codec.encode({ kind: 'gym_result', result: e.result });
        this.push({ key: e.result.group_id, value });
        this.progress.results++;
        this.o.onRowSent?.(e.result.group_id, e.result.row_index, Date.now());
      } else if (e.kind === 'garbage') {
        this.push({ key: e.key, value: Buffer.from(e.bytes) });
        this.progress.garbage++;
      } else {
        // Rows sent before the marker must precede it on every partition.
        await this.flush();
        const value = this.o.codec.encode({ kind: 'batch_end', end: e.end });
        for (let p = 0; p < this.partitions; p++) this.push({ key: e.end.batch_id, value, partition: p });
        this.progress.batchEnds++;
        await this.flush();
      }
      if (this.buffered >= (this.o.flushBytes ?? 4 * 1024 * 1024)) await this.flush();
    }
    await this.flush();
    return this.progress;
  }

  private push(m: Pending): void {
    this.buffer.push(m);
    const size = m.value.length;
    this.buffered += size;
    this.progress.bytes += size;
  }

  async flush(): Promise<void> {
    if (this.buffer.length === 0) return;
    const messages = this.buffer;
    this.buffer = [];
    this.buffered = 0;
    // Partitions placed here (murmur2 of the key, as the Java client and
    // kafkajs would; a keyless record by its place in the send).
    const placed = messages.map((m, i) => ({
      topic: this.o.topic,
      key: m.key,
      value: m.value,
      partition: m.partition ?? (m.key == null ? i % this.partitions : partitionForKey(typeof m.key === 'string' ? m.key : new Uint8Array(m.key), this.partitions)),
    }));
    if (this.sink === null) throw new Error('RowProducer.connect() must be called before sending');
    await this.sink.send(placed);
    this.o.onProgress?.(this.progress);
  }

  async disconnect(): Promise<void> {
    await this.flush();
    await this.sink?.close();
  }
}

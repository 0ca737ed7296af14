/**
 * The edge's writer of records of any size (docs/design-chunked-records.md
 * §2, OpsClient.chunkingSink): the publisher, `produce`, the load
 * generator, `dlq redrive`, `replay --to-topic` and `--rerun-postprocess`.
 * Records that fit their topic's limit go through the idempotent sink as
 * before; a value above it is a chunk set, written in a transaction of its
 * own on a second, transactional producer created at the first such value
 * (so a read_committed reader never sees part of a set, and a writer killed
 * mid-set leaves an aborted one). A send goes in input order: the whole
 * records before a chunked one are acknowledged before its transaction
 * begins, so a partition's records keep their order. `send` resolves once
 * everything it was given is acknowledged (and each chunked value's
 * transaction committed), which is what the callers' flushes wait for.
 */
import { randomUUID } from 'node:crypto';
import { RolloutStreamError } from '../../errors/index.js';
import { placeRecord } from '../kafka/placement.js';
import type { IdempotentSink, KafkaAdmin, OutgoingRecord, TransactionalSink } from '../kafka/types.js';
import { batchBudget, recordBytes, type ChunkedPosition } from './chunk-writer.js';
import { sendChunked } from './chunking-sink.js';
import { RecordLimits } from './record-limits.js';

/** The transactional id of an edge writer's chunk producer when none is given. */
export const defaultChunkTransactionalId = (): string => `rollout-stream.publisher.${randomUUID()}`;

export interface EdgeChunkingSinkOptions {
  idempotent: IdempotentSink;
  /** The transactional producer for chunk sets (not initialized; called at the first chunked value), placing by `partitionsOf`. */
  newTransactional: (transactionalId: string, partitionsOf: (topic: string) => Promise<number>) => TransactionalSink;
  /** Its transactional id (default `rollout-stream.publisher.<uuid>`). */
  transactionalId?: string;
  /** An admin for the topics' limits and partition counts (connected at the first send, closed by `close`). */
  admin: () => Promise<Pick<KafkaAdmin, 'topicConfigs' | 'partitionCount' | 'close'>>;
  /** `kafka.max_message_bytes`: a topic's limit when it cannot be read, and one request's bytes. */
  maxMessageBytes: number;
  /** `kafka.max_value_bytes`: above it a value is refused (`record_too_large`). */
  maxValueBytes: number;
  /** `kafka.chunk_records`: false, and a value above its topic's limit is sent whole (and refused by the broker). */
  chunkRecords: boolean;
  log: (line: string) => void;
}

/** An IdempotentSink whose values may be of any size up to `kafka.max_value_bytes`. */
export class EdgeChunkingSink implements IdempotentSink {
  private admin: Promise<Pick<KafkaAdmin, 'topicConfigs' | 'partitionCount' | 'close'>> | null = null;
  private readonly limits: RecordLimits;
  private readonly counts = new Map<string, Promise<number>>();
  private tx: TransactionalSink | null = null;
  /** Chunked values written (one transaction each). */
  chunkedValues = 0;

  constructor(private readonly o: EdgeChunkingSinkOptions) {
    this.limits = new RecordLimits({ admin: () => this.connected(), fallbackBytes: o.maxMessageBytes, log: o.log });
  }

  get transactionalId(): string | null {
    return this.tx?.transactionalId ?? null;
  }

  private connected(): Promise<Pick<KafkaAdmin, 'topicConfigs' | 'partitionCount' | 'close'>> {
    if (!this.admin) {
      this.admin = this.o.admin();
      this.admin.catch(() => (this.admin = null));
    }
    return this.admin;
  }

  private partitionsOf = (topic: string): Promise<number> => {
    let n = this.counts.get(topic);
    if (!n) {
      this.counts.set(topic, (n = this.connected().then((a) => a.partitionCount(topic))));
      n.catch(() => this.counts.delete(topic));
    }
    return n;
  };

  async send(records: OutgoingRecord[]): Promise<ChunkedPosition[]> {
    if (records.length === 0) return [];
    for (const r of records) {
      if ((r.value?.length ?? 0) > this.o.maxValueBytes) {
        throw new RolloutStreamError('record_too_large', `a record for ${r.topic} of ${r.value!.length} bytes is over the ceiling of ${this.o.maxValueBytes} bytes (kafka.max_value_bytes)`);
      }
    }
    await this.limits.load(records.map((r) => r.topic));
    const placed: OutgoingRecord[] = [];
    for (const r of records) placed.push(r.partition !== undefined ? r : { ...r, partition: await placeRecord(r, this.partitionsOf) });
    const out: ChunkedPosition[] = [];
    let run: OutgoingRecord[] = [];
    const flushRun = async () => {
      if (run.length === 0) return;
      const batch = run;
      run = [];
      // Whole records: the idempotent sink, in requests cut as the stage writers cut theirs.
      out.push(...(await sendChunked(batch, (r) => this.o.idempotent.send(r), this.chunkOptions(false))));
    };
    for (const r of placed) {
      if (!this.o.chunkRecords || recordBytes(r) <= batchBudget(this.limits.limit(r.topic))) {
        run.push(r);
        continue;
      }
      await flushRun();
      out.push(await this.sendSet(r));
    }
    await flushRun();
    return out;
  }

  private chunkOptions(enabled: boolean) {
    return { limits: this.limits, partitionsOf: this.partitionsOf, requestBudget: this.o.maxMessageBytes, enabled };
  }

  /** One chunked value in a transaction of its own. */
  private async sendSet(r: OutgoingRecord): Promise<ChunkedPosition> {
    if (!this.tx) {
      const tx = this.o.newTransactional(this.o.transactionalId ?? defaultChunkTransactionalId(), this.partitionsOf);
      await tx.init();
      this.tx = tx;
    }
    const tx = this.tx;
    await tx.begin();
    try {
      const [position] = await sendChunked([r], (c) => tx.send(c), this.chunkOptions(true));
      await tx.commit();
      this.chunkedValues++;
      return position!;
    } catch (e) {
      if (tx.state === 'in_transaction' || tx.state === 'abortable_error') await tx.abort().catch(() => undefined);
      throw e;
    }
  }

  async close(): Promise<void> {
    const admin = this.admin;
    this.admin = null;
    await Promise.all([this.o.idempotent.close(), this.tx?.close(), admin?.then((a) => a.close()).catch(() => undefined)]);
  }
}


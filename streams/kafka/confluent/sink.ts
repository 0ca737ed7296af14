/**
 * TransactionalSink over a librdkafka transactional `Producer` (the
 * node-rdkafka API of @confluentinc/kafka-javascript), guarded by the shared
 * state machine (../transaction-state.ts).
 *
 * What librdkafka 2.15.1 gives and what it lacks:
 * - `initTransactions` sends InitProducerId, which fences every earlier
 *   owner of the id and completes or aborts its open transaction; a fenced
 *   producer then fails every call with a fatal error (`_FENCED`), its
 *   queued records with `_PURGE_QUEUE`: a send that fails so is coded by the
 *   fatal error, which the client reports on `event.error` with its message
 *   only (code -1).
 * - Transactional offsets are KIP-447 only: `sendOffsetsToTransaction` takes
 *   a `KafkaConsumer` and sends TxnOffsetCommit with that consumer's group
 *   id, generation and member id (no way to pass a group id alone). So
 *   `sendOffsets(groupId)` needs a member of that group built by the same
 *   client (`GroupMembers`); with none it throws `usage`.
 * - Records are placed by this sink (explicit partition, or murmur2 of the
 *   key as Java's default partitioner, round robin without a key), as the
 *   other adapters; positions come from the delivery reports, matched to the
 *   input by the record's index.
 * - No transactions v2 (KIP-890): AddPartitionsToTxn before every new partition.
 */
import type { KafkaConsumer, LibrdKafkaError, Producer } from '@confluentinc/kafka-javascript';
import { ConfigError, RolloutStreamError } from '../../../errors/index.js';
import { partitionForKey } from '../../topics/partitioner.js';
import { TransactionStateMachine, type TxState } from '../transaction-state.js';
import type { CompressionName, OutgoingRecord, PartitionOffset, RecordPosition, TransactionalSink } from '../types.js';
import { callback, coded } from './errors.js';
import { CONNECT, confluent } from './library.js';
import type { RdkafkaProperties } from './options.js';

/** The live group members of a client, by group id (whose generation a transactional offset commit carries). */
export interface GroupMembers {
  member(groupId: string): KafkaConsumer | undefined;
}

export interface ConfluentSinkOptions {
  transactionTimeoutMs: number;
  partitionsOf: (topic: string) => Promise<number>;
  compression?: CompressionName;
  /** Largest record (librdkafka `message.max.bytes`). */
  maxMessageBytes: number;
  members: GroupMembers;
}

/** _FATAL, and the purges of queued and in-flight records a fatal error causes. */
const PURGED = new Set<unknown>([-152, -151]);
/** librdkafka's `_FENCED`. */
const FENCED = -144;
const FATAL_OR_PURGED = new Set<unknown>([-150, -151, -152]);
const QUEUE_FULL = -184;
/** Records without a key and without a partition are spread round robin. */
let nullKeyPartition = 0;

interface Delivery {
  topic: string;
  partition: number;
  offset: number;
}

interface Pending {
  positions: Array<RecordPosition | undefined>;
  left: number;
  failed: unknown;
  done: () => void;
}

export class ConfluentTransactionalSink implements TransactionalSink {
  private readonly machine: TransactionStateMachine;
  private readonly producer: Producer;
  private readonly timeoutMs: number;
  private connected = false;
  private fatal: LibrdKafkaError | null = null;
  /** Outstanding sends by id (the delivery report's opaque names the send and the record's index). */
  private readonly sends = new Map<number, Pending>();
  private nextSend = 0;

  constructor(
    base: RdkafkaProperties,
    readonly transactionalId: string,
    private readonly o: ConfluentSinkOptions,
  ) {
    this.machine = new TransactionStateMachine(transactionalId);
    this.timeoutMs = Math.max(30_000, o.transactionTimeoutMs);
    try {
      this.producer = new confluent.Producer({
        ...base,
        'transactional.id': transactionalId,
        'enable.idempotence': true,
        acks: 'all',
        'transaction.timeout.ms': o.transactionTimeoutMs,
        'compression.codec': o.compression ?? 'none',
        'message.max.bytes': Math.min(1_000_000_000, Math.max(1_000_000, o.maxMessageBytes)),
        'linger.ms': 1,
        dr_cb: true,
      } as never);
    } catch (e) {
      throw new ConfigError('kafka.compression', `librdkafka refused the producer configuration: ${(e as Error).message}`);
    }
    // The binding's `event.error` carries librdkafka's message only (code -1): a fatal fencing is known by its text.
    this.producer.on('event.error', (e: LibrdKafkaError) => {
      if (e.isFatal || /fenced/i.test(e.message ?? '')) this.fatal = { ...e, code: e.isFatal ? e.code : FENCED, isFatal: true, message: e.message };
    });
    this.producer.on('delivery-report', (err: LibrdKafkaError | null, report: Delivery & { opaque?: { send: number; index: number } }) => this.delivered(err, report));
  }

  get state(): TxState {
    return this.machine.state;
  }

  private delivered(err: LibrdKafkaError | null, report: Delivery & { opaque?: { send: number; index: number } }): void {
    const tag = report?.opaque;
    const pending = tag ? this.sends.get(tag.send) : undefined;
    if (!pending || !tag) return;
    if (err) pending.failed ??= err;
    else pending.positions[tag.index] = { topic: report.topic, partition: report.partition, offset: String(report.offset) };
    if (--pending.left === 0) pending.done();
  }

  private failed(e: unknown, doing: string, otherwise: TxState): unknown {
    const cause = this.fatal && (FATAL_OR_PURGED.has((e as LibrdKafkaError)?.code) || (e as LibrdKafkaError)?.isFatal) ? this.fatal : e;
    const err = coded(cause, `${this.transactionalId}: ${doing}`, doing === 'commit' || doing === 'abort');
    const next: TxState = err instanceof RolloutStreamError && err.code === 'producer_fenced' ? 'fenced' : otherwise;
    if (this.machine.state !== 'closed') this.machine.to(next);
    return err;
  }

  async init(): Promise<void> {
    this.machine.guard('init');
    this.machine.to('initializing');
    try {
      await new Promise<void>((resolve, reject) => this.producer.connect(CONNECT, (err) => (err ? reject(err) : resolve())));
      this.connected = true;
      this.producer.setPollInBackground(true);
      await callback((cb) => this.producer.initTransactions(this.timeoutMs, cb));
    } catch (e) {
      throw this.failed(e, 'init', 'fatal_error');
    }
    this.machine.to('ready');
  }

  async begin(): Promise<void> {
    this.machine.guard('begin');
    try {
      await callback((cb) => this.producer.beginTransaction(cb));
    } catch (e) {
      throw this.failed(e, 'begin', 'fatal_error');
    }
    this.machine.to('in_transaction');
  }

  /** Each record's partition: explicit, or murmur2 of its key (round robin without one); a topic that is gone is transient. */
  private async partitionOf(r: OutgoingRecord): Promise<number> {
    if (r.partition !== undefined) return r.partition;
    let count: number;
    try {
      count = await this.o.partitionsOf(r.topic);
    } catch (e) {
      if (e instanceof RolloutStreamError && e.code === 'unknown_topic') {
        throw new RolloutStreamError('partition_unavailable', `${r.topic} is not hosted by the cluster (deleted?): ${e.message}`, { cause: e, retriable: true });
      }
      throw e;
    }
    return r.key === null ? nullKeyPartition++ % count : partitionForKey(typeof r.key === 'string' ? r.key : new Uint8Array(r.key), count);
  }

  async send(records: OutgoingRecord[]): Promise<RecordPosition[]> {
    this.machine.guard('send');
    try {
      if (records.length === 0) return [];
      const partitions: number[] = [];
      for (const r of records) partitions.push(await this.partitionOf(r));
      const id = this.nextSend++;
      const pending: Pending = { positions: new Array(records.length), left: records.length, failed: undefined, done: () => undefined };
      const done = new Promise<void>((resolve) => (pending.done = resolve));
      this.sends.set(id, pending);
      try {
        for (const [index, r] of records.entries()) {
          const headers = r.headers ? Object.entries(r.headers).map(([k, v]) => ({ [k]: v })) : undefined;
          await this.produce(r, partitions[index]!, { send: id, index }, headers);
        }
        await done;
      } finally {
        this.sends.delete(id);
      }
      if (pending.failed !== undefined) throw pending.failed;
      return pending.positions.map((p, i) => {
        if (!p) throw new RolloutStreamError('transaction_outcome_unknown', `no delivery report for record ${i} of ${records.length}`);
        return p;
      });
    } catch (e) {
      // Records purged by a fatal error (fenced): the fatal error itself is reported a moment later.
      if (PURGED.has((e as LibrdKafkaError)?.code)) for (let i = 0; i < 20 && !this.fatal; i++) await new Promise((r) => setTimeout(r, 25));
      throw this.failed(e, 'send', 'abortable_error');
    }
  }

  /** Queues one record, waiting while librdkafka's queue is full. */
  private async produce(r: OutgoingRecord, partition: number, opaque: { send: number; index: number }, headers: Array<Record<string, string | Buffer>> | undefined): Promise<void> {
    for (;;) {
      try {
        this.producer.produce(r.topic, partition, r.value, r.key, null, opaque, headers);
        return;
      } catch (e) {
        if ((e as LibrdKafkaError)?.code !== QUEUE_FULL) throw e;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
  }

  async sendOffsets(groupId: string, offsets: PartitionOffset[]): Promise<void> {
    this.machine.guard('sendOffsets');
    const member = this.o.members.member(groupId);
    if (!member) {
      this.machine.to('abortable_error');
      throw new RolloutStreamError(
        'usage',
        `${this.transactionalId}: sendOffsets for group ${groupId}: no group source of this client is a member of it (librdkafka commits transactional offsets only with a member's generation, KIP-447)`,
      );
    }
    try {
      const list = offsets.map((o) => ({ topic: o.topic, partition: o.partition, offset: Number(o.offset) }));
      await callback((cb) => this.producer.sendOffsetsToTransaction(list, member, this.timeoutMs, cb));
    } catch (e) {
      throw this.failed(e, 'sendOffsets', 'abortable_error');
    }
  }

  async commit(): Promise<void> {
    this.machine.guard('commit');
    this.machine.to('committing');
    try {
      await callback((cb) => this.producer.commitTransaction(this.timeoutMs, cb));
    } catch (e) {
      throw this.failed(e, 'commit', 'fatal_error');
    }
    this.machine.to('ready');
  }

  async abort(): Promise<void> {
    this.machine.guard('abort');
    this.machine.to('aborting');
    try {
      await callback((cb) => this.producer.abortTransaction(this.timeoutMs, cb));
    } catch (e) {
      throw this.failed(e, 'abort', 'fatal_error');
    }
    this.machine.to('ready');
  }

  async close(): Promise<void> {
    this.machine.to('closed');
    for (const p of this.sends.values()) {
      p.failed ??= new RolloutStreamError('transaction_state', `${this.transactionalId}: closed with records in flight`);
      p.done();
    }
    if (!this.connected) return;
    this.connected = false;
    await new Promise<void>((resolve) => this.producer.disconnect(5_000, () => resolve())).catch(() => undefined);
  }
}

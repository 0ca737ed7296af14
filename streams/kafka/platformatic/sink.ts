/**
 * TransactionalSink over a @platformatic/kafka producer, guarded by the
 * shared state machine (../transaction-state.ts).
 *
 * What the client gives and what it lacks (2.12.1):
 * - InitProducerId is sent by the first `beginTransaction` (not on
 *   connect): `init` begins and cancels a local transaction, which fences
 *   every earlier owner of the id now. It must carry producer id/epoch
 *   -1/-1: the client's default 0/0 is refused with PRODUCER_FENCED as soon
 *   as the id was used before (a restarted process could never take over).
 * - EndTxn of a transaction that sent nothing is refused by the broker
 *   (INVALID_TXN_STATE): such a transaction is cancelled locally instead.
 * - Transactional offsets are KIP-447 only: `Transaction.addOffset` sends
 *   TxnOffsetCommit (v3+) with the consumer's group id, generation and member
 *   id, taken from a `Consumer` (dist/clients/producer/producer.js,
 *   `[kTransactionCommitOffset]`). So `sendOffsets(groupId)` needs a member
 *   of that group built by the same client (`GroupMembers`); with none it
 *   throws `usage` rather than commit without the generation check. One
 *   TxnOffsetCommit per partition, sent one after another (the client
 *   de-duplicates concurrent calls of the same operation).
 * - No transactions v2 (KIP-890 part 2): Produce ≤ v11, EndTxn ≤ v4, and
 *   AddPartitionsToTxn before every new partition.
 */
import { Producer, type Consumer } from '@platformatic/kafka';
import { RolloutStreamError } from '../../../errors/index.js';
import { placeRecord, positionsFrom } from '../placement.js';
import { TransactionStateMachine, type TxState } from '../transaction-state.js';
import type { CompressionName, OutgoingRecord, PartitionOffset, RecordPosition, TransactionalSink } from '../types.js';
import { coded } from './errors.js';
import type { PlatformaticBaseOptions } from './options.js';

type Tx = Awaited<ReturnType<Producer['beginTransaction']>>;

/** The live group members of a client, by group id (whose generation a transactional offset commit carries). */
export interface GroupMembers {
  member(groupId: string): Consumer | undefined;
}

export interface PlatformaticSinkOptions {
  transactionTimeoutMs: number;
  partitionsOf: (topic: string) => Promise<number>;
  compression?: CompressionName;
  members: GroupMembers;
}

const NEW_PRODUCER = { producerId: -1n, producerEpoch: -1 };

interface Placed {
  topic: string;
  partition: number;
  key: Buffer | undefined;
  value: Buffer;
  headers?: Map<Buffer, Buffer>;
}

/** Each record with its partition (placement.ts), in the client's message shape. */
export async function placeRecords(records: OutgoingRecord[], partitionsOf: (topic: string) => Promise<number>): Promise<Placed[]> {
  const out: Placed[] = [];
  for (const r of records) {
    const partition = await placeRecord(r, partitionsOf);
    const headers = r.headers ? new Map(Object.entries(r.headers).map(([k, v]) => [Buffer.from(k), Buffer.isBuffer(v) ? v : Buffer.from(v)])) : undefined;
    out.push({
      topic: r.topic,
      partition,
      key: r.key === null ? undefined : Buffer.isBuffer(r.key) ? r.key : Buffer.from(r.key),
      value: r.value ?? (null as unknown as Buffer),
      ...(headers ? { headers } : {}),
    });
  }
  return out;
}

export class PlatformaticTransactionalSink implements TransactionalSink {
  private readonly machine: TransactionStateMachine;
  private readonly producer: Producer;
  private tx: Tx | null = null;
  /** Whether this transaction reached the broker (AddPartitionsToTxn or AddOffsetsToTxn): an untouched one is only cancelled locally, as the broker refuses EndTxn for it. */
  private touched = false;

  constructor(
    base: PlatformaticBaseOptions,
    readonly transactionalId: string,
    private readonly o: PlatformaticSinkOptions,
  ) {
    this.machine = new TransactionStateMachine(transactionalId);
    this.producer = new Producer({
      ...base,
      transactionalId,
      idempotent: true,
      // The client sends `timeout` as the transaction timeout of InitProducerId (and as the produce timeout).
      timeout: o.transactionTimeoutMs,
      autocreateTopics: false,
      compression: o.compression ?? 'none',
      // CONCURRENT_TRANSACTIONS answers last a few ms after each commit: retry fast (README "Sizing").
      retries: 25,
      retryDelay: 5,
    });
  }

  get state(): TxState {
    return this.machine.state;
  }

  private failed(e: unknown, doing: string, otherwise: TxState): unknown {
    return this.machine.failed(coded(e, `${this.transactionalId}: ${doing}`, doing === 'commit' || doing === 'abort'), otherwise);
  }

  async init(): Promise<void> {
    this.machine.guard('init');
    this.machine.to('initializing');
    try {
      // -1/-1: "no earlier producer id" (KIP-360). The client's default, 0/0, makes the
      // broker answer PRODUCER_FENCED once another producer of the id has initialized.
      const t = await this.producer.beginTransaction(NEW_PRODUCER);
      await t.cancel();
    } catch (e) {
      throw this.failed(e, 'init', 'fatal_error');
    }
    this.machine.to('ready');
  }

  async begin(): Promise<void> {
    this.machine.guard('begin');
    try {
      this.tx = await this.producer.beginTransaction(NEW_PRODUCER);
      this.touched = false;
    } catch (e) {
      throw this.failed(e, 'begin', 'fatal_error');
    }
    this.machine.to('in_transaction');
  }

  async send(records: OutgoingRecord[]): Promise<RecordPosition[]> {
    this.machine.guard('send');
    try {
      if (records.length === 0) return [];
      const placed = await placeRecords(records, this.o.partitionsOf);
      this.touched = true;
      const result = await this.tx!.send({ messages: placed as never });
      return positionsFrom(placed, (result.offsets ?? []).map((o) => ({ topic: o.topic, partition: o.partition, baseOffset: o.offset })));
    } catch (e) {
      throw this.failed(e, 'send', 'abortable_error');
    }
  }

  async sendOffsets(groupId: string, offsets: PartitionOffset[]): Promise<void> {
    this.machine.guard('sendOffsets');
    const member = this.o.members.member(groupId);
    if (!member) {
      this.machine.to('abortable_error');
      throw new RolloutStreamError(
        'usage',
        `${this.transactionalId}: sendOffsets for group ${groupId}: no group source of this client is a member of it (@platformatic/kafka commits transactional offsets only with a member's generation, KIP-447)`,
      );
    }
    try {
      this.touched = true;
      await this.tx!.addConsumer(member);
      const consumer = { groupId, generationId: member.generationId, memberId: member.memberId, coordinatorId: member.coordinatorId };
      for (const o of offsets) {
        // addOffset commits the message's offset + 1: hand it the last consumed offset.
        await this.tx!.addOffset({ topic: o.topic, partition: o.partition, offset: BigInt(o.offset) - 1n, metadata: { consumer } } as never);
      }
    } catch (e) {
      throw this.failed(e, 'sendOffsets', 'abortable_error');
    }
  }

  async commit(): Promise<void> {
    this.machine.guard('commit');
    this.machine.to('committing');
    try {
      if (this.touched) await this.tx!.commit();
      else await this.tx!.cancel();
    } catch (e) {
      throw this.failed(e, 'commit', 'fatal_error');
    } finally {
      this.tx = null;
    }
    this.machine.to('ready');
  }

  async abort(): Promise<void> {
    this.machine.guard('abort');
    this.machine.to('aborting');
    try {
      if (this.tx && !this.tx.completed) await (this.touched ? this.tx.abort() : this.tx.cancel());
    } catch (e) {
      throw this.failed(e, 'abort', 'fatal_error');
    } finally {
      this.tx = null;
    }
    this.machine.to('ready');
  }

  async close(): Promise<void> {
    this.machine.to('closed');
    await this.producer.close(true).catch(() => undefined);
  }
}

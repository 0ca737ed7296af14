/**
 * TransactionalSink and IdempotentSink over kafkajs producers. The state
 * machine (../transaction-state.ts) guards every call; kafkajs's errors
 * become codes (errors.ts). Every record gets its partition here (explicit,
 * or murmur2 of its key as kafkajs's default partitioner would), so send()
 * can say where each acknowledged record landed.
 */
import type { Kafka, Message, Producer, Transaction } from 'kafkajs';
import { RolloutStreamError } from '../../../errors/index.js';
import { placeRecord, positionsFrom } from '../placement.js';
import { TransactionStateMachine, type TxState } from '../transaction-state.js';
import type { IdempotentSink, IdempotentSinkOptions, OutgoingRecord, PartitionOffset, RecordPosition, TransactionalSink } from '../types.js';
import { KafkajsAdmin } from './admin.js';
import { compressionType, type CompressionName } from './compression.js';
import { kafkaErrorCode } from './errors.js';
import { sendEveryPartition, type PlacedMessage } from './send-every-partition.js';

export interface SinkOptions {
  /** Partition count of a topic (cached by the caller; topics do not change under a running stage). */
  partitionsOf: (topic: string) => Promise<number>;
  compression?: CompressionName;
}

/**
 * A coded error for a kafkajs failure (the original as `cause`). A commit or
 * abort that failed for an unrecognised reason has an unknown outcome; any
 * other unrecognised error is passed on as it is (the error policy decides).
 */
function coded(e: unknown, doing: string, endTxn = false): unknown {
  if (e instanceof RolloutStreamError) return e;
  const code = kafkaErrorCode(e) ?? (endTxn ? 'transaction_outcome_unknown' : null);
  if (code === null) return e;
  return new RolloutStreamError(code, `${doing}: ${(e as Error)?.message ?? String(e)}`, { cause: e, retriable: code !== 'authorization_failed' });
}

/**
 * Places each record, groups them per topic for kafkajs, and maps its answer
 * back to positions in input order.
 *
 * kafkajs answers one entry per partition and broker that took records. Two
 * entries for one partition mean it wrote that partition's records twice:
 * when one broker's request of a send fails and a partition whose broker
 * already took its records has moved to the failing broker meanwhile (a
 * leader change on a cluster), kafkajs's retry sends them to the new leader
 * again, with fresh sequence numbers, so the broker keeps both copies (seen
 * on the three-broker cluster: the same records twice in one transaction,
 * 51 ms apart). That send is refused here (`transaction_outcome_unknown`):
 * the transaction is aborted and both copies with it. One entry missing (the
 * converse: the partition moved to a broker that had answered already) is
 * refused the same way below.
 */
export async function sendPlaced(
  send: (topicMessages: Array<{ topic: string; messages: Message[] }>) => Promise<Array<{ topicName: string; partition: number; baseOffset?: string }>>,
  records: OutgoingRecord[],
  o: SinkOptions,
): Promise<RecordPosition[]> {
  const placed: Array<{ topic: string; partition: number }> = [];
  const byTopic = new Map<string, Message[]>();
  for (const r of records) {
    const partition = await placeRecord(r, o.partitionsOf);
    const list = byTopic.get(r.topic) ?? byTopic.set(r.topic, []).get(r.topic)!;
    list.push({ key: r.key, value: r.value, partition, ...(r.headers ? { headers: r.headers } : {}) });
    placed.push({ topic: r.topic, partition });
  }
  const meta = await send([...byTopic].map(([topic, messages]) => ({ topic, messages })));
  const answers = meta.map((m) => ({ topic: m.topicName, partition: m.partition, baseOffset: m.baseOffset === undefined ? null : BigInt(m.baseOffset) }));
  return positionsFrom(placed, answers, ' (the client resent them to a new leader)');
}

export class KafkajsTransactionalSink implements TransactionalSink {
  private readonly machine: TransactionStateMachine;
  private readonly producer: Producer;
  private tx: Transaction | null = null;

  constructor(
    kafka: Kafka,
    readonly transactionalId: string,
    transactionTimeoutMs: number,
    private readonly o: SinkOptions,
  ) {
    this.machine = new TransactionStateMachine(transactionalId);
    this.producer = kafka.producer({
      transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: transactionTimeoutMs,
      allowAutoTopicCreation: false,
      // CONCURRENT_TRANSACTIONS answers last a few ms after each commit: retry fast (README "Sizing").
      retry: { initialRetryTime: 5, maxRetryTime: 2_000, retries: 25 },
    });
  }

  get state(): TxState {
    return this.machine.state;
  }

  /** After a failure: the state it leaves the sink in. */
  private failed(e: unknown, doing: string, otherwise: TxState): unknown {
    return this.machine.failed(coded(e, `${this.transactionalId}: ${doing}`, doing === 'commit' || doing === 'abort'), otherwise);
  }

  async init(): Promise<void> {
    this.machine.guard('init');
    this.machine.to('initializing');
    try {
      await this.producer.connect();
      // kafkajs sends InitProducerId with the first transaction, not on connect: an empty
      // transaction fences the previous owner now (its abort sends nothing to the broker).
      const t = await this.producer.transaction();
      await t.abort();
    } catch (e) {
      throw this.failed(e, 'init', 'fatal_error');
    }
    this.machine.to('ready');
  }

  async begin(): Promise<void> {
    this.machine.guard('begin');
    try {
      this.tx = await this.producer.transaction();
    } catch (e) {
      throw this.failed(e, 'begin', 'fatal_error');
    }
    this.machine.to('in_transaction');
  }

  async send(records: OutgoingRecord[]): Promise<RecordPosition[]> {
    this.machine.guard('send');
    try {
      return await sendPlaced((topicMessages) => this.tx!.sendBatch({ topicMessages, compression: compressionType(this.o.compression ?? 'none') }), records, this.o);
    } catch (e) {
      throw this.failed(e, 'send', 'abortable_error');
    }
  }

  async sendOffsets(groupId: string, offsets: PartitionOffset[]): Promise<void> {
    this.machine.guard('sendOffsets');
    const byTopic = new Map<string, Array<{ partition: number; offset: string }>>();
    for (const o of offsets) (byTopic.get(o.topic) ?? byTopic.set(o.topic, []).get(o.topic)!).push({ partition: o.partition, offset: o.offset });
    try {
      await this.tx!.sendOffsets({ consumerGroupId: groupId, topics: [...byTopic].map(([topic, partitions]) => ({ topic, partitions })) });
    } catch (e) {
      throw this.failed(e, 'sendOffsets', 'abortable_error');
    }
  }

  async commit(): Promise<void> {
    this.machine.guard('commit');
    this.machine.to('committing');
    try {
      await this.tx!.commit();
    } catch (e) {
      // EndTxn's outcome is unknown: the next owner's init completes or aborts it.
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
      // A failed send may have left kafkajs's transaction already closed: nothing to abort there.
      if (this.tx?.isActive()) await this.tx.abort();
    } catch (e) {
      throw this.failed(e, 'abort', 'fatal_error');
    } finally {
      this.tx = null;
    }
    this.machine.to('ready');
  }

  async close(): Promise<void> {
    this.machine.to('closed');
    await this.producer.disconnect().catch(() => undefined);
  }
}

/** An idempotent producer (acks=all, one request in flight so order holds through retries). */
export class KafkajsIdempotentSink implements IdempotentSink {
  private readonly producer: Producer;
  private connected: Promise<void> | null = null;

  constructor(
    kafka: Kafka,
    private readonly o: SinkOptions,
  ) {
    this.producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  }

  async send(records: OutgoingRecord[]): Promise<RecordPosition[]> {
    try {
      await (this.connected ??= this.producer.connect());
      return await sendPlaced((topicMessages) => this.producer.sendBatch({ topicMessages, acks: -1, compression: compressionType(this.o.compression ?? 'none') }), records, this.o);
    } catch (e) {
      throw coded(e, 'send');
    }
  }

  async close(): Promise<void> {
    await this.producer.disconnect().catch(() => undefined);
  }
}

/**
 * The idempotent producer of the edge (OpsClient.idempotentSink: the
 * publisher, the load generator's row producer, replay, dead-letter
 * redrive). Unlike KafkajsIdempotentSink, which refuses a send whose answer
 * lacks a partition or names one twice, it sends the records of a partition
 * kafkajs skipped again and accepts one answered twice
 * (send-every-partition.ts): a non-transactional writer cannot take a write
 * back, and a publisher must get its rows through a leader change. Topics
 * are sent one after the other; partition counts (for records without a
 * partition) come from an admin client connected on first need.
 */
export class KafkajsEveryPartitionSink implements IdempotentSink {
  private admin: Promise<KafkajsAdmin> | null = null;
  private readonly counts = new Map<string, Promise<number>>();

  private constructor(
    private readonly kafka: Kafka,
    private readonly producer: Producer,
    private readonly o: IdempotentSinkOptions,
  ) {}

  /** A connected sink. */
  static async connect(kafka: Kafka, o: IdempotentSinkOptions = {}): Promise<KafkajsEveryPartitionSink> {
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
    try {
      await producer.connect();
    } catch (e) {
      throw coded(e, 'connecting the producer');
    }
    return new KafkajsEveryPartitionSink(kafka, producer, o);
  }

  private partitionsOf(topic: string): Promise<number> {
    let count = this.counts.get(topic);
    if (count === undefined) {
      count = (this.admin ??= KafkajsAdmin.connect(this.kafka)).then((a) => a.partitionCount(topic));
      this.counts.set(topic, count);
      count.catch(() => this.counts.delete(topic));
    }
    return count;
  }

  async send(records: OutgoingRecord[]): Promise<RecordPosition[]> {
    const byTopic = new Map<string, Array<{ message: PlacedMessage; at: number }>>();
    const partitionsOf = (topic: string) => this.partitionsOf(topic);
    for (const [at, r] of records.entries()) {
      const partition = await placeRecord(r, partitionsOf);
      const list = byTopic.get(r.topic) ?? byTopic.set(r.topic, []).get(r.topic)!;
      list.push({ message: { key: r.key, value: r.value, partition, ...(r.headers ? { headers: r.headers } : {}) }, at });
    }
    const positions = new Array<RecordPosition>(records.length);
    const compression = compressionType(this.o.compression ?? 'none');
    for (const [topic, list] of byTopic) {
      let meta;
      try {
        meta = await sendEveryPartition(this.producer, topic, list.map((m) => m.message), compression);
      } catch (e) {
        throw coded(e, `sending to ${topic}`);
      }
      const next = new Map<number, bigint>();
      for (const m of meta) if (!next.has(m.partition) && m.baseOffset !== undefined) next.set(m.partition, BigInt(m.baseOffset));
      for (const { message, at } of list) {
        const offset = next.get(message.partition);
        if (offset === undefined) throw new RolloutStreamError('partition_unavailable', `the broker returned no offset for ${topic}/${message.partition}`, { retriable: true });
        next.set(message.partition, offset + 1n);
        positions[at] = { topic, partition: message.partition, offset: offset.toString() };
      }
    }
    return positions;
  }

  async close(): Promise<void> {
    await this.producer.disconnect().catch(() => undefined);
    const admin = this.admin;
    this.admin = null;
    await admin?.then((a) => a.close()).catch(() => undefined);
  }
}

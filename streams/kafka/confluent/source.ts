/**
 * GroupSource over a librdkafka `KafkaConsumer` (the node-rdkafka API of
 * @confluentinc/kafka-javascript), pulled. librdkafka fetches ahead into its
 * queue; this source drains it with `consume(n)` into a buffer per partition
 * and hands out at most one batch per partition until `release`. A release
 * at the batch's end goes on with the buffer; any other position (`null`, a
 * seek, a partial release) restarts the partition there: its buffer and
 * whatever arrives of it are dropped until the loop, between two consume
 * calls, has made librdkafka `seek` there (a seek drops what librdkafka had
 * queued, but not what a consume call in flight already took). A buffer
 * past twice the per-partition fetch size pauses the partition's fetching
 * in librdkafka, which resumes after the last record consumed.
 *
 * Group membership is librdkafka's (classic protocol, eager: the rebalance
 * callback revokes everything before each rejoin and assigns after it; the
 * listener hears the difference, as with kafkajs: revocation is advisory,
 * fencing keeps it safe; every batch out at a revocation is no longer
 * current). The member announces a builtin assignor standing in for our
 * protocol names (protocols.ts: librdkafka runs no custom assignor). After
 * each assignment every partition, new or kept, starts again at the group's
 * committed offset, read once `onAssigned` finished (which fences the
 * previous owner, so the offset is stable), or where a seek during
 * `onAssigned` put it; the log start when the group has none.
 */
import { RolloutStreamError } from '../../../errors/index.js';
import type { KafkaConsumer, LibrdKafkaError, Message, TopicPartition, TopicPartitionOffset } from '@confluentinc/kafka-javascript';
import type { FetchedBatch, FetchedRecord, GroupSource, MemberProtocols, Offset, RebalanceListener } from '../types.js';
import { callback, coded, codedCall } from './errors.js';
import { CONNECT, confluent, consumeReadyMessages } from './library.js';
import type { RdkafkaProperties } from './options.js';
import { subscriptionOf, type Subscription } from './protocols.js';

export interface ConfluentSourceOptions {
  groupId: string;
  topic: string;
  sessionTimeoutMs: number;
  maxBytes: number;
  maxBytesPerPartition?: number;
  concurrency?: number;
  protocols?: MemberProtocols;
}

const ASSIGN = -175;
const REVOKE = -174;
const INCONSISTENT_GROUP_PROTOCOL = 23;
/** librdkafka's logical offset "the log start" (RD_KAFKA_OFFSET_BEGINNING). */
const BEGINNING = -2;
/** `positions` value of a partition read from its log start: the first record that comes is the position. */
const FROM_START = -2n;
const HANDLE = Symbol('held');

interface Held {
  epoch: number;
  first: bigint;
  last: bigint;
}

function toRecord(m: Message): FetchedRecord {
  const headers: Record<string, Buffer> = {};
  for (const h of m.headers ?? []) for (const [k, v] of Object.entries(h)) headers[k] = Buffer.isBuffer(v) ? v : Buffer.from(v);
  const key = m.key === undefined || m.key === null ? null : Buffer.isBuffer(m.key) ? m.key : Buffer.from(m.key);
  return { topic: m.topic, partition: m.partition, offset: String(m.offset), timestamp: m.timestamp ?? 0, key, value: m.value ?? null, headers };
}

export class ConfluentGroupSource implements GroupSource {
  readonly consumer: KafkaConsumer;
  private readonly sub: Subscription;
  private readonly queue: FetchedBatch[] = [];
  private readonly out = new Map<number, FetchedBatch>();
  /** Records consumed and not yet handed out, per partition, in offset order. */
  private readonly pending = new Map<number, Message[]>();
  private readonly pendingBytes = new Map<number, number>();
  /** Next offset to hand out per partition (FROM_START: the first record that comes); absent: not ready, records are dropped. */
  private readonly positions = new Map<number, bigint>();
  /** Restarts the loop still has to make librdkafka perform (before its next consume call): records of these partitions are dropped. */
  private readonly toSeek = new Map<number, bigint>();
  /** Where the end of the partition was last seen (librdkafka's fetch position at a partition EOF), per restart. */
  private readonly ends = new Map<number, { restart: number; offset: bigint }>();
  private readonly restarts = new Map<number, number>();
  private readonly seeks = new Map<number, bigint>();
  private readonly paused = new Set<number>();
  /** Partitions whose fetching this source paused in librdkafka (buffer full). */
  private readonly libPaused = new Set<number>();
  /** Bumped when a partition is assigned, revoked or rebalanced: a batch of an older epoch is not current. */
  private readonly epochs = new Map<number, number>();
  /** Bumped at each revocation: a consume call begun before one brings records of the old assignment. */
  private generation = 0;
  private assigned = new Set<number>();
  private assignedReady: Promise<void> = Promise.resolve();
  private waiter: (() => void) | null = null;
  private wakeLoop: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private stopping = false;
  private joined = false;
  private listener: RebalanceListener | null = null;
  private joinWaiter: { resolve: () => void; reject: (e: unknown) => void } | null = null;

  constructor(
    base: RdkafkaProperties,
    private readonly o: ConfluentSourceOptions,
    private readonly onStop: () => void = () => undefined,
  ) {
    this.sub = subscriptionOf(o.topic, o.protocols);
    const perPartition = o.maxBytesPerPartition ?? o.maxBytes;
    this.consumer = new confluent.KafkaConsumer(
      {
        ...base,
        'group.id': o.groupId,
        'isolation.level': 'read_committed',
        'enable.auto.commit': false,
        'enable.auto.offset.store': false,
        'allow.auto.create.topics': false,
        'enable.partition.eof': true,
        'session.timeout.ms': o.sessionTimeoutMs,
        'heartbeat.interval.ms': Math.max(500, Math.floor(o.sessionTimeoutMs / 10)),
        'max.poll.interval.ms': Math.max(300_000, o.sessionTimeoutMs),
        'partition.assignment.strategy': this.sub.strategy,
        // librdkafka's floor: fetch.max.bytes ≥ message.max.bytes ≥ 1000.
        'fetch.max.bytes': Math.max(1000, o.maxBytes),
        'max.partition.fetch.bytes': perPartition,
        'message.max.bytes': Math.max(1000, Math.min(1_000_000, o.maxBytes)),
        'receive.message.max.bytes': Math.max(100_000_000, o.maxBytes + 512),
        'fetch.wait.max.ms': 100,
        'queued.max.messages.kbytes': Math.max(4096, Math.ceil((4 * o.maxBytes) / 1024)),
        rebalance_cb: (err: LibrdKafkaError, assignment: TopicPartition[]) => this.onRebalance(err, assignment),
      } as never,
      // A topic property: in the global properties it is overridden by this (default) topic configuration.
      { 'auto.offset.reset': 'earliest' },
    );
    this.consumer.setDefaultConsumeTimeout(100);
    consumeReadyMessages(this.consumer);
  }

  /** Joins the group; resolves at the first assignment, rejects with `mode_conflict` when the coordinator refuses our protocol. */
  async start(listener: RebalanceListener): Promise<void> {
    this.listener = listener;
    const c = this.consumer;
    const joined = new Promise<void>((resolve, reject) => (this.joinWaiter = { resolve, reject }));
    joined.catch(() => undefined);
    c.on('partition.eof', (e: { topic: string; partition: number; offset: number }) => {
      if (e.topic !== this.o.topic || !this.positions.has(e.partition) || this.toSeek.has(e.partition)) return;
      this.ends.set(e.partition, { restart: this.restarts.get(e.partition) ?? 0, offset: BigInt(e.offset) });
    });
    c.on('event.error', (e: LibrdKafkaError) => this.onClientError(e));
    try {
      await new Promise<void>((resolve, reject) => c.connect(CONNECT, (err) => (err ? reject(err) : resolve())));
      c.subscribe([this.sub.topic]);
    } catch (e) {
      throw coded(e, `joining group ${this.o.groupId}`);
    }
    this.loop = this.run();
    try {
      await joined;
    } catch (e) {
      await this.stop();
      throw e;
    }
  }

  /** A consumer error (a consume call's, or the client's `event.error`, which carries librdkafka's message only). */
  private onClientError(e: LibrdKafkaError): void {
    if (this.stopping) return;
    if (e.code === INCONSISTENT_GROUP_PROTOCOL && !this.joined) {
      this.joinWaiter?.reject(coded(e, `joining group ${this.o.groupId} announcing ${this.sub.strategy}`));
      return;
    }
    if (e.isFatal) {
      const err = coded(e, this.joined ? 'the consumer failed' : `joining group ${this.o.groupId}`);
      if (this.joined) this.listener?.onLost(err);
      else this.joinWaiter?.reject(err);
    }
    // Anything else (a broker connection lost, a retried request, a rejoin) librdkafka recovers from by itself.
  }

  private onRebalance(err: LibrdKafkaError, assignment: TopicPartition[]): void {
    try {
      if (err.code === REVOKE) {
        this.consumer.unassign();
        if (this.stopping) return;
        this.generation++;
        // Every batch out belongs to the old generation; nothing is handed out until the next assignment is ready.
        for (const p of this.assigned) this.forget(p);
        return;
      }
      if (err.code !== ASSIGN) return;
      if (this.stopping) {
        this.consumer.assign([]);
        return;
      }
      const now = new Set(this.sub.takesPartitions ? assignment.filter((a) => a.topic === this.o.topic).map((a) => a.partition) : []);
      const added = [...now].filter((p) => !this.assigned.has(p)).sort((a, b) => a - b);
      const removed = [...this.assigned].filter((p) => !now.has(p)).sort((a, b) => a - b);
      for (const p of [...added, ...removed]) this.forget(p);
      for (const p of now) this.seeks.delete(p);
      this.assigned = now;
      const list = [...now].map((partition) => ({ topic: this.o.topic, partition }));
      this.consumer.assign(list);
      // A pause of this source's (a full buffer) must not outlive the assignment it was made in.
      if (list.length > 0) this.consumer.resume(list);
      if (!this.joined) {
        this.joined = true;
        this.joinWaiter?.resolve();
      }
      const listener = this.listener!;
      const epochs = new Map([...now].map((p) => [p, this.epochs.get(p)]));
      this.assignedReady = this.assignedReady.then(async () => {
        if (removed.length > 0) await listener.onRevoked(removed);
        if (added.length > 0) await listener.onAssigned(added);
        const ready = [...now].filter((p) => this.assigned.has(p) && this.epochs.get(p) === epochs.get(p));
        if (ready.length === 0) return;
        const committed = await this.committed(ready);
        for (const p of ready) {
          if (!this.assigned.has(p) || this.epochs.get(p) !== epochs.get(p)) continue;
          const seek = this.seeks.get(p);
          this.seeks.delete(p);
          this.restart(p, seek ?? committed.get(p) ?? FROM_START);
        }
      });
      this.assignedReady.catch((e: unknown) => listener.onLost(e));
    } catch (e) {
      if (!this.stopping) this.listener?.onLost(coded(e, `rebalancing group ${this.o.groupId}`));
    }
  }

  /** The group's committed offsets of `partitions` (stable: librdkafka asks with require_stable under read_committed); absent where none. */
  private async committed(partitions: number[]): Promise<Map<number, bigint>> {
    const list = await codedCall(`reading the committed offsets of group ${this.o.groupId}`, () =>
      callback<TopicPartitionOffset[]>((cb) => this.consumer.committed(partitions.map((partition) => ({ topic: this.o.topic, partition })), 30_000, cb)),
    );
    return new Map(list.filter((t) => t.offset >= 0).map((t) => [t.partition, BigInt(t.offset)]));
  }

  /** Not ready: a new epoch for `p` (batches out are stale), its buffer dropped, no position until a restart. */
  private forget(p: number): void {
    this.epochs.set(p, (this.epochs.get(p) ?? 0) + 1);
    this.pending.delete(p);
    this.pendingBytes.delete(p);
    this.libPaused.delete(p);
    this.positions.delete(p);
    this.toSeek.delete(p);
    this.ends.delete(p);
  }

  /** Fetches `p` again from `offset` (FROM_START: the log start): the loop seeks before its next consume call. */
  private restart(p: number, offset: bigint): void {
    this.restarts.set(p, (this.restarts.get(p) ?? 0) + 1);
    this.pending.delete(p);
    this.pendingBytes.delete(p);
    this.positions.set(p, offset);
    this.toSeek.set(p, offset);
    this.wakeLoop?.();
  }

  /** Performs the restarts asked for (librdkafka drops what it queued of them); one that fails is tried again. */
  private applySeeks(): void {
    for (const [p, offset] of [...this.toSeek]) {
      this.toSeek.delete(p);
      const tp = { topic: this.o.topic, partition: p };
      if (this.libPaused.delete(p)) this.consumer.resume([tp]);
      const restart = this.restarts.get(p);
      // A partition librdkafka has not started yet may refuse a seek (ERR__STATE): ask again shortly.
      this.consumer.seek({ ...tp, offset: offset === FROM_START ? BEGINNING : Number(offset) }, 0, (err) => {
        if (!err || this.stopping || this.restarts.get(p) !== restart || !this.assigned.has(p)) return;
        setTimeout(() => {
          if (this.restarts.get(p) === restart && !this.toSeek.has(p)) this.restart(p, offset);
        }, 50);
      });
    }
  }

  private async run(): Promise<void> {
    let backoff = 0;
    while (!this.stopping) {
      this.applySeeks();
      const generation = this.generation;
      let messages: Message[];
      try {
        messages = await new Promise<Message[]>((resolve, reject) => this.consumer.consume(1000, (err, ms) => (err ? reject(err) : resolve(ms ?? []))));
        backoff = 0;
      } catch (e) {
        if (this.stopping) return;
        this.onClientError(e as LibrdKafkaError);
        backoff = Math.min(1_000, backoff === 0 ? 50 : backoff * 2);
        await new Promise<void>((r) => {
          const t = setTimeout(r, backoff);
          this.wakeLoop = () => (clearTimeout(t), r());
        });
        this.wakeLoop = null;
        continue;
      }
      if (generation === this.generation) for (const m of messages) this.accept(m);
      this.fill();
    }
  }

  private accept(m: Message): void {
    const p = m.partition;
    if (m.topic !== this.o.topic || !this.assigned.has(p) || this.toSeek.has(p)) return;
    const pos = this.positions.get(p);
    if (pos === undefined || (pos >= 0n && BigInt(m.offset) < pos)) return;
    const list = this.pending.get(p) ?? this.pending.set(p, []).get(p)!;
    list.push(m);
    const bytes = (this.pendingBytes.get(p) ?? 0) + (m.size ?? 0);
    this.pendingBytes.set(p, bytes);
    if (bytes > 2 * (this.o.maxBytesPerPartition ?? this.o.maxBytes) && !this.libPaused.has(p)) {
      this.libPaused.add(p);
      this.consumer.pause([{ topic: this.o.topic, partition: p }]);
    }
  }

  /** Hands out a batch of every partition that may have one. */
  private fill(): void {
    const limit = this.o.maxBytesPerPartition ?? this.o.maxBytes;
    for (const p of [...this.assigned].sort((a, b) => a - b)) {
      if (this.out.size >= (this.o.concurrency ?? 4)) break;
      const list = this.pending.get(p);
      if (!list || list.length === 0 || this.out.has(p) || this.paused.has(p) || !this.positions.has(p) || this.toSeek.has(p)) continue;
      let bytes = 0;
      let n = 0;
      while (n < list.length && (n === 0 || bytes + (list[n]!.size ?? 0) <= limit)) bytes += list[n++]!.size ?? 0;
      const taken = list.splice(0, n);
      this.pendingBytes.set(p, (this.pendingBytes.get(p) ?? 0) - bytes);
      if (this.libPaused.has(p) && (this.pendingBytes.get(p) ?? 0) <= limit) {
        this.libPaused.delete(p);
        this.consumer.resume([{ topic: this.o.topic, partition: p }]);
      }
      const last = BigInt(taken.at(-1)!.offset);
      const batch: FetchedBatch = { topic: this.o.topic, partition: p, records: taken.map(toRecord), highWatermark: this.highWatermark(p, last + 1n).toString() };
      (batch as FetchedBatch & { [HANDLE]?: Held })[HANDLE] = { epoch: this.epochs.get(p) ?? 0, first: BigInt(taken[0]!.offset), last };
      this.out.set(p, batch);
      this.queue.push(batch);
    }
    if (this.queue.length > 0) this.waiter?.();
  }

  /** The high watermark librdkafka last saw in a fetch response of `p` (at least `atLeast`). */
  private highWatermark(p: number, atLeast: bigint): bigint {
    try {
      const high = BigInt(this.consumer.getWatermarkOffsets(this.o.topic, p).highOffset);
      return high > atLeast ? high : atLeast;
    } catch {
      return atLeast;
    }
  }

  async poll(maxWaitMs: number): Promise<FetchedBatch[]> {
    if (this.queue.length === 0 && !this.stopping) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, maxWaitMs);
        this.waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.waiter = null;
    }
    return this.queue.splice(0);
  }

  release(batch: FetchedBatch, next: Offset | null): void {
    const held = (batch as FetchedBatch & { [HANDLE]?: Held })[HANDLE];
    if (!held) throw new RolloutStreamError('transaction_state', `release of a batch this source did not hand out (${batch.topic}/${batch.partition})`);
    const p = batch.partition;
    if (this.out.get(p) !== batch) return;
    this.out.delete(p);
    if (this.epochs.get(p) === held.epoch && this.positions.has(p)) {
      const seek = this.seeks.get(p);
      this.seeks.delete(p);
      const target = seek ?? (next === null ? held.first : BigInt(next));
      if (seek === undefined && target === held.last + 1n) this.positions.set(p, target);
      else this.restart(p, target);
    }
    this.fill();
  }

  isCurrent(batch: FetchedBatch): boolean {
    const held = (batch as FetchedBatch & { [HANDLE]?: Held })[HANDLE];
    return held !== undefined && this.assigned.has(batch.partition) && this.epochs.get(batch.partition) === held.epoch;
  }

  seek(partition: number, offset: Offset): void {
    if (this.out.has(partition) || !this.positions.has(partition)) this.seeks.set(partition, BigInt(offset));
    else this.restart(partition, BigInt(offset));
  }

  fetchPosition(partition: number): Offset | null {
    if (this.out.has(partition) || this.toSeek.has(partition)) return null;
    const pos = this.positions.get(partition);
    if (pos === undefined || pos < 0n) return null;
    const first = this.pending.get(partition)?.[0];
    if (first) return String(first.offset);
    const end = this.ends.get(partition);
    return end !== undefined && end.restart === this.restarts.get(partition) && end.offset > pos ? end.offset.toString() : pos.toString();
  }

  pause(partitions: number[]): void {
    for (const p of partitions) this.paused.add(p);
  }

  resume(partitions: number[]): void {
    for (const p of partitions) this.paused.delete(p);
    this.fill();
  }

  assignment(): ReadonlySet<number> {
    return this.assigned;
  }

  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.waiter?.();
    this.wakeLoop?.();
    this.queue.splice(0);
    this.out.clear();
    await this.loop?.catch(() => undefined);
    this.onStop();
    await new Promise<void>((resolve) => this.consumer.disconnect(() => resolve())).catch(() => undefined);
  }
}

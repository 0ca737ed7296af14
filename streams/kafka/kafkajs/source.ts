/**
 * GroupSource over a kafkajs consumer: kafkajs pushes batches into
 * `eachBatch`; this queues each one and holds kafkajs's call until the
 * runtime releases it, so the runtime pulls (`poll`) and a partition fetches
 * again only after its batch was handed back. While a batch is held the
 * member keeps heartbeating. Rebalances reach the listener from GROUP_JOIN
 * (kafkajs has no callback before the new generation: revocation is
 * advisory, fencing keeps it safe), and a batch of a newly assigned
 * partition is queued only after `onAssigned` finished.
 */
import type { Batch, Consumer, EachBatchPayload, Kafka, PartitionAssigner } from 'kafkajs';
import { kindOfCode, RolloutStreamError } from '../../../errors/index.js';
import type { FetchedBatch, GroupSource, Offset, RebalanceListener } from '../types.js';
import { kafkaErrorCode } from './errors.js';

export interface KafkajsSourceOptions {
  groupId: string;
  topic: string;
  sessionTimeoutMs: number;
  /** Largest fetch, per request. */
  maxBytes: number;
  /** Largest fetch per partition (default `maxBytes`). */
  maxBytesPerPartition?: number;
  /** Partitions processed at once (kafkajs `partitionsConsumedConcurrently`). */
  concurrency?: number;
  partitionAssigners?: PartitionAssigner[];
}

interface Held {
  batch: FetchedBatch;
  release: (next: Offset | null) => void;
  isStale: () => boolean;
}

const HANDLE = Symbol('held');

export class KafkajsGroupSource implements GroupSource {
  private readonly consumer: Consumer;
  private readonly queue: Held[] = [];
  private readonly out = new Map<number, Held>();
  private readonly seeks = new Map<number, Offset>();
  /** Next offset to fetch per partition, as far as this source knows it (GroupSource.fetchPosition). */
  private readonly positions = new Map<number, bigint>();
  private waiter: (() => void) | null = null;
  private assigned = new Set<number>();
  /** Resolves once the listener has taken the latest assignment. */
  private assignedReady: Promise<void> = Promise.resolve();
  private stopping = false;

  constructor(
    kafka: Kafka,
    private readonly o: KafkajsSourceOptions,
  ) {
    this.consumer = kafka.consumer({
      groupId: o.groupId,
      readUncommitted: false,
      sessionTimeout: o.sessionTimeoutMs,
      heartbeatInterval: Math.max(500, Math.floor(o.sessionTimeoutMs / 10)),
      rebalanceTimeout: Math.max(30_000, o.sessionTimeoutMs),
      maxBytes: o.maxBytes,
      maxBytesPerPartition: o.maxBytesPerPartition ?? o.maxBytes,
      maxWaitTimeInMs: 50,
      allowAutoTopicCreation: false,
      ...(o.partitionAssigners ? { partitionAssigners: o.partitionAssigners } : {}),
    });
  }

  /**
   * Joins the group; resolves once this member has joined (kafkajs's `run`
   * resolves even when the join failed: the crash is what says so). A crash
   * kafkajs recovers from by itself (it restarts the consumer and rejoins)
   * is reported as the loss of every partition, which the rejoin assigns
   * again; one it does not recover from is `onLost` (before the join: the
   * rejection of `start`).
   */
  async start(listener: RebalanceListener): Promise<void> {
    const c = this.consumer;
    let joined = false;
    let joinedNow!: () => void;
    let failed!: (e: unknown) => void;
    const join = new Promise<void>((resolve, reject) => {
      joinedNow = resolve;
      failed = reject;
    });
    join.catch(() => undefined);
    const update = (now: Set<number>) => {
      const added = [...now].filter((p) => !this.assigned.has(p)).sort((a, b) => a - b);
      const removed = [...this.assigned].filter((p) => !now.has(p)).sort((a, b) => a - b);
      for (const p of [...added, ...removed]) this.positions.delete(p);
      this.assigned = now;
      const previous = this.assignedReady;
      this.assignedReady = previous.then(async () => {
        if (removed.length > 0) await listener.onRevoked(removed);
        if (added.length > 0) await listener.onAssigned(added);
      });
      this.assignedReady.catch((err: unknown) => listener.onLost(err));
    };
    // kafkajs skips a fetched batch that holds only aborted records or
    // markers without calling eachBatch, moving its position past it.
    c.on(c.events.END_BATCH_PROCESS, (e) => {
      const { partition, batchSize, lastOffset } = e.payload;
      if (e.payload.topic !== this.o.topic || batchSize !== 0 || lastOffset === null || lastOffset === undefined || this.out.has(partition)) return;
      const next = BigInt(lastOffset) + 1n;
      if (next > (this.positions.get(partition) ?? -1n)) this.positions.set(partition, next);
    });
    c.on(c.events.GROUP_JOIN, (e) => {
      joined = true;
      joinedNow();
      update(new Set<number>(e.payload.memberAssignment[this.o.topic] ?? []));
    });
    c.on(c.events.CRASH, (e) => {
      if (this.stopping) return;
      if (e.payload.restart) {
        update(new Set());
        listener.onRejoining?.(e.payload.error);
        return;
      }
      const err = coded(e.payload.error, joined ? 'the consumer crashed' : `joining group ${this.o.groupId}`);
      if (joined) listener.onLost(err);
      else failed(err);
    });
    try {
      await c.connect();
      await c.subscribe({ topic: this.o.topic, fromBeginning: true });
      await c.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: this.o.concurrency ?? 4,
        eachBatch: (payload) => this.hold(payload),
      });
    } catch (e) {
      throw coded(e, `joining group ${this.o.groupId}`);
    }
    await join;
  }

  private async hold({ batch, resolveOffset, heartbeat, isStale, isRunning }: EachBatchPayload): Promise<void> {
    if (this.stopping || batch.messages.length === 0) return;
    await this.assignedReady.catch(() => undefined);
    if (isStale() || !isRunning()) return;
    let release!: (next: Offset | null) => void;
    const released = new Promise<Offset | null>((resolve) => (release = resolve));
    const held: Held = { batch: toFetched(batch), release, isStale };
    (held.batch as FetchedBatch & { [HANDLE]?: Held })[HANDLE] = held;
    this.out.set(batch.partition, held);
    this.queue.push(held);
    this.waiter?.();
    const beat = setInterval(() => void heartbeat().catch(() => undefined), Math.max(500, Math.floor(this.o.sessionTimeoutMs / 10)));
    let next: Offset | null;
    try {
      next = await released;
    } finally {
      clearInterval(beat);
      this.out.delete(batch.partition);
    }
    if (this.stopping) return;
    const seek = this.seeks.get(batch.partition);
    this.seeks.delete(batch.partition);
    const at = seek ?? next ?? batch.firstOffset()!;
    this.positions.set(batch.partition, BigInt(at));
    if (seek !== undefined) this.consumer.seek({ topic: batch.topic, partition: batch.partition, offset: seek });
    else if (next === null) this.consumer.seek({ topic: batch.topic, partition: batch.partition, offset: batch.firstOffset()! });
    else if (!isStale()) resolveOffset((BigInt(next) - 1n).toString());
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
    return this.queue.splice(0).map((h) => h.batch);
  }

  release(batch: FetchedBatch, next: Offset | null): void {
    const held = (batch as FetchedBatch & { [HANDLE]?: Held })[HANDLE];
    if (!held) throw new RolloutStreamError('transaction_state', `release of a batch this source did not hand out (${batch.topic}/${batch.partition})`);
    held.release(next);
  }

  isCurrent(batch: FetchedBatch): boolean {
    const held = (batch as FetchedBatch & { [HANDLE]?: Held })[HANDLE];
    return held !== undefined && this.assigned.has(batch.partition) && !held.isStale();
  }

  seek(partition: number, offset: Offset): void {
    if (this.out.has(partition)) this.seeks.set(partition, offset);
    else {
      this.positions.set(partition, BigInt(offset));
      this.consumer.seek({ topic: this.o.topic, partition, offset });
    }
  }

  fetchPosition(partition: number): Offset | null {
    if (this.out.has(partition)) return null;
    const p = this.positions.get(partition);
    return p === undefined ? null : p.toString();
  }

  pause(partitions: number[]): void {
    if (partitions.length > 0) this.consumer.pause([{ topic: this.o.topic, partitions }]);
  }

  resume(partitions: number[]): void {
    if (partitions.length > 0) this.consumer.resume([{ topic: this.o.topic, partitions }]);
  }

  assignment(): ReadonlySet<number> {
    return this.assigned;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.waiter?.();
    for (const h of this.queue.splice(0)) h.release(null);
    for (const h of this.out.values()) h.release(null);
    await this.consumer.disconnect().catch(() => undefined);
  }
}

function toFetched(batch: Batch): FetchedBatch {
  return {
    topic: batch.topic,
    partition: batch.partition,
    highWatermark: batch.highWatermark,
    records: batch.messages.map((m) => {
      const headers: Record<string, Buffer> = {};
      for (const [k, v] of Object.entries(m.headers ?? {})) if (Buffer.isBuffer(v)) headers[k] = v;
      return { topic: batch.topic, partition: batch.partition, offset: m.offset, timestamp: Number(m.timestamp), key: m.key ?? null, value: m.value ?? null, headers };
    }),
  };
}

function coded(e: unknown, doing: string): unknown {
  if (e instanceof RolloutStreamError) return e;
  const code = kafkaErrorCode(e);
  return code === null ? e : new RolloutStreamError(code, `${doing}: ${(e as Error).message}`, { cause: e, retriable: kindOfCode(code) !== 'fatal' });
}

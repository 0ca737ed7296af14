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
import { RolloutStreamError } from '../../../errors/index.js';
import type { FetchedBatch, GroupSource, Offset, RebalanceListener } from '../types.js';
import { kafkaErrorCode } from './errors.js';

export interface KafkajsSourceOptions {
  groupId: string;
  topic: string;
  sessionTimeoutMs: number;
  /** Largest fetch, per request and per partition. */
  maxBytes: number;
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
      rebalanceTimeout: Math.max(60_000, o.sessionTimeoutMs),
      maxBytes: o.maxBytes,
      maxBytesPerPartition: o.maxBytes,
      maxWaitTimeInMs: 100,
      allowAutoTopicCreation: false,
      ...(o.partitionAssigners ? { partitionAssigners: o.partitionAssigners } : {}),
    });
  }

  async start(listener: RebalanceListener): Promise<void> {
    const c = this.consumer;
    c.on(c.events.GROUP_JOIN, (e) => {
      const now = new Set<number>(e.payload.memberAssignment[this.o.topic] ?? []);
      const added = [...now].filter((p) => !this.assigned.has(p)).sort((a, b) => a - b);
      const removed = [...this.assigned].filter((p) => !now.has(p)).sort((a, b) => a - b);
      this.assigned = now;
      const previous = this.assignedReady;
      this.assignedReady = previous.then(async () => {
        if (removed.length > 0) await listener.onRevoked(removed);
        if (added.length > 0) await listener.onAssigned(added);
      });
      this.assignedReady.catch((err: unknown) => listener.onLost(err));
    });
    c.on(c.events.CRASH, (e) => {
      if (!e.payload.restart && !this.stopping) listener.onLost(coded(e.payload.error, 'the consumer crashed'));
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
    else this.consumer.seek({ topic: this.o.topic, partition, offset });
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
  return code === null ? e : new RolloutStreamError(code, `${doing}: ${(e as Error).message}`, { cause: e, retriable: code !== 'authorization_failed' });
}

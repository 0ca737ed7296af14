/**
 * GroupSource over a @platformatic/kafka `Consumer`, pulled. The client's
 * own reading API is a push stream (`consume()` → MessagesStream) that
 * fetches ahead on every assigned partition and has no per-partition
 * hand-back, so this source uses only its group membership (JoinGroup,
 * SyncGroup, heartbeats and rejoins: `joinGroup`, `consumer:group:join`) and
 * its low-level `fetch` (one Fetch request to one broker, read_committed,
 * aborted batches removed), and runs its own loop: a partition is fetched
 * only while it has no batch out, from the position `release`/`seek` set.
 *
 * Rebalances reach the listener from `consumer:group:join` (after the new
 * generation formed, as with kafkajs: revocation is advisory, fencing keeps
 * it safe); a newly assigned partition is fetched only after `onAssigned`
 * finished, from the group's committed offset (the log start when none).
 */
import { Consumer, FetchIsolationLevels, type GroupAssignment } from '@platformatic/kafka';
import { RolloutStreamError } from '../../../errors/index.js';
import type { FetchedBatch, FetchedRecord, GroupSource, MemberProtocols, Offset, RebalanceListener } from '../types.js';
import { coded } from './errors.js';
import type { PlatformaticBaseOptions } from './options.js';
import { roundRobinAssigner } from './assigner.js';

export interface PlatformaticSourceOptions {
  groupId: string;
  topic: string;
  sessionTimeoutMs: number;
  maxBytes: number;
  maxBytesPerPartition?: number;
  concurrency?: number;
  protocols?: MemberProtocols;
}

const IS_CONTROL = 1 << 5;
const HANDLE = Symbol('held');

interface Held {
  epoch: number;
  first: bigint;
}

/** Decodes one partition's fetched record batches: data records at or past `from`, in offset order. */
export function decodeBatches(
  topic: string,
  partition: number,
  batches: Array<{ firstOffset: bigint; attributes: number; lastOffsetDelta: number; firstTimestamp: bigint; records: Array<{ offsetDelta: number; timestampDelta: bigint; key: Buffer | null; value: Buffer | null; headers: Array<[Buffer | null, Buffer | null]> }> }>,
  from: bigint,
): { records: FetchedRecord[]; next: bigint } {
  const records: FetchedRecord[] = [];
  let next = from;
  for (const b of batches) {
    const end = b.firstOffset + BigInt(b.lastOffsetDelta) + 1n;
    if (end > next) next = end;
    if (b.attributes & IS_CONTROL) continue;
    for (const r of b.records) {
      const offset = b.firstOffset + BigInt(r.offsetDelta);
      if (offset < from) continue;
      const headers: Record<string, Buffer> = {};
      for (const [k, v] of r.headers) if (k && v) headers[k.toString()] = v;
      records.push({ topic, partition, offset: offset.toString(), timestamp: Number(b.firstTimestamp + r.timestampDelta), key: r.key ?? null, value: r.value ?? null, headers });
    }
  }
  return { records, next };
}

export class PlatformaticGroupSource implements GroupSource {
  readonly consumer: Consumer;
  private readonly queue: FetchedBatch[] = [];
  private readonly out = new Map<number, FetchedBatch>();
  private readonly positions = new Map<number, bigint>();
  private readonly seeks = new Map<number, bigint>();
  private readonly paused = new Set<number>();
  /** Bumped when a partition is assigned or revoked: a batch of an older epoch is not current. */
  private readonly epochs = new Map<number, number>();
  private assigned = new Set<number>();
  private assignedReady: Promise<void> = Promise.resolve();
  private waiter: (() => void) | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private stopping = false;
  private listener: RebalanceListener | null = null;

  constructor(
    base: PlatformaticBaseOptions,
    private readonly o: PlatformaticSourceOptions,
    private readonly onStop: () => void = () => undefined,
  ) {
    const heartbeatInterval = Math.max(500, Math.floor(o.sessionTimeoutMs / 10));
    this.consumer = new Consumer({
      ...base,
      groupId: o.groupId,
      isolationLevel: FetchIsolationLevels.READ_COMMITTED,
      autocommit: false,
      sessionTimeout: o.sessionTimeoutMs,
      heartbeatInterval,
      rebalanceTimeout: Math.max(60_000, o.sessionTimeoutMs),
      maxBytes: o.maxBytes,
      maxWaitTime: 100,
      autocreateTopics: false,
      ...(o.protocols ? { partitionAssigner: roundRobinAssigner } : {}),
    });
  }

  private groupOptions() {
    return {
      sessionTimeout: this.o.sessionTimeoutMs,
      rebalanceTimeout: Math.max(60_000, this.o.sessionTimeoutMs),
      heartbeatInterval: Math.max(500, Math.floor(this.o.sessionTimeoutMs / 10)),
      ...(this.o.protocols
        ? { protocols: this.o.protocols.names.map((name) => ({ name, version: 1, ...(this.o.protocols!.takesPartitions === false ? { metadata: GUARD_TEXT } : {}) })), partitionAssigner: roundRobinAssigner }
        : {}),
    };
  }

  async start(listener: RebalanceListener): Promise<void> {
    this.listener = listener;
    const c = this.consumer;
    c.on('consumer:group:join', (e: { assignments?: GroupAssignment[] }) => this.onJoin(e.assignments ?? []));
    c.on('error', (e: unknown) => {
      if (!this.stopping) listener.onLost(coded(e, `group ${this.o.groupId}: rejoining`));
    });
    c.topics.track(this.o.topic);
    try {
      await c.joinGroup(this.groupOptions());
    } catch (e) {
      throw coded(e, `joining group ${this.o.groupId}`);
    }
    this.loop = this.run();
  }

  private onJoin(assignments: GroupAssignment[]): void {
    const now = new Set<number>(assignments.find((a) => a.topic === this.o.topic)?.partitions ?? []);
    const added = [...now].filter((p) => !this.assigned.has(p)).sort((a, b) => a - b);
    const removed = [...this.assigned].filter((p) => !now.has(p)).sort((a, b) => a - b);
    for (const p of [...added, ...removed]) {
      this.epochs.set(p, (this.epochs.get(p) ?? 0) + 1);
      this.positions.delete(p);
      this.seeks.delete(p);
    }
    this.assigned = now;
    const listener = this.listener!;
    this.assignedReady = this.assignedReady.then(async () => {
      if (removed.length > 0) await listener.onRevoked(removed);
      if (added.length > 0) {
        const start = await this.startOffsets(added);
        await listener.onAssigned(added);
        for (const p of added) if (this.assigned.has(p) && !this.positions.has(p)) this.positions.set(p, start.get(p)!);
      }
      this.wake?.();
    });
    this.assignedReady.catch((err: unknown) => listener.onLost(err));
  }

  /** The committed offset of each partition, the log start where the group has none. */
  private async startOffsets(partitions: number[]): Promise<Map<number, bigint>> {
    const topic = this.o.topic;
    const committed = await this.consumer.listCommittedOffsets({ topics: [{ topic, partitions }] });
    const earliest = await this.consumer.listOffsets({ topics: [topic], partitions: { [topic]: partitions }, timestamp: -2n, isolationLevel: FetchIsolationLevels.READ_COMMITTED });
    return new Map(partitions.map((p) => {
      const c = committed.get(topic)?.[p];
      return [p, c !== undefined && c >= 0n ? c : (earliest.get(topic)?.[p] ?? 0n)];
    }));
  }

  private fetchable(): number[] {
    const budget = (this.o.concurrency ?? 4) - this.out.size;
    if (budget <= 0) return [];
    return [...this.assigned].filter((p) => this.positions.has(p) && !this.out.has(p) && !this.paused.has(p)).slice(0, budget);
  }

  private async run(): Promise<void> {
    let backoff = 0;
    while (!this.stopping) {
      const parts = this.fetchable();
      if (parts.length === 0) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, 100);
          this.wake = () => (clearTimeout(t), resolve());
        });
        this.wake = null;
        continue;
      }
      try {
        await this.fetchOnce(parts);
        backoff = 0;
      } catch (e) {
        if (this.stopping) return;
        backoff = Math.min(5_000, backoff === 0 ? 200 : backoff * 2);
        await new Promise((r) => setTimeout(r, backoff));
      }
    }
  }

  private async fetchOnce(parts: number[]): Promise<void> {
    const topic = this.o.topic;
    const meta = await this.consumer.metadata({ topics: [topic] });
    const t = meta.topics.get(topic)!;
    const epochs = new Map(parts.map((p) => [p, this.epochs.get(p) ?? 0]));
    const froms = new Map(parts.map((p) => [p, this.positions.get(p)!]));
    const byLeader = new Map<number, number[]>();
    for (const p of parts) (byLeader.get(t.partitions[p]!.leader) ?? byLeader.set(t.partitions[p]!.leader, []).get(t.partitions[p]!.leader)!).push(p);
    const perPartition = this.o.maxBytesPerPartition ?? this.o.maxBytes;
    await Promise.all(
      [...byLeader].map(async ([node, ps]) => {
        const res = await this.consumer.fetch({
          node,
          maxWaitTime: 100,
          maxBytes: this.o.maxBytes,
          isolationLevel: FetchIsolationLevels.READ_COMMITTED,
          topics: [{ topicId: t.id, partitions: ps.map((p) => ({ partition: p, fetchOffset: froms.get(p)!, partitionMaxBytes: perPartition, currentLeaderEpoch: -1, lastFetchedEpoch: -1 })) }],
        });
        for (const r of res.responses) {
          for (const pr of r.partitions) {
            const p = pr.partitionIndex;
            // Reassigned, sought or released elsewhere meanwhile: drop what came.
            if (this.stopping || this.epochs.get(p) !== epochs.get(p) || this.positions.get(p) !== froms.get(p) || this.out.has(p)) continue;
            if (pr.errorCode !== 0) continue;
            const { records, next } = decodeBatches(topic, p, (pr.records ?? []) as never, froms.get(p)!);
            if (records.length === 0) {
              // Only control or aborted batches: step over them.
              if (next > froms.get(p)!) this.positions.set(p, next);
              continue;
            }
            const batch: FetchedBatch = { topic, partition: p, records, highWatermark: pr.highWatermark.toString(), lastStable: pr.lastStableOffset.toString() };
            (batch as FetchedBatch & { [HANDLE]?: Held })[HANDLE] = { epoch: epochs.get(p)!, first: BigInt(records[0]!.offset) };
            this.out.set(p, batch);
            this.queue.push(batch);
          }
        }
      }),
    );
    if (this.queue.length > 0) this.waiter?.();
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
    if (this.epochs.get(p) === held.epoch) {
      const seek = this.seeks.get(p);
      this.seeks.delete(p);
      this.positions.set(p, seek ?? (next === null ? held.first : BigInt(next)));
    }
    this.wake?.();
  }

  isCurrent(batch: FetchedBatch): boolean {
    const held = (batch as FetchedBatch & { [HANDLE]?: Held })[HANDLE];
    return held !== undefined && this.assigned.has(batch.partition) && this.epochs.get(batch.partition) === held.epoch;
  }

  seek(partition: number, offset: Offset): void {
    if (this.out.has(partition)) this.seeks.set(partition, BigInt(offset));
    else this.positions.set(partition, BigInt(offset));
    this.wake?.();
  }

  pause(partitions: number[]): void {
    for (const p of partitions) this.paused.add(p);
  }

  resume(partitions: number[]): void {
    for (const p of partitions) this.paused.delete(p);
    this.wake?.();
  }

  assignment(): ReadonlySet<number> {
    return this.assigned;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.waiter?.();
    this.wake?.();
    this.queue.splice(0);
    this.out.clear();
    await this.loop?.catch(() => undefined);
    this.onStop();
    await this.consumer.close(true).catch(() => undefined);
  }
}

/** What a member that takes no partitions puts in its subscription's user data. */
export const GUARD_TEXT = 'guard';

/**
 * A consumer-group member of the in-memory cluster (GroupSource): pulls
 * from its position up to the last stable offset, one batch out per
 * partition until released, at most `concurrency` partitions out at once.
 * The cluster calls `assign` at each generation; the rebalance listener
 * runs in the async context of whoever built the source (as a client's own
 * loop would), so a test tagging a process by AsyncLocalStorage sees the
 * callbacks as that process's.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { RolloutStreamError } from '../../errors/index.js';
import type { FetchedBatch, GroupSource, Offset, RebalanceListener } from '../kafka/types.js';
import type { MemoryCluster } from './memory-cluster.js';
import type { MemoryConnection } from './memory-connection.js';

/** What a member announces when given no protocols (kafkajs's default is its round-robin assigner). */
export const DEFAULT_PROTOCOL = 'rollout-stream.roundrobin/1';

export interface MemorySourceOptions {
  groupId: string;
  topic: string;
  protocols: string[];
  takesPartitions: boolean;
  /** Records per batch. */
  maxRecords: number;
  /** Bytes of values per batch (at least one record). */
  maxBytes: number;
  /** Partitions with a batch out at once. */
  concurrency: number;
}

let memberSeq = 0;

export class MemoryGroupSource implements GroupSource {
  readonly id = `member-${++memberSeq}`;
  readonly groupId: string;
  readonly topic: string;
  private listener: RebalanceListener | null = null;
  private assigned = new Set<number>();
  private readonly positions = new Map<number, bigint>();
  private readonly out = new Map<number, { batch: FetchedBatch; generation: number }>();
  private readonly paused = new Set<number>();
  private readonly seeks = new Map<number, bigint>();
  /** The generation in which each partition was (last) given to this member: a batch fetched before then is someone else's. */
  private readonly assignedAt = new Map<number, number>();
  private pendingListener: Promise<void> = Promise.resolve();
  /** A member of its group now. */
  private joined = false;
  /** Runs a function in the async context this source was built in. */
  private readonly inOwnContext = AsyncLocalStorage.snapshot();

  constructor(
    private readonly cluster: MemoryCluster,
    private readonly conn: MemoryConnection,
    private readonly o: MemorySourceOptions,
  ) {
    this.groupId = o.groupId;
    this.topic = o.topic;
  }

  async start(listener: RebalanceListener): Promise<void> {
    if (this.conn.dead) return this.conn.hang();
    this.listener = listener;
    this.cluster.join(this.groupId, { id: this.id, protocols: this.o.protocols, takesPartitions: this.o.takesPartitions, source: this });
    this.joined = true;
    await this.pendingListener;
  }

  /** Called by the cluster at each generation. */
  assign(generation: number, partitions: number[]): void {
    const now = new Set(partitions);
    const added = partitions.filter((p) => !this.assigned.has(p));
    const removed = [...this.assigned].filter((p) => !now.has(p));
    for (const p of added) this.assignedAt.set(p, generation);
    this.assigned = now;
    for (const p of removed) this.positions.delete(p);
    const l = this.listener;
    if (!l || this.conn.dead) return;
    this.pendingListener = this.pendingListener.then(() =>
      this.inOwnContext(async () => {
        if (removed.length > 0) await l.onRevoked(removed);
        if (added.length > 0) await l.onAssigned(added);
      }),
    );
  }

  private positionOf(p: number): bigint {
    let at = this.positions.get(p);
    if (at === undefined) {
      const committed = this.cluster.group(this.groupId).committed.get(`${this.topic}/${p}`);
      at = committed === undefined ? this.cluster.logStartOffset(this.topic, p) : BigInt(committed);
      this.positions.set(p, at);
    }
    return at;
  }

  /** The batches fetchable now; [] when none is. */
  private fetch(): FetchedBatch[] {
    const batches: FetchedBatch[] = [];
    for (const p of [...this.assigned].sort((a, b) => a - b)) {
      if (this.out.has(p) || this.paused.has(p)) continue;
      if (this.out.size >= this.o.concurrency) break;
      const from = this.positionOf(p);
      const { records, next } = this.cluster.readCommitted(this.topic, p, from, this.o.maxRecords, this.o.maxBytes);
      if (records.length === 0) {
        // Markers and aborted data only: the position moves past them, as a broker fetch does.
        this.positions.set(p, next);
        continue;
      }
      const batch: FetchedBatch = {
        topic: this.topic,
        partition: p,
        records,
        highWatermark: String(this.cluster.highWatermark(this.topic, p)),
        lastStable: String(this.cluster.lastStableOffset(this.topic, p)),
      };
      this.out.set(p, { batch, generation: this.assignedAt.get(p)! });
      batches.push(batch);
    }
    return batches;
  }

  /** Fetchable batches; when there are none, waits up to `maxWaitMs` for the cluster to change and looks once more. */
  async poll(maxWaitMs: number): Promise<FetchedBatch[]> {
    if (this.conn.dead) return this.conn.hang();
    await this.pendingListener;
    const now = this.fetch();
    if (now.length > 0 || maxWaitMs <= 0 || !this.joined) return now;
    await this.cluster.changed(maxWaitMs);
    if (this.conn.dead) return this.conn.hang();
    await this.pendingListener;
    return this.fetch();
  }

  release(batch: FetchedBatch, next: Offset | null): void {
    if (this.conn.dead) return;
    const held = this.out.get(batch.partition);
    if (!held || held.batch !== batch) throw new RolloutStreamError('transaction_state', `release of a batch this source did not hand out (${batch.topic}/${batch.partition})`);
    this.out.delete(batch.partition);
    this.cluster.notify();
    if (held.generation !== this.assignedAt.get(batch.partition) || !this.assigned.has(batch.partition)) return;
    if (!this.positions.has(batch.partition)) return;
    const seeked = this.seeks.get(batch.partition);
    this.seeks.delete(batch.partition);
    this.positions.set(batch.partition, seeked !== undefined ? seeked : next === null ? BigInt(batch.records[0]!.offset) : BigInt(next));
  }

  isCurrent(batch: FetchedBatch): boolean {
    const held = this.out.get(batch.partition);
    return !this.conn.dead && held?.batch === batch && this.assigned.has(batch.partition) && held.generation === this.assignedAt.get(batch.partition);
  }

  seek(partition: number, offset: Offset): void {
    if (this.out.has(partition)) this.seeks.set(partition, BigInt(offset));
    else this.positions.set(partition, BigInt(offset));
    this.cluster.notify();
  }

  pause(partitions: number[]): void {
    for (const p of partitions) this.paused.add(p);
  }

  resume(partitions: number[]): void {
    for (const p of partitions) this.paused.delete(p);
    this.cluster.notify();
  }

  assignment(): ReadonlySet<number> {
    return this.assigned;
  }

  /** The next offset a fetch of `partition` starts at (past released batches and stretches of markers and aborted data); null before its first fetch. */
  fetchPosition(partition: number): Offset | null {
    const at = this.assigned.has(partition) ? this.positions.get(partition) : undefined;
    return at === undefined ? null : at.toString();
  }

  async stop(): Promise<void> {
    if (this.conn.dead) return this.conn.hang();
    this.leave();
  }

  /**
   * Its session timed out: the coordinator removes it (no callback reaches
   * the member, which is gone). `unnoticed`: the member's process was only
   * paused past its session timeout and wakes up not knowing; it keeps its
   * old assignment and fetches those partitions (a fetch needs no
   * membership), a zombie that fencing alone keeps from committing. It hears
   * of no later generation; only leaving (`stop`) ends it.
   */
  expire(o: { unnoticed?: boolean } = {}): void {
    this.listener = null;
    if (!o.unnoticed) return this.leave();
    if (this.joined) this.cluster.leave(this.groupId, this.id);
  }

  /** A crash: the member is gone without leaving (the group notices only when its session expires: `expire`). */
  crash(): void {
    this.listener = null;
  }

  private leave(): void {
    if (!this.joined) return;
    this.joined = false;
    this.assigned = new Set();
    // A zombie (expired unnoticed) is no member any more: nothing to leave.
    if (this.cluster.group(this.groupId).members.some((m) => m.id === this.id)) this.cluster.leave(this.groupId, this.id);
  }
}

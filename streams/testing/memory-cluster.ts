/**
 * An in-memory Kafka for unit tests of the runtime (the topology test
 * driver's cluster; issue 13 item 6): the seams of streams/kafka/types.ts
 * with the semantics the runtime relies on, in milliseconds.
 *
 * - Partitioned logs; offsets as on a broker (a transaction marker takes one).
 * - Transactions per transactional id: records staged in the log but hidden
 *   from read_committed readers until the commit marker; aborted ones stay
 *   hidden; the last stable offset stops readers at the first open
 *   transaction. `init()` bumps the id's epoch, aborts what the previous
 *   epoch left open, and fences it: its next call throws `producer_fenced`.
 * - Consumer groups with committed offsets (applied at commit), members,
 *   generations, round-robin assignment, and the classic protocol rule: a
 *   member whose protocols share none with the group is refused
 *   (`mode_conflict`).
 * - A group source pulls from its position up to the last stable offset,
 *   one batch out per partition until released.
 *
 * Only tests import this (test/unit/layers.test.ts holds that rule).
 */
import { RolloutStreamError } from '../../errors/index.js';
import { partitionForKey } from '../topics/partitioner.js';
import { TransactionStateMachine, type TxState } from '../kafka/transaction-state.js';
import type {
  FetchedBatch,
  FetchedRecord,
  GroupSource,
  IdempotentSink,
  KafkaAdmin,
  Offset,
  OffsetReader,
  OutgoingRecord,
  PartitionOffset,
  PartitionOffsets,
  RebalanceListener,
  RecordPosition,
  TransactionalSink,
} from '../kafka/types.js';

interface LogEntry {
  offset: bigint;
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer>;
  /** The transaction that wrote it (null: non-transactional). */
  txn: Txn | null;
  /** A commit/abort marker: takes an offset, never delivered. */
  control: boolean;
}

interface Txn {
  state: 'open' | 'committed' | 'aborted';
  offsets: Array<{ groupId: string; topic: string; partition: number; offset: Offset }>;
  partitions: Set<string>;
}

interface Member {
  id: string;
  protocols: string[];
  source: MemoryGroupSource;
}

interface Group {
  members: Member[];
  generation: number;
  protocol: string | null;
  committed: Map<string, Offset>;
}

const toBuffer = (v: string | Buffer | null): Buffer | null => (v === null ? null : Buffer.isBuffer(v) ? v : Buffer.from(v));

export class MemoryCluster {
  private readonly topics = new Map<string, LogEntry[][]>();
  private readonly epochs = new Map<string, number>();
  private readonly openTxns = new Map<string, Txn>();
  /** Log start offsets moved by `deleteRecords` (retention), by `topic/partition`. */
  private readonly logStart = new Map<string, bigint>();
  readonly groups = new Map<string, Group>();
  /** Virtual time (ms), advanced by tests. */
  now = 1_700_000_000_000;

  createTopic(topic: string, partitions: number): void {
    if (!this.topics.has(topic)) this.topics.set(topic, Array.from({ length: partitions }, () => []));
  }

  private log(topic: string, partition: number): LogEntry[] {
    const t = this.topics.get(topic);
    if (!t) throw new RolloutStreamError('unknown_topic', `topic ${topic} does not exist`);
    const p = t[partition];
    if (!p) throw new RolloutStreamError('partition_unavailable', `${topic} has no partition ${partition}`);
    return p;
  }

  /** The next offset to be written (markers included), as a broker's high watermark. */
  highWatermark(topic: string, partition: number): bigint {
    return BigInt(this.log(topic, partition).length);
  }

  partitions(topic: string): number {
    const t = this.topics.get(topic);
    if (!t) throw new RolloutStreamError('unknown_topic', `topic ${topic} does not exist`);
    return t.length;
  }

  /** Appends records (placed by partition or murmur2 of the key) and says where they landed. */
  append(records: OutgoingRecord[], txn: Txn | null): RecordPosition[] {
    return records.map((r) => {
      const key = toBuffer(r.key);
      const partition = r.partition ?? (key === null ? 0 : partitionForKey(new Uint8Array(key), this.partitions(r.topic)));
      const log = this.log(r.topic, partition);
      const offset = BigInt(log.length);
      const headers: Record<string, Buffer> = {};
      for (const [k, v] of Object.entries(r.headers ?? {})) headers[k] = toBuffer(v)!;
      log.push({ offset, timestamp: this.now, key, value: r.value, headers, txn, control: false });
      txn?.partitions.add(`${r.topic}/${partition}`);
      return { topic: r.topic, partition, offset: offset.toString() };
    });
  }

  /** Ends a transaction: a marker on each partition it wrote, its group offsets applied when committed. */
  endTxn(txn: Txn, outcome: 'committed' | 'aborted'): void {
    txn.state = outcome;
    for (const tp of txn.partitions) {
      const [topic, p] = [tp.slice(0, tp.lastIndexOf('/')), Number(tp.slice(tp.lastIndexOf('/') + 1))];
      const log = this.log(topic, p);
      log.push({ offset: BigInt(log.length), timestamp: this.now, key: null, value: null, headers: {}, txn, control: true });
    }
    if (outcome === 'committed') for (const o of txn.offsets) this.group(o.groupId).committed.set(`${o.topic}/${o.partition}`, o.offset);
  }

  /** The first offset a read_committed reader may not pass: the start of the earliest open transaction, else the end. */
  lastStableOffset(topic: string, partition: number): bigint {
    const log = this.log(topic, partition);
    const open = log.find((e) => e.txn?.state === 'open');
    return open ? open.offset : BigInt(log.length);
  }

  /** Records a read_committed reader sees in [from, lso), at most `max`. */
  readCommitted(topic: string, partition: number, from: bigint, max: number): { records: FetchedRecord[]; next: bigint } {
    const log = this.log(topic, partition);
    const lso = this.lastStableOffset(topic, partition);
    const records: FetchedRecord[] = [];
    let next = from;
    for (let o = from; o < lso && records.length < max; o++) {
      const e = log[Number(o)]!;
      next = o + 1n;
      if (e.control || e.txn?.state === 'aborted') continue;
      records.push({ topic, partition, offset: e.offset.toString(), timestamp: e.timestamp, key: e.key, value: e.value, headers: e.headers });
    }
    return { records, next };
  }

  /** As retention (or DeleteRecords) does: records below `before` are gone. */
  deleteRecords(topic: string, partition: number, before: bigint): void {
    this.log(topic, partition);
    this.logStart.set(`${topic}/${partition}`, before);
  }

  /** An OffsetReader over this cluster (read_committed, deleted records absent). */
  offsetReader(): OffsetReader & { reads: number } {
    const cluster = this;
    return {
      reads: 0,
      async read(topic, partition, offsets) {
        this.reads++;
        const log = cluster.log(topic, partition);
        const start = cluster.logStart.get(`${topic}/${partition}`) ?? 0n;
        const lso = cluster.lastStableOffset(topic, partition);
        const out = new Map<Offset, FetchedRecord>();
        for (const o of offsets) {
          const at = BigInt(o);
          if (at >= start && at >= lso && at < BigInt(log.length)) {
            // What the Kafka reader throws once its wait for the open transaction ran out (it waits; a test has no time).
            throw new RolloutStreamError('request_timeout', `${topic}[${partition}]@${at} is held back by an open transaction (last stable offset ${lso})`, { retriable: true });
          }
          const e = at >= start && at < lso ? log[Number(at)] : undefined;
          if (!e || e.control || e.txn?.state === 'aborted') continue;
          out.set(o, { topic, partition, offset: o, timestamp: e.timestamp, key: e.key, value: e.value, headers: e.headers });
        }
        return out;
      },
      async close() {},
    };
  }

  /** Every committed record of a topic, in partition-offset order (what a test asserts on). */
  committedRecords(topic: string): FetchedRecord[] {
    return [...Array(this.partitions(topic)).keys()].flatMap((p) => this.readCommitted(topic, p, 0n, Number.MAX_SAFE_INTEGER).records);
  }

  group(groupId: string): Group {
    let g = this.groups.get(groupId);
    if (!g) this.groups.set(groupId, (g = { members: [], generation: 0, protocol: null, committed: new Map() }));
    return g;
  }

  /** Bumps the id's epoch: the previous holder is fenced and its open transaction aborted. */
  initProducer(transactionalId: string): number {
    const epoch = (this.epochs.get(transactionalId) ?? -1) + 1;
    this.epochs.set(transactionalId, epoch);
    const open = this.openTxns.get(transactionalId);
    if (open && open.state === 'open') this.endTxn(open, 'aborted');
    this.openTxns.delete(transactionalId);
    return epoch;
  }

  checkEpoch(transactionalId: string, epoch: number): void {
    if (this.epochs.get(transactionalId) !== epoch) {
      throw new RolloutStreamError('producer_fenced', `transactional id ${transactionalId}: producer epoch ${epoch} was fenced by a newer one`);
    }
  }

  beginTxn(transactionalId: string): Txn {
    const txn: Txn = { state: 'open', offsets: [], partitions: new Set() };
    this.openTxns.set(transactionalId, txn);
    return txn;
  }

  /** Joins `member` to its group (classic protocol rule), rebalancing every member. */
  join(groupId: string, member: Member): void {
    const g = this.group(groupId);
    if (g.members.length > 0) {
      const common = member.protocols.filter((p) => g.members.every((m) => m.protocols.includes(p)));
      if (common.length === 0) {
        throw new RolloutStreamError(
          'mode_conflict',
          `group ${groupId} runs protocol ${g.protocol}; this member announces ${member.protocols.join(', ')} (INCONSISTENT_GROUP_PROTOCOL)`,
        );
      }
    }
    g.members.push(member);
    this.rebalance(groupId);
  }

  leave(groupId: string, memberId: string): void {
    const g = this.group(groupId);
    g.members = g.members.filter((m) => m.id !== memberId);
    this.rebalance(groupId);
  }

  /** A new generation: partitions of the member's topic dealt round robin in join order. */
  rebalance(groupId: string): void {
    const g = this.group(groupId);
    g.generation++;
    g.protocol = g.members[0] ? g.members[0].protocols.find((p) => g.members.every((m) => m.protocols.includes(p))) ?? null : null;
    const byMember = new Map<string, number[]>(g.members.map((m) => [m.id, []]));
    const topic = g.members[0]?.source.topic;
    if (topic !== undefined) for (let p = 0; p < this.partitions(topic); p++) byMember.get(g.members[p % g.members.length]!.id)!.push(p);
    for (const m of g.members) m.source.assign(g.generation, byMember.get(m.id)!);
  }

  source(o: { groupId: string; topic: string; protocols?: string[]; maxRecords?: number }): MemoryGroupSource {
    return new MemoryGroupSource(this, o.groupId, o.topic, o.protocols ?? ['rollout-stream.roundrobin/1'], o.maxRecords ?? 500);
  }

  transactionalSink(transactionalId: string): MemoryTransactionalSink {
    return new MemoryTransactionalSink(this, transactionalId);
  }

  idempotentSink(): IdempotentSink {
    return { send: async (records) => this.append(records, null), close: async () => undefined };
  }

  admin(): KafkaAdmin {
    return new MemoryAdmin(this);
  }

  topicNames(): string[] {
    return [...this.topics.keys()];
  }
}

let memberSeq = 0;

export class MemoryGroupSource implements GroupSource {
  readonly id = `member-${++memberSeq}`;
  private listener: RebalanceListener | null = null;
  private assigned = new Set<number>();
  private readonly positions = new Map<number, bigint>();
  private readonly out = new Map<number, { batch: FetchedBatch; generation: number }>();
  private readonly paused = new Set<number>();
  private readonly seeks = new Map<number, bigint>();
  /** The generation in which each partition was (last) given to this member: a batch fetched before then is someone else's. */
  private readonly assignedAt = new Map<number, number>();
  private pendingListener: Promise<void> = Promise.resolve();
  private started = false;

  constructor(
    private readonly cluster: MemoryCluster,
    readonly groupId: string,
    readonly topic: string,
    private readonly protocols: string[],
    private readonly maxRecords: number,
  ) {}

  async start(listener: RebalanceListener): Promise<void> {
    this.listener = listener;
    this.started = true;
    this.cluster.join(this.groupId, { id: this.id, protocols: this.protocols, source: this });
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
    if (!l) return;
    this.pendingListener = this.pendingListener.then(async () => {
      if (removed.length > 0) await l.onRevoked(removed);
      if (added.length > 0) await l.onAssigned(added);
    });
  }

  private position(p: number): bigint {
    let at = this.positions.get(p);
    if (at === undefined) {
      const committed = this.cluster.group(this.groupId).committed.get(`${this.topic}/${p}`);
      at = committed === undefined ? 0n : BigInt(committed);
      this.positions.set(p, at);
    }
    return at;
  }

  async poll(_maxWaitMs: number): Promise<FetchedBatch[]> {
    await this.pendingListener;
    const batches: FetchedBatch[] = [];
    for (const p of [...this.assigned].sort((a, b) => a - b)) {
      if (this.out.has(p) || this.paused.has(p)) continue;
      const from = this.position(p);
      const { records, next } = this.cluster.readCommitted(this.topic, p, from, this.maxRecords);
      if (records.length === 0) {
        // Markers and aborted data only: the position moves past them, as a broker fetch does.
        this.positions.set(p, next);
        continue;
      }
      const batch: FetchedBatch = { topic: this.topic, partition: p, records, highWatermark: String(this.cluster.lastStableOffset(this.topic, p)) };
      this.out.set(p, { batch, generation: this.assignedAt.get(p)! });
      batches.push(batch);
    }
    return batches;
  }

  release(batch: FetchedBatch, next: Offset | null): void {
    const held = this.out.get(batch.partition);
    if (!held || held.batch !== batch) throw new RolloutStreamError('transaction_state', `release of a batch this source did not hand out (${batch.topic}/${batch.partition})`);
    this.out.delete(batch.partition);
    if (held.generation !== this.assignedAt.get(batch.partition) || !this.assigned.has(batch.partition)) return;
    if (!this.positions.has(batch.partition)) return;
    const seeked = this.seeks.get(batch.partition);
    this.seeks.delete(batch.partition);
    this.positions.set(batch.partition, seeked !== undefined ? seeked : next === null ? BigInt(batch.records[0]!.offset) : BigInt(next));
  }

  isCurrent(batch: FetchedBatch): boolean {
    const held = this.out.get(batch.partition);
    return held?.batch === batch && this.assigned.has(batch.partition) && held.generation === this.assignedAt.get(batch.partition);
  }

  seek(partition: number, offset: Offset): void {
    if (this.out.has(partition)) this.seeks.set(partition, BigInt(offset));
    else this.positions.set(partition, BigInt(offset));
  }

  pause(partitions: number[]): void {
    for (const p of partitions) this.paused.add(p);
  }

  resume(partitions: number[]): void {
    for (const p of partitions) this.paused.delete(p);
  }

  assignment(): ReadonlySet<number> {
    return this.assigned;
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    this.cluster.leave(this.groupId, this.id);
  }

  /** A crash: the member is gone without leaving (the group notices only when a test says its session expired). */
  crash(): void {
    this.started = false;
    this.listener = null;
  }
}

export class MemoryTransactionalSink implements TransactionalSink {
  private readonly machine: TransactionStateMachine;
  private epoch = -1;
  private txn: ReturnType<MemoryCluster['beginTxn']> | null = null;

  constructor(
    private readonly cluster: MemoryCluster,
    readonly transactionalId: string,
  ) {
    this.machine = new TransactionStateMachine(transactionalId);
  }

  get state(): TxState {
    return this.machine.state;
  }

  private fencedCheck(nextOnFence: TxState = 'fenced'): void {
    try {
      this.cluster.checkEpoch(this.transactionalId, this.epoch);
    } catch (e) {
      this.machine.to(nextOnFence);
      throw e;
    }
  }

  async init(): Promise<void> {
    this.machine.guard('init');
    this.machine.to('initializing');
    this.epoch = this.cluster.initProducer(this.transactionalId);
    this.machine.to('ready');
  }

  async begin(): Promise<void> {
    this.machine.guard('begin');
    this.fencedCheck();
    this.txn = this.cluster.beginTxn(this.transactionalId);
    this.machine.to('in_transaction');
  }

  async send(records: OutgoingRecord[]): Promise<RecordPosition[]> {
    this.machine.guard('send');
    this.fencedCheck();
    return this.cluster.append(records, this.txn);
  }

  async sendOffsets(groupId: string, offsets: PartitionOffset[]): Promise<void> {
    this.machine.guard('sendOffsets');
    this.fencedCheck();
    for (const o of offsets) this.txn!.offsets.push({ groupId, ...o });
  }

  async commit(): Promise<void> {
    this.machine.guard('commit');
    this.machine.to('committing');
    this.fencedCheck();
    this.cluster.endTxn(this.txn!, 'committed');
    this.txn = null;
    this.machine.to('ready');
  }

  async abort(): Promise<void> {
    this.machine.guard('abort');
    this.machine.to('aborting');
    this.fencedCheck();
    if (this.txn?.state === 'open') this.cluster.endTxn(this.txn, 'aborted');
    this.txn = null;
    this.machine.to('ready');
  }

  async close(): Promise<void> {
    this.machine.to('closed');
  }
}

class MemoryAdmin implements KafkaAdmin {
  constructor(private readonly cluster: MemoryCluster) {}

  async partitionCount(topic: string): Promise<number> {
    return this.cluster.partitions(topic);
  }

  async listTopics(): Promise<string[]> {
    return this.cluster.topicNames();
  }

  async topicOffsets(topic: string): Promise<PartitionOffsets[]> {
    return [...Array(this.cluster.partitions(topic)).keys()].map((p) => ({ partition: p, low: '0', high: String(this.cluster.highWatermark(topic, p)) }));
  }

  async offsetsForTime(topic: string, timeMs: number): Promise<Map<number, Offset>> {
    const out = new Map<number, Offset>();
    for (let p = 0; p < this.cluster.partitions(topic); p++) {
      const first = this.cluster.readCommitted(topic, p, 0n, Number.MAX_SAFE_INTEGER).records.find((r) => r.timestamp >= timeMs);
      out.set(p, first ? first.offset : String(this.cluster.highWatermark(topic, p)));
    }
    return out;
  }

  async committedOffsets(groupId: string, topic: string): Promise<Map<number, Offset>> {
    const out = new Map<number, Offset>();
    for (const [tp, off] of this.cluster.group(groupId).committed) {
      const at = tp.lastIndexOf('/');
      if (tp.slice(0, at) === topic) out.set(Number(tp.slice(at + 1)), off);
    }
    return out;
  }

  async brokerCount(): Promise<number> {
    return 1;
  }

  async describeGroup(groupId: string): Promise<{ state: string; protocol: string; members: number }> {
    const g = this.cluster.groups.get(groupId);
    if (!g || g.members.length === 0) return { state: g ? 'Empty' : 'Dead', protocol: '', members: 0 };
    return { state: 'Stable', protocol: g.protocol ?? '', members: g.members.length };
  }

  async close(): Promise<void> {}
}

/**
 * An in-memory Kafka for unit tests of the runtime (the topology test
 * driver's cluster; issue 13 item 6): a `KafkaClient` (streams/kafka/types.ts)
 * with the semantics the runtime relies on, in milliseconds.
 *
 * - Partitioned logs; offsets as on a broker (a transaction marker takes one).
 * - Transactions per transactional id: records staged in the log but hidden
 *   from read_committed readers until the commit marker; aborted ones stay
 *   hidden; the last stable offset stops readers at the first open
 *   transaction. `init()` bumps the id's epoch, aborts what the previous
 *   epoch left open, and fences it: its next call throws `producer_fenced`.
 * - Consumer groups with committed offsets (applied at commit), members,
 *   generations, round-robin assignment over the members that take
 *   partitions (`MemberProtocols.takesPartitions: false` is a guard member),
 *   and the classic protocol rule: a member whose protocols share none with
 *   the group is refused (`mode_conflict`).
 * - A group source pulls from its position up to the last stable offset,
 *   one batch out per partition until released; a poll with nothing to
 *   fetch waits (up to its `maxWaitMs`) for the cluster to change.
 * - Topic configs (`createTopic`'s, `setTopicConfig`): a send with a
 *   partition's batch over the topic's `max.message.bytes` is refused whole
 *   (`record_limit_changed`, as the adapters code the broker's
 *   MESSAGE_TOO_LARGE), batch bytes estimated as the chunk writer does.
 *   `describeConfigsDenied` makes describeConfigs fail as for a user without
 *   the ACL.
 * - Connections (`connect`): what one process holds. `kill` stops it dead
 *   (every later call of anything it was handed never answers: no abort, no
 *   leave); `expireSessions` removes its group members as a session timeout
 *   would (memory-connection.ts).
 *
 * Only tests and the topology test driver use this.
 */
import { RolloutStreamError } from '../../errors/index.js';
import { partitionForKey } from '../topics/partitioner.js';
import { BATCH_HEADER_BYTES, recordBytes } from '../chunks/chunk-writer.js';
import type {
  FetchedRecord,
  GroupSourceOptions,
  IdempotentSink,
  KafkaAdmin,
  KafkaClient,
  OffsetReader,
  OutgoingRecord,
  PartitionRange,
  RecordPosition,
  ScanCallback,
  ScanOptions,
  ScanResult,
  TransactionalSink,
  TransactionalSinkOptions,
} from '../kafka/types.js';
import { MemoryConnection } from './memory-connection.js';
import { MemoryGroupSource, DEFAULT_PROTOCOL } from './memory-group-source.js';
import { MemoryTransactionalSink } from './memory-sinks.js';

export { MemoryConnection } from './memory-connection.js';
export { MemoryGroupSource } from './memory-group-source.js';
export { MemoryTransactionalSink } from './memory-sinks.js';

export interface LogEntry {
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

export interface Txn {
  transactionalId: string;
  state: 'open' | 'committed' | 'aborted';
  offsets: Array<{ groupId: string; topic: string; partition: number; offset: string }>;
  partitions: Set<string>;
}

export interface Member {
  id: string;
  protocols: string[];
  /** False: a guard member (holds its place, takes no partition). */
  takesPartitions: boolean;
  source: MemoryGroupSource;
}

export interface Group {
  members: Member[];
  generation: number;
  protocol: string | null;
  committed: Map<string, string>;
}

/** The broker's own copy of a key, value or header: the producer may reuse its buffers once the send settled (pack's value pool does). */
const toBuffer = (v: string | Buffer | null): Buffer | null => (v === null ? null : Buffer.from(v));

export class MemoryCluster implements KafkaClient {
  private readonly topics = new Map<string, LogEntry[][]>();
  private readonly configs = new Map<string, Record<string, string>>();
  /** True: describeConfigs fails with `authorization_failed` (a user without DescribeConfigs). */
  describeConfigsDenied = false;
  private readonly epochs = new Map<string, number>();
  private readonly openTxns = new Map<string, Txn>();
  /** Log start offsets moved by `deleteRecords` (retention), by `topic/partition`. */
  private readonly logStart = new Map<string, bigint>();
  private readonly waiters = new Set<() => void>();
  /** What `KafkaClient` calls on the cluster itself go through: a connection nobody kills. */
  private readonly direct: MemoryConnection;
  readonly groups = new Map<string, Group>();
  /** Every InitProducerId so far, in order: which connection fenced whom (a test asks who took a partition back). */
  readonly inits: Array<{ transactionalId: string; by: string }> = [];
  /** Virtual time (ms) of record timestamps, advanced by tests. */
  now = 1_700_000_000_000;
  /** Bumped by every change a reader could see (appends, transaction ends, group changes). */
  version = 0;

  constructor() {
    this.direct = new MemoryConnection(this, 'direct');
  }

  /** A new connection: what one process holds (memory-connection.ts). */
  connect(name: string): MemoryConnection {
    return new MemoryConnection(this, name);
  }

  /** Creates `topic` unless it exists, with `configs` (name → value, as `topics create` sets them). */
  createTopic(topic: string, partitions: number, configs: Record<string, string> | Array<{ name: string; value: string }> = {}): void {
    if (this.topics.has(topic)) return;
    this.topics.set(topic, Array.from({ length: partitions }, () => []));
    this.configs.set(topic, Array.isArray(configs) ? Object.fromEntries(configs.map((c) => [c.name, c.value])) : { ...configs });
  }

  /** Changes one config of `topic` (what `kafka-configs --alter` does). */
  setTopicConfig(topic: string, name: string, value: string): void {
    this.log(topic, 0);
    this.configs.get(topic)![name] = value;
  }

  /** The topic's configs (those set; the cluster has no broker defaults). */
  topicConfig(topic: string): Record<string, string> {
    this.log(topic, 0);
    return { ...this.configs.get(topic) };
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

  /** The first offset still held (moved by `deleteRecords`). */
  logStartOffset(topic: string, partition: number): bigint {
    this.log(topic, partition);
    return this.logStart.get(`${topic}/${partition}`) ?? 0n;
  }

  partitions(topic: string): number {
    const t = this.topics.get(topic);
    if (!t) throw new RolloutStreamError('unknown_topic', `topic ${topic} does not exist`);
    return t.length;
  }

  topicNames(): string[] {
    return [...this.topics.keys()];
  }

  /** Wakes every reader waiting for a change. */
  notify(): void {
    this.version++;
    const ws = [...this.waiters];
    this.waiters.clear();
    for (const w of ws) w();
  }

  /** Resolves at the next change, or after `ms`. */
  changed(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
    });
  }

  /** Appends records (placed by partition or murmur2 of the key) and says where they landed. */
  append(records: OutgoingRecord[], txn: Txn | null): RecordPosition[] {
    const partitionOf = (r: OutgoingRecord) => r.partition ?? (r.key === null ? 0 : partitionForKey(typeof r.key === 'string' ? r.key : new Uint8Array(r.key), this.partitions(r.topic)));
    const batches = new Map<string, { topic: string; bytes: number }>();
    for (const r of records) {
      const tp = `${r.topic}/${partitionOf(r)}`;
      const b = batches.get(tp) ?? batches.set(tp, { topic: r.topic, bytes: BATCH_HEADER_BYTES }).get(tp)!;
      b.bytes += recordBytes(r);
    }
    for (const [tp, b] of batches) {
      const limit = Number(this.configs.get(b.topic)?.['max.message.bytes'] ?? Infinity);
      if (b.bytes > limit) {
        throw new RolloutStreamError('record_limit_changed', `the batch for ${tp} is ${b.bytes} bytes, over the topic's max.message.bytes of ${limit} (MESSAGE_TOO_LARGE)`);
      }
    }
    const positions = records.map((r) => {
      const key = toBuffer(r.key);
      const partition = partitionOf(r);
      const log = this.log(r.topic, partition);
      const offset = BigInt(log.length);
      const headers: Record<string, Buffer> = {};
      for (const [k, v] of Object.entries(r.headers ?? {})) headers[k] = toBuffer(v)!;
      log.push({ offset, timestamp: this.now, key, value: toBuffer(r.value), headers, txn, control: false });
      txn?.partitions.add(`${r.topic}/${partition}`);
      return { topic: r.topic, partition, offset: offset.toString() };
    });
    this.notify();
    return positions;
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
    if (this.openTxns.get(txn.transactionalId) === txn) this.openTxns.delete(txn.transactionalId);
    this.notify();
  }

  /** The first offset a read_committed reader may not pass: the start of the earliest open transaction, else the end. */
  lastStableOffset(topic: string, partition: number): bigint {
    const log = this.log(topic, partition);
    const open = log.find((e) => e.txn?.state === 'open');
    return open ? open.offset : BigInt(log.length);
  }

  /** Records a read_committed reader sees in [from, lso), at most `max` (and `maxBytes` of values, at least one record). */
  readCommitted(topic: string, partition: number, from: bigint, max: number, maxBytes = Infinity): { records: FetchedRecord[]; next: bigint } {
    return this.readBetween(topic, partition, from, this.lastStableOffset(topic, partition), max, maxBytes);
  }

  /** As `readCommitted`, stopping at `until` too (never past the last stable offset). */
  readBetween(topic: string, partition: number, from: bigint, until: bigint, max = Infinity, maxBytes = Infinity): { records: FetchedRecord[]; next: bigint } {
    const log = this.log(topic, partition);
    const lso = this.lastStableOffset(topic, partition);
    const end = until < lso ? until : lso;
    const records: FetchedRecord[] = [];
    let bytes = 0;
    let next = from;
    for (let o = from; o < end && records.length < max; o++) {
      const e = log[Number(o)]!;
      if (!e.control && e.txn?.state !== 'aborted') {
        const size = e.value?.length ?? 0;
        if (records.length > 0 && bytes + size > maxBytes) break;
        bytes += size;
        records.push({ topic, partition, offset: e.offset.toString(), timestamp: e.timestamp, key: e.key, value: e.value, headers: e.headers });
      }
      next = o + 1n;
    }
    return { records, next };
  }

  /** As retention (or DeleteRecords) does: records below `before` are gone. */
  deleteRecords(topic: string, partition: number, before: bigint): void {
    this.log(topic, partition);
    this.logStart.set(`${topic}/${partition}`, before);
    this.notify();
  }

  /** An OffsetReader over this cluster (read_committed, deleted records absent). */
  offsetReader(): OffsetReader & { reads: number } {
    return this.direct.offsetReader();
  }

  /** Every committed record of a topic, in partition-offset order (what a test asserts on). */
  committedRecords(topic: string): FetchedRecord[] {
    return [...Array(this.partitions(topic)).keys()].flatMap((p) => this.readCommitted(topic, p, 0n, Number.MAX_SAFE_INTEGER).records);
  }

  /** Data records of `topic` (every topic when absent) written by transactions that aborted. */
  abortedRecords(topic?: string): number {
    let n = 0;
    for (const [name, parts] of this.topics) {
      if (topic !== undefined && name !== topic) continue;
      for (const log of parts) for (const e of log) if (!e.control && e.txn?.state === 'aborted') n++;
    }
    return n;
  }

  /** Transactional ids with a transaction open now. */
  openTransactions(): string[] {
    return [...this.openTxns.entries()].filter(([, t]) => t.state === 'open').map(([id]) => id);
  }

  group(groupId: string): Group {
    let g = this.groups.get(groupId);
    if (!g) this.groups.set(groupId, (g = { members: [], generation: 0, protocol: null, committed: new Map() }));
    return g;
  }

  /** Bumps the id's epoch: the previous holder is fenced and its open transaction aborted. `by` names the connection, for `inits`. */
  initProducer(transactionalId: string, by = 'direct'): number {
    this.inits.push({ transactionalId, by });
    const epoch = (this.epochs.get(transactionalId) ?? -1) + 1;
    this.epochs.set(transactionalId, epoch);
    const open = this.openTxns.get(transactionalId);
    if (open && open.state === 'open') this.endTxn(open, 'aborted');
    this.openTxns.delete(transactionalId);
    return epoch;
  }

  isCurrentEpoch(transactionalId: string, epoch: number): boolean {
    return this.epochs.get(transactionalId) === epoch;
  }

  checkEpoch(transactionalId: string, epoch: number): void {
    if (!this.isCurrentEpoch(transactionalId, epoch)) {
      throw new RolloutStreamError('producer_fenced', `transactional id ${transactionalId}: producer epoch ${epoch} was fenced by a newer one`);
    }
  }

  beginTxn(transactionalId: string): Txn {
    const txn: Txn = { transactionalId, state: 'open', offsets: [], partitions: new Set() };
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

  /**
   * A new generation: the partitions of the group's topic dealt round robin,
   * in join order, over the members that take partitions (a guard gets none).
   * `rotate`: the first member goes last first, so that partitions move (what
   * a rebalance after a member's restart may do).
   */
  rebalance(groupId: string, rotate = false): void {
    const g = this.group(groupId);
    if (rotate && g.members.length > 1) g.members.push(g.members.shift()!);
    g.generation++;
    g.protocol = g.members[0] ? (g.members[0].protocols.find((p) => g.members.every((m) => m.protocols.includes(p))) ?? null) : null;
    const takers = g.members.filter((m) => m.takesPartitions);
    const byMember = new Map<string, number[]>(g.members.map((m) => [m.id, []]));
    const topic = g.members[0]?.source.topic;
    if (topic !== undefined && takers.length > 0) for (let p = 0; p < this.partitions(topic); p++) byMember.get(takers[p % takers.length]!.id)!.push(p);
    for (const m of g.members) m.source.assign(g.generation, byMember.get(m.id)!);
    this.notify();
  }

  /** A member of the legacy shape (protocol names as a list, a record limit per fetch), on the direct connection. */
  source(o: { groupId: string; topic: string; protocols?: string[]; maxRecords?: number }): MemoryGroupSource {
    return new MemoryGroupSource(this, this.direct, {
      groupId: o.groupId,
      topic: o.topic,
      protocols: o.protocols ?? [DEFAULT_PROTOCOL],
      takesPartitions: true,
      maxRecords: o.maxRecords ?? 500,
      maxBytes: Infinity,
      concurrency: Infinity,
    });
  }

  idempotentSink(): IdempotentSink {
    return { send: async (records) => this.append(records, null), close: async () => undefined };
  }

  // KafkaClient, on a connection nobody kills.

  groupSource(o: GroupSourceOptions): MemoryGroupSource {
    return this.direct.groupSource(o);
  }

  transactionalSink(transactionalId: string, o?: TransactionalSinkOptions): MemoryTransactionalSink & TransactionalSink {
    return this.direct.transactionalSink(transactionalId, o);
  }

  admin(): Promise<KafkaAdmin> {
    return this.direct.admin();
  }

  scan(ranges: PartitionRange[], onRecord: ScanCallback, options?: ScanOptions): Promise<ScanResult> {
    return this.direct.scan(ranges, onRecord, options);
  }

  async close(): Promise<void> {}
}

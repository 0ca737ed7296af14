/**
 * What one process holds of the in-memory cluster: a `KafkaClient` whose
 * sources, sinks, admins, scans and readers share one fate. `kill()` is the
 * process stopping dead (SIGKILL): from then on every call of anything it
 * handed out never answers, so nothing more of it reaches the cluster — no
 * abort, no commit, no leave. Its group members stay until
 * `expireSessions()`, as a broker keeps a crashed member until its session
 * times out.
 */
import { RolloutStreamError } from '../../errors/index.js';
import type {
  FetchedRecord,
  GroupSourceOptions,
  KafkaAdmin,
  KafkaClient,
  Offset,
  OffsetReader,
  PartitionOffsets,
  PartitionRange,
  ScanCallback,
  ScanOptions,
  ScanResult,
  TransactionalSink,
  TransactionalSinkOptions,
} from '../kafka/types.js';
import type { MemoryCluster } from './memory-cluster.js';
import { DEFAULT_PROTOCOL, MemoryGroupSource } from './memory-group-source.js';
import { MemoryTransactionalSink } from './memory-sinks.js';

/** Records per fetch of a group source (a broker's fetch is bounded by bytes; this keeps batches realistic). */
const MAX_RECORDS_PER_FETCH = 500;

export class MemoryConnection implements KafkaClient {
  private killed = false;
  private readonly sources = new Set<MemoryGroupSource>();
  /** Transactions its sinks committed (a test asks who did the work). */
  commits = 0;

  constructor(
    readonly cluster: MemoryCluster,
    readonly name: string,
  ) {}

  get dead(): boolean {
    return this.killed;
  }

  /** The answer to a call of a dead process: none, ever. */
  hang<T>(): Promise<T> {
    return new Promise<T>(() => undefined);
  }

  /** The process stops dead here (see the file comment). */
  kill(): void {
    this.killed = true;
  }

  /** Its members leave their groups, as the coordinator does when their sessions time out (`unnoticed`: a paused process's, MemoryGroupSource.expire). */
  expireSessions(o: { unnoticed?: boolean } = {}): void {
    for (const s of this.sources) s.expire(o);
  }

  groupSource(o: GroupSourceOptions): MemoryGroupSource {
    const s = new MemoryGroupSource(this.cluster, this, {
      groupId: o.groupId,
      topic: o.topic,
      protocols: o.protocols?.names ?? [DEFAULT_PROTOCOL],
      takesPartitions: o.protocols?.takesPartitions !== false,
      maxRecords: MAX_RECORDS_PER_FETCH,
      maxBytes: o.maxBytesPerPartition ?? o.maxBytes,
      concurrency: o.concurrency ?? 4,
    });
    this.sources.add(s);
    return s;
  }

  transactionalSink(transactionalId: string, _o?: TransactionalSinkOptions): MemoryTransactionalSink & TransactionalSink {
    return new MemoryTransactionalSink(this.cluster, transactionalId, this);
  }

  async admin(): Promise<KafkaAdmin> {
    if (this.killed) return this.hang();
    return new MemoryAdmin(this.cluster, this);
  }

  /**
   * Reads each range read_committed to its end, in offset order per
   * partition. A range held back by an open transaction waits for the
   * cluster to change; with no progress for `idleTimeoutMs` (default 30 s)
   * the scan ends incomplete, naming the unfinished partitions.
   */
  async scan(ranges: PartitionRange[], onRecord: ScanCallback, options: ScanOptions = {}): Promise<ScanResult> {
    if (this.killed) return this.hang();
    const c = this.cluster;
    const result: ScanResult = { records: 0, complete: true, unfinished: [] };
    const active = ranges
      .map((r) => {
        const start = BigInt(r.start);
        const low = c.logStartOffset(r.topic, r.partition);
        return { r, next: start < low ? low : start, end: BigInt(r.end) };
      })
      .filter((a) => a.next < a.end);
    const idleMs = options.idleTimeoutMs ?? 30_000;
    let lastProgress = Date.now();
    while (active.length > 0) {
      let progressed = false;
      for (const a of [...active]) {
        const { records, next } = c.readBetween(a.r.topic, a.r.partition, a.next, a.end);
        if (next > a.next) progressed = true;
        for (const rec of records) {
          const more = await onRecord({ ...rec, timestamp: String(rec.timestamp) });
          if (this.killed) return this.hang();
          result.records++;
          a.next = BigInt(rec.offset) + 1n;
          if (more === false) return { ...result, complete: false };
        }
        a.next = next;
        if (records.length > 0) options.onProgress?.(result.records);
        if (a.next >= a.end) active.splice(active.indexOf(a), 1);
      }
      if (active.length === 0) break;
      if (progressed) lastProgress = Date.now();
      const left = idleMs - (Date.now() - lastProgress);
      if (left <= 0) return { ...result, complete: false, unfinished: active.map((a) => `${a.r.topic}/${a.r.partition}`) };
      await c.changed(Math.min(left, 50));
      if (this.killed) return this.hang();
    }
    return result;
  }

  /** An OffsetReader (read_committed, deleted records absent), dead with this connection. */
  offsetReader(): OffsetReader & { reads: number } {
    const conn = this;
    const c = this.cluster;
    return {
      reads: 0,
      async read(topic, partition, offsets) {
        if (conn.killed) return conn.hang();
        this.reads++;
        const start = c.logStartOffset(topic, partition);
        const lso = c.lastStableOffset(topic, partition);
        const end = c.highWatermark(topic, partition);
        const out = new Map<Offset, FetchedRecord>();
        for (const o of offsets) {
          const at = BigInt(o);
          if (at >= start && at >= lso && at < end) {
            // What the Kafka reader throws once its wait for the open transaction ran out (it waits; a test has no time).
            throw new RolloutStreamError('request_timeout', `${topic}[${partition}]@${at} is held back by an open transaction (last stable offset ${lso})`, { retriable: true });
          }
          if (at < start || at >= lso) continue;
          const r = c.readBetween(topic, partition, at, at + 1n).records[0];
          if (r) out.set(o, r);
        }
        return out;
      },
      async close() {},
    };
  }

  async close(): Promise<void> {}
}

class MemoryAdmin implements KafkaAdmin {
  constructor(
    private readonly cluster: MemoryCluster,
    private readonly conn: MemoryConnection,
  ) {}

  /** Runs `fn` unless the process is dead (then never answers). */
  private async live<T>(fn: () => T): Promise<T> {
    if (this.conn.dead) return this.conn.hang();
    return fn();
  }

  partitionCount(topic: string): Promise<number> {
    return this.live(() => this.cluster.partitions(topic));
  }

  listTopics(): Promise<string[]> {
    return this.live(() => this.cluster.topicNames());
  }

  topicOffsets(topic: string): Promise<PartitionOffsets[]> {
    return this.live(() =>
      [...Array(this.cluster.partitions(topic)).keys()].map((p) => ({
        partition: p,
        low: String(this.cluster.logStartOffset(topic, p)),
        high: String(this.cluster.highWatermark(topic, p)),
      })),
    );
  }

  offsetsForTime(topic: string, timeMs: number): Promise<Map<number, Offset>> {
    return this.live(() => {
      const out = new Map<number, Offset>();
      for (let p = 0; p < this.cluster.partitions(topic); p++) {
        const first = this.cluster.readCommitted(topic, p, 0n, Number.MAX_SAFE_INTEGER).records.find((r) => r.timestamp >= timeMs);
        out.set(p, first ? first.offset : String(this.cluster.highWatermark(topic, p)));
      }
      return out;
    });
  }

  committedOffsets(groupId: string, topic: string): Promise<Map<number, Offset>> {
    return this.live(() => {
      const out = new Map<number, Offset>();
      for (const [tp, off] of this.cluster.group(groupId).committed) {
        const at = tp.lastIndexOf('/');
        if (tp.slice(0, at) === topic) out.set(Number(tp.slice(at + 1)), off);
      }
      return out;
    });
  }

  brokerCount(): Promise<number> {
    return this.live(() => 1);
  }

  describeGroup(groupId: string): Promise<{ state: string; protocol: string; members: number }> {
    return this.live(() => {
      const g = this.cluster.groups.get(groupId);
      if (!g || g.members.length === 0) return { state: g ? 'Empty' : 'Dead', protocol: '', members: 0 };
      return { state: 'Stable', protocol: g.protocol ?? '', members: g.members.length };
    });
  }

  topicConfigs(topics: readonly string[], names: readonly string[]): Promise<Map<string, Record<string, string>>> {
    return this.live(() => {
      if (this.cluster.describeConfigsDenied) throw new RolloutStreamError('authorization_failed', `describing the configs of ${topics.join(', ')}: Topic authorization failed (TOPIC_AUTHORIZATION_FAILED)`);
      return new Map(topics.map((t) => [t, Object.fromEntries(Object.entries(this.cluster.topicConfig(t)).filter(([k]) => names.includes(k)))]));
    });
  }

  async close(): Promise<void> {}
}

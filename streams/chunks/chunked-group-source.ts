/**
 * A GroupSource that hands on whole records only (docs/design-chunked-records.md
 * §3 "Every read path"): a decorator over any client's source, one
 * Reassembler per partition. An inner batch that completes nothing goes back
 * to the inner source at once (fetching continues, the partial set stays
 * here); one that completes something becomes an outer batch of whole
 * records, each at its first chunk's offset with its resume offset `next`,
 * and the inner batch is held until the outer one comes back. The state of a
 * partition is dropped on revoke, seek, and any release that does not end at
 * the outer batch's last `next`; reading then starts again at a trusted
 * start (that `next`, a seek target, or the group's committed offset), where
 * chunks of sets handed on before are skipped.
 */
import type { FetchedBatch, FetchedRecord, GroupSource, KafkaAdmin, Offset, RebalanceListener } from '../kafka/types.js';
import type { Logger } from '../runtime/logger.js';
import { Reassembler, type Reassembled } from './reassembler.js';
import { RolloutStreamError } from '../../errors/index.js';

/** How often a partition waiting for the rest of a set says so. */
const WAIT_LOG_MS = 15_000;
/** Longest an admin request of the source may take before the poll fails (retriably) and a fresh admin client is used. */
const ADMIN_TIMEOUT_MS = 15_000;

export interface ChunkReaderOptions {
  /** `runtime.max_inflight_bytes`: a partition's open sets and held records. */
  maxHeldBytes: number;
  /** `kafka.chunk_wait_ms`: a set with no chunk for this long and nothing left to fetch can never complete. */
  chunkWaitMs: number;
  /** `kafka.max_value_bytes` (the format's 4 GiB default when absent). */
  maxValueBytes?: number;
}

export interface ChunkedGroupSourceOptions extends ChunkReaderOptions {
  groupId: string;
  topic: string;
  /** The client's admin (committed offsets for the start of a partition, the log start for a headless set); connected on first use. */
  admin: () => Promise<Pick<KafkaAdmin, 'committedOffsets' | 'topicOffsets' | 'close'>>;
  log?: Logger;
  /** Clock (ms), for the `timeout` rule. */
  now?: () => number;
}

interface PartitionState {
  /** Bumped whenever the state is dropped: an outer batch of an earlier epoch is stale. */
  epoch: number;
  reassembler: Reassembler | null;
  /** Where reading restarts and whether it is trusted; null: ask the group's committed offset. */
  restart: { offset: Offset; trusted: boolean } | null;
  /** The start of the current reassembler, then the last `next` released. */
  position: Offset | null;
  /** Whether `position` is a trusted start (a committed boundary, or a trusted restart). */
  positionTrusted: boolean;
  /** Inner batches fetched while an outer batch of the partition is out. */
  deferred: FetchedBatch[];
  /** From the last inner batch, for the `timeout` rule. */
  fetchedTo: Offset | null;
  highWatermark: Offset | null;
  lastStable: Offset | null;
  waitLoggedAt: number;
}

interface Outer {
  /** The inner batch it came from; null for faults the `timeout` rule made between fetches. */
  inner: FetchedBatch | null;
  epoch: number;
}

/** A reassembler hand-out as the runtime sees it: a FetchedRecord with `next` and `chunk`. */
export function toFetchedRecord(r: Reassembled): FetchedRecord {
  const base = { topic: r.topic, partition: r.partition, offset: r.offset, timestamp: r.timestamp, key: r.key, headers: r.headers, next: r.next };
  switch (r.kind) {
    case 'record':
      return r.chunks > 1 ? { ...base, value: r.value, chunk: { kind: 'record', lastOffset: r.lastOffset, chunks: r.chunks } } : { ...base, value: r.value };
    case 'incomplete':
      return { ...base, value: null, chunk: { ...r.incomplete, kind: 'incomplete', lastOffset: r.lastOffset } };
    case 'undecodable':
      return { ...base, value: r.value, chunk: { kind: 'undecodable', lastOffset: r.lastOffset, message: r.error.message } };
    case 'skipped':
      return { ...base, value: null, chunk: { kind: 'skipped', lastOffset: r.lastOffset, chunks: r.chunks } };
  }
}

export class ChunkedGroupSource implements GroupSource {
  private readonly states = new Map<number, PartitionState>();
  private readonly outs = new Map<FetchedBatch, Outer>();
  private adminP: ReturnType<ChunkedGroupSourceOptions['admin']> | null = null;
  private readonly now: () => number;

  constructor(
    private readonly inner: GroupSource,
    private readonly o: ChunkedGroupSourceOptions,
  ) {
    this.now = o.now ?? Date.now;
  }

  start(listener: RebalanceListener): Promise<void> {
    return this.inner.start({
      onAssigned: async (ps) => {
        for (const p of ps) this.drop(p, null);
        await listener.onAssigned(ps);
      },
      onRevoked: async (ps) => {
        for (const p of ps) this.drop(p, null);
        await listener.onRevoked(ps);
      },
      onLost: (e) => {
        for (const p of [...this.states.keys()]) this.drop(p, null);
        listener.onLost(e);
      },
      ...(listener.onRejoining
        ? {
            onRejoining: (e: unknown) => {
              for (const p of [...this.states.keys()]) this.drop(p, null);
              listener.onRejoining!(e);
            },
          }
        : {}),
    });
  }

  /**
   * One poll of the inner source (so it waits as the inner one does); what
   * completes nothing is handed back to it at once, and the caller's next
   * poll fetches on.
   */
  async poll(maxWaitMs: number): Promise<FetchedBatch[]> {
    const out: FetchedBatch[] = [];
    // An admin request (committed offsets, log start) can fail while the
    // broker is away. The batch it was for goes back to the inner source to
    // be fetched again, and so does every batch after it, unread: a batch
    // kept by neither side would block its partition for good.
    let failure: unknown = null;
    const take = async (b: FetchedBatch): Promise<void> => {
      if (failure !== null) {
        this.inner.release(b, b.records[0]!.offset);
        return;
      }
      try {
        out.push(...(await this.absorb(b)));
      } catch (e) {
        failure = e;
        this.undoAbsorb(b);
      }
    };
    for (const [p, st] of this.states) {
      if (this.hasOuter(p)) continue;
      for (const b of st.deferred.splice(0)) await take(b);
    }
    const batches = failure === null ? await this.inner.poll(out.length > 0 ? 0 : maxWaitMs) : [];
    for (const b of batches) {
      if (this.hasOuter(b.partition)) this.state(b.partition).deferred.push(b);
      else await take(b);
    }
    if (failure !== null) {
      // Whole records already made are handed on (they are registered as out); the failure is said once.
      if (out.length === 0) throw failure;
      this.o.log?.warn(`${this.o.topic}: ${(failure as Error).message}; the batch is fetched again`);
      return out;
    }
    out.push(...this.expireOpenSets());
    return out;
  }

  /**
   * After `absorb(b)` threw: without a reassembler nothing of `b` was read, so
   * it is simply fetched again; with one, some of it may have been pushed, so
   * the partition's reassembly restarts at its position (where the next
   * outer batch would have begun) and `b` goes back to be read from there.
   */
  private undoAbsorb(b: FetchedBatch): void {
    const p = b.partition;
    const st = this.state(p);
    if (st.reassembler === null) {
      // Only the committed-offset lookup can fail here (a known restart asks nothing).
      this.inner.release(b, b.records[0]!.offset);
      return;
    }
    const restart = st.position !== null ? { offset: st.position, trusted: st.positionTrusted } : { offset: b.records[0]!.offset, trusted: false };
    this.drop(p, restart);
    this.inner.release(b, restart.offset);
  }

  release(batch: FetchedBatch, next: Offset | null): void {
    const h = this.outs.get(batch);
    if (!h) throw new Error(`ChunkedGroupSource.release: a batch this source did not hand out (${batch.topic}/${batch.partition})`);
    this.outs.delete(batch);
    const p = batch.partition;
    const st = this.state(p);
    if (h.epoch !== st.epoch) {
      // Sought or revoked meanwhile: the inner source goes where that said.
      if (h.inner) this.inner.release(h.inner, next);
      return;
    }
    const lastNext = batch.records[batch.records.length - 1]!.next!;
    if (next !== null && next === lastNext) {
      st.position = next;
      st.positionTrusted = true;
      if (h.inner) this.inner.release(h.inner, st.fetchedTo);
      return;
    }
    // Part of the batch, or none of it: read again from there, from a trusted start.
    const target = next ?? batch.records[0]!.offset;
    this.drop(p, { offset: target, trusted: true });
    if (h.inner) this.inner.release(h.inner, target);
    else this.inner.seek(p, target);
  }

  isCurrent(batch: FetchedBatch): boolean {
    const h = this.outs.get(batch);
    if (!h || h.epoch !== this.state(batch.partition).epoch) return false;
    return h.inner ? this.inner.isCurrent(h.inner) : this.inner.assignment().has(batch.partition);
  }

  seek(partition: number, offset: Offset): void {
    this.drop(partition, { offset, trusted: true });
    this.inner.seek(partition, offset);
  }

  pause(partitions: number[]): void {
    this.inner.pause(partitions);
  }

  resume(partitions: number[]): void {
    this.inner.resume(partitions);
  }

  assignment(): ReadonlySet<number> {
    return this.inner.assignment();
  }

  /** The outer `next`: while a set is open here, the last `next` handed back (or the start), not the inner source's position past the chunks read. */
  fetchPosition(partition: number): Offset | null {
    const st = this.states.get(partition);
    if (st?.reassembler && st.reassembler.openSets > 0) return st.position;
    return this.inner.fetchPosition?.(partition) ?? null;
  }

  async stop(): Promise<void> {
    try {
      await this.inner.stop();
    } finally {
      const admin = this.adminP;
      this.adminP = null;
      if (admin) await admin.then((a) => a.close()).catch(() => undefined);
    }
  }

  private admin(): ReturnType<ChunkedGroupSourceOptions['admin']> {
    if (!this.adminP) {
      this.adminP = this.o.admin();
      this.adminP.catch(() => (this.adminP = null));
    }
    return this.adminP;
  }

  /**
   * One admin request, bounded: a request that fails or does not answer
   * (a broker restarting under it) fails this poll, retriably, and the next
   * poll asks through a fresh admin client, so a partition never waits on a
   * dead connection.
   */
  private async withAdmin<T>(what: string, f: (a: Awaited<ReturnType<ChunkedGroupSourceOptions['admin']>>) => Promise<T>): Promise<T> {
    const admin = this.admin();
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        admin.then(f),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new RolloutStreamError('request_timeout', `${what} of ${this.o.topic} did not answer in ${ADMIN_TIMEOUT_MS / 1000} s`)), ADMIN_TIMEOUT_MS);
        }),
      ]);
    } catch (e) {
      if (this.adminP === admin) this.adminP = null;
      void admin.then((a) => a.close()).catch(() => undefined);
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  private hasOuter(p: number): boolean {
    for (const b of this.outs.keys()) if (b.partition === p) return true;
    return false;
  }

  private state(p: number): PartitionState {
    let st = this.states.get(p);
    if (!st) {
      st = { epoch: 0, reassembler: null, restart: null, position: null, positionTrusted: false, deferred: [], fetchedTo: null, highWatermark: null, lastStable: null, waitLoggedAt: 0 };
      this.states.set(p, st);
    }
    return st;
  }

  /** Forgets what the partition assembled; the next read starts at `restart` (null: the committed offset). Deferred inner batches go back unread. */
  private drop(p: number, restart: PartitionState['restart']): void {
    const st = this.state(p);
    st.epoch++;
    st.reassembler = null;
    st.restart = restart;
    st.position = null;
    st.fetchedTo = null;
    for (const b of st.deferred.splice(0)) this.inner.release(b, restart?.offset ?? b.records[0]!.offset);
  }

  /** Where a fresh reassembler of `p` starts: a known restart, else the committed offset (trusted), else the first record fetched (untrusted). */
  private async startOf(p: number, firstFetched: Offset): Promise<{ offset: Offset; trusted: boolean }> {
    const st = this.state(p);
    if (st.restart) return st.restart;
    const committed = (await this.withAdmin('reading the committed offsets', (a) => a.committedOffsets(this.o.groupId, this.o.topic))).get(p);
    return committed !== undefined ? { offset: committed, trusted: true } : { offset: firstFetched, trusted: false };
  }

  private async absorb(b: FetchedBatch): Promise<FetchedBatch[]> {
    const p = b.partition;
    let st = this.state(p);
    const epoch = st.epoch;
    if (!st.reassembler) {
      const start = await this.startOf(p, b.records[0]!.offset);
      if (this.state(p).epoch !== epoch) {
        this.inner.release(b, this.state(p).restart?.offset ?? b.records[0]!.offset);
        return [];
      }
      st = this.state(p);
      st.reassembler = new Reassembler({ start: start.offset, trusted: start.trusted, maxHeldBytes: this.o.maxHeldBytes, chunkWaitMs: this.o.chunkWaitMs, ...(this.o.maxValueBytes !== undefined ? { maxValueBytes: this.o.maxValueBytes } : {}) });
      st.position = start.offset;
      st.positionTrusted = start.trusted;
    }
    const r = st.reassembler!;
    for (const rec of b.records) {
      const question = r.push(rec, this.now());
      if (question) r.answerLogStart(await this.logStart(p));
    }
    st.fetchedTo = (BigInt(b.records[b.records.length - 1]!.offset) + 1n).toString();
    st.highWatermark = b.highWatermark;
    st.lastStable = b.lastStable ?? null;
    const ready = r.take();
    if (ready.length === 0) {
      this.inner.release(b, st.fetchedTo);
      return [];
    }
    return [this.outer(p, ready, b, st)];
  }

  private outer(p: number, ready: Reassembled[], inner: FetchedBatch | null, st: PartitionState): FetchedBatch {
    const batch: FetchedBatch = { topic: this.o.topic, partition: p, records: ready.map(toFetchedRecord), highWatermark: st.highWatermark ?? ready[ready.length - 1]!.next! };
    if (st.lastStable !== null) batch.lastStable = st.lastStable;
    this.outs.set(batch, { inner, epoch: st.epoch });
    return batch;
  }

  private async logStart(p: number): Promise<Offset> {
    const offsets = await this.withAdmin('reading the log start', (a) => a.topicOffsets(this.o.topic));
    const at = offsets.find((x) => x.partition === p);
    return at ? at.low : '0';
  }

  /** The `timeout` rule for partitions with an open set and no batch out; and the wait, said every 15 s. */
  private expireOpenSets(): FetchedBatch[] {
    const out: FetchedBatch[] = [];
    const now = this.now();
    for (const [p, st] of this.states) {
      const r = st.reassembler;
      if (!r || r.openSets === 0 || this.hasOuter(p) || st.highWatermark === null) continue;
      const fetchedTo = this.inner.fetchPosition?.(p) ?? st.fetchedTo;
      if (st.lastStable !== null && fetchedTo !== null) {
        r.expire(now, { fetchedTo, lastStable: st.lastStable, highWatermark: st.highWatermark });
        const ready = r.take();
        if (ready.length > 0) {
          out.push(this.outer(p, ready, null, st));
          continue;
        }
      }
      if (now - st.waitLoggedAt >= WAIT_LOG_MS) {
        if (st.waitLoggedAt !== 0) this.o.log?.info(`${this.o.topic}: waiting for the rest of ${r.openSets} chunk set(s) on partition ${p} (from offset ${st.position})`);
        st.waitLoggedAt = now;
      }
    }
    return out;
  }
}

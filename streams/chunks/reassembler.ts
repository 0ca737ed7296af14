/**
 * The per-partition reassembly state machine of docs/design-chunked-records.md
 * §3: fetched records in, whole records out, in first-chunk order, each with
 * its resume offset `next`. Pure: no Kafka, no clock (callers pass the time),
 * no metrics (callers read the counters). Python's twin is
 * `rollout_stream.chunks.Reassembler`; both run docs/examples/chunks/cases.json.
 */
import type { UndecodableError } from '../codecs/wire-format.js';
import type { FetchedRecord as Fetched, Offset } from '../kafka/types.js';

/** A record as fetched, before any chunk reader set its `next` and `chunk`. */
type FetchedRecord = Omit<Fetched, 'next' | 'chunk'>;
import { chunkCrc, DEFAULT_MAX_VALUE_BYTES, isChunk, parseChunk, type ParsedChunk } from './chunk-format.js';

/** Why a set could not be handed on whole (`incomplete_record`'s `reason_detail`). */
export type IncompleteDetail =
  /** A chunk after chunk 0 that does not continue it (index, payload_at, total, crc or count differ). */
  | 'inconsistent'
  /** The whole value's CRC-32 or length is not what the header says. */
  | 'crc_mismatch'
  /** The set began before an untrusted start (`--from-offset`, a reset): its head was never read. */
  | 'headless'
  /** The set began before the partition's log start: retention took its head. */
  | 'log_start'
  /** No chunk for `kafka.chunk_wait_ms` with nothing left to fetch: the writer will not finish it. */
  | 'timeout'
  /** Open sets (their whole sizes) and held records passed `runtime.max_inflight_bytes`: the oldest set was given up. */
  | 'memory_cap';

interface Resumable {
  /** The first chunk's offset (the record's own when not chunked). */
  offset: Offset;
  lastOffset: Offset;
  /** The offset to commit after this record (§3 "resume offset"). */
  next: Offset;
}

/** A whole value: unchunked as fetched, or reassembled (then `value` is a new buffer and key, headers, timestamp are chunk 0's). */
export interface WholeRecord extends FetchedRecord, Resumable {
  kind: 'record';
  chunks: number;
}

/** A set handed on as a fault, written as an `incomplete_record` dead letter. */
export interface IncompleteRecord extends Omit<FetchedRecord, 'value'>, Resumable {
  kind: 'incomplete';
  value: null;
  incomplete: { setId: string; firstOffset: Offset; lastOffset: Offset; have: number; count: number; detail: IncompleteDetail };
}

/** A 0xCB value whose header does not parse: an `undecodable` dead letter per chunk, as old readers make. */
export interface UndecodableChunk extends FetchedRecord, Resumable {
  kind: 'undecodable';
  error: UndecodableError;
}

/** A set the caller skipped from chunk 0's headers (the stale skip): nothing was buffered. */
export interface SkippedRecord extends Omit<FetchedRecord, 'value'>, Resumable {
  kind: 'skipped';
  value: null;
  chunks: number;
}

export type Reassembled = WholeRecord | IncompleteRecord | UndecodableChunk | SkippedRecord;

export interface ReassemblerOptions {
  /** The offset reading began at. */
  start: Offset;
  /** A resume offset we committed or saved (committed offset, a `next`, a trainer position); false for `--from-offset`, `--from-time`, a reset. */
  trusted: boolean;
  /** `runtime.max_inflight_bytes`: open sets' bytes plus held records' bytes. */
  maxHeldBytes: number;
  /** `kafka.chunk_wait_ms`. */
  chunkWaitMs: number;
  /** `kafka.max_value_bytes`. */
  maxValueBytes?: number;
}

/** Asked of the caller for a headless set under a trusted start: the partition's log start now. */
export interface LogStartQuestion {
  setId: string;
  offset: Offset;
}

interface OpenSet {
  id: string;
  first: FetchedRecord;
  count: number;
  totalSize: number;
  crc: number;
  /** Chunks seen. */
  have: number;
  /** Payload bytes seen (= the next payload_at). */
  bytes: number;
  parts: Buffer[];
  runningCrc: number;
  lastOffset: bigint;
  skip: boolean;
}

/** Set ids remembered for dropping; one forgotten early only makes its later chunks headless again. */
const MAX_DROPPING = 1024;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type Ready = DistributiveOmit<Reassembled, 'next'>;

/**
 * One partition's reassembly. Feed `push` in offset order (gaps are fine:
 * read_committed leaves out aborted records and markers), call `take` for
 * what is ready. A `push` that returns a question must be answered with
 * `answerLogStart` before the next `push`. After a seek, revoke or rebuild,
 * build a new one.
 */
export class Reassembler {
  private readonly start: bigint;
  private readonly trusted: boolean;
  private readonly maxHeldBytes: number;
  private readonly chunkWaitMs: number;
  private readonly maxValueBytes: number;
  private readonly open = new Map<string, OpenSet>();
  /** Ready, sorted by first offset; handed out once no open set began before it. */
  private readonly ready: Ready[] = [];
  /** Sets whose later chunks are dropped without a word (handed on before, faulted, or given up). */
  private readonly dropping = new Set<string>();
  private pending: { record: FetchedRecord; chunk: ParsedChunk; id: string } | null = null;
  private lastPushed: bigint | null = null;
  private lastChunkAtMs: number | null = null;
  /** `rollout_stream_chunk_sets_restarted_total`: chunk 0 of an open set again. */
  restarted = 0;

  constructor(options: ReassemblerOptions) {
    this.start = BigInt(options.start);
    this.trusted = options.trusted;
    this.maxHeldBytes = options.maxHeldBytes;
    this.chunkWaitMs = options.chunkWaitMs;
    this.maxValueBytes = options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES;
  }

  /**
   * Takes the next fetched record (offsets increasing). `skip` on chunk 0
   * drops its set without buffering it (the header-only stale skip); the set
   * comes out as `skipped` so its offsets can be committed. `nowMs` is the
   * time of arrival, for the `timeout` rule. Returns a question when a
   * headless set under a trusted start needs the log start.
   */
  push(record: FetchedRecord, nowMs: number, options: { skip?: boolean } = {}): LogStartQuestion | null {
    if (this.pending) throw new Error('Reassembler.push: answer the log-start question first');
    const offset = BigInt(record.offset);
    if (this.lastPushed !== null && offset <= this.lastPushed) throw new Error(`Reassembler.push: offset ${record.offset} after ${this.lastPushed}`);
    this.lastPushed = offset;
    if (!isChunk(record.value)) {
      this.addReady({ ...record, kind: 'record', lastOffset: record.offset, chunks: 1 });
      this.enforceCap(); // held behind an open set, it counts
      return null;
    }
    this.lastChunkAtMs = nowMs;
    let chunk: ParsedChunk;
    try {
      chunk = parseChunk(record.value!, this.maxValueBytes);
    } catch (e) {
      this.addReady({ ...record, kind: 'undecodable', lastOffset: record.offset, error: e as UndecodableError });
      return null;
    }
    const id = chunk.setId.toString('hex');
    if (chunk.index === 0) {
      if (this.open.has(id)) this.restarted++; // the new chunk 0 replaces the partial set
      this.openSet(id, record, chunk, options.skip === true);
    } else {
      const set = this.open.get(id);
      if (set) this.continueSet(set, record, chunk);
      else if (this.dropping.has(id)) this.dropped(id, chunk);
      else if (this.trusted) {
        this.pending = { record, chunk, id };
        return { setId: id, offset: record.offset };
      } else this.headless(id, record, chunk, 'headless');
    }
    this.enforceCap();
    return null;
  }

  /** The partition's log start, answering `push`'s question. */
  answerLogStart(logStart: Offset): void {
    const p = this.pending;
    if (!p) throw new Error('Reassembler.answerLogStart: nothing was asked');
    this.pending = null;
    if (this.start < BigInt(logStart)) this.headless(p.id, p.record, p.chunk, 'log_start');
    else this.dropped(p.id, p.chunk); // handed on before this trusted start
  }

  /**
   * The `timeout` rule: when the fetch stands at the high watermark, the
   * last stable offset equals it (no transaction open) and no chunk came for
   * `chunkWaitMs`, the open sets can never complete and become faults.
   */
  expire(nowMs: number, fetch: { fetchedTo: Offset; lastStable: Offset; highWatermark: Offset }): void {
    if (this.open.size === 0 || this.lastChunkAtMs === null) return;
    if (fetch.lastStable !== fetch.highWatermark || BigInt(fetch.fetchedTo) < BigInt(fetch.highWatermark)) return;
    if (nowMs - this.lastChunkAtMs < this.chunkWaitMs) return;
    for (const set of [...this.open.values()]) this.giveUp(set, 'timeout');
  }

  /** What can be handed on now, in first-offset order, each with its `next`. */
  take(): Reassembled[] {
    const out: Reassembled[] = [];
    const oldestOpen = this.oldestOpen();
    while (this.ready.length > 0 && (oldestOpen === null || BigInt(this.ready[0]!.offset) < oldestOpen)) {
      const r = this.ready.shift()!;
      let next = BigInt(r.lastOffset) + 1n;
      if (oldestOpen !== null && oldestOpen < next) next = oldestOpen;
      const held = this.ready[0];
      if (held && BigInt(held.offset) < next) next = BigInt(held.offset);
      out.push({ ...r, next: next.toString() } as Reassembled);
    }
    return out;
  }

  /**
   * Bytes held now: each open set's whole size (what Python allocates at its
   * chunk 0; counted up front, so a set the cap cannot take fails at once)
   * plus the ready records queued behind the oldest open set.
   */
  get bytes(): number {
    let n = this.heldBehind();
    for (const s of this.open.values()) n += s.skip ? 0 : s.totalSize;
    return n;
  }

  private heldBehind(): number {
    const oldest = this.oldestOpen();
    let n = 0;
    if (oldest !== null) for (const r of this.ready) if (r.value && BigInt(r.offset) > oldest) n += r.value.length;
    return n;
  }

  /** Sets being assembled now. */
  get openSets(): number {
    return this.open.size;
  }

  private oldestOpen(): bigint | null {
    let min: bigint | null = null;
    for (const s of this.open.values()) {
      const o = BigInt(s.first.offset);
      if (min === null || o < min) min = o;
    }
    return min;
  }

  private openSet(id: string, record: FetchedRecord, c: ParsedChunk, skip: boolean): void {
    const set: OpenSet = {
      id,
      first: record,
      count: c.count,
      totalSize: c.totalSize,
      crc: c.crc,
      have: 0,
      bytes: 0,
      parts: [],
      runningCrc: 0,
      lastOffset: BigInt(record.offset),
      skip,
    };
    this.open.set(id, set);
    this.continueSet(set, record, c);
  }

  private continueSet(set: OpenSet, record: FetchedRecord, c: ParsedChunk): void {
    set.lastOffset = BigInt(record.offset);
    if (c.index !== set.have || c.count !== set.count || c.totalSize !== set.totalSize || c.crc !== set.crc || c.payloadAt !== set.bytes) {
      // More may come unless this was due as the last chunk and says it is.
      this.fault(set, 'inconsistent', !(set.have + 1 === set.count && c.index + 1 === c.count));
      return;
    }
    set.have++;
    if (set.skip) {
      set.bytes += c.payload.length; // position only; nothing kept
    } else {
      set.parts.push(c.payload);
      set.runningCrc = chunkCrc(c.payload, set.runningCrc);
      set.bytes += c.payload.length;
    }
    if (set.have < set.count) return;
    this.open.delete(set.id);
    const base = { topic: set.first.topic, partition: set.first.partition, offset: set.first.offset, timestamp: set.first.timestamp, key: set.first.key, headers: set.first.headers };
    const lastOffset = set.lastOffset.toString();
    if (set.skip) {
      this.addReady({ ...base, kind: 'skipped', value: null, lastOffset, chunks: set.count });
    } else if (set.bytes !== set.totalSize || set.runningCrc !== set.crc) {
      this.addReady(this.incomplete(set, 'crc_mismatch'));
    } else {
      this.addReady({ ...base, kind: 'record', value: Buffer.concat(set.parts, set.totalSize), lastOffset, chunks: set.count });
    }
  }

  /** A set ends as a fault at its first offset; its chunks still to come are dropped. */
  private fault(set: OpenSet, detail: IncompleteDetail, moreToCome: boolean): void {
    this.open.delete(set.id);
    if (moreToCome) this.drop(set.id);
    this.addReady(this.incomplete(set, detail));
  }

  private giveUp(set: OpenSet, detail: IncompleteDetail): void {
    this.fault(set, detail, true);
  }

  private incomplete(set: OpenSet, detail: IncompleteDetail): Ready {
    const f = set.first;
    return {
      kind: 'incomplete',
      topic: f.topic,
      partition: f.partition,
      offset: f.offset,
      lastOffset: set.lastOffset.toString(),
      timestamp: f.timestamp,
      key: f.key,
      headers: f.headers,
      value: null,
      incomplete: { setId: set.id, firstOffset: f.offset, lastOffset: set.lastOffset.toString(), have: set.have, count: set.count, detail },
    };
  }

  /** A chunk of a set whose head is before the start: one fault for the set, its later chunks dropped. */
  private headless(id: string, record: FetchedRecord, c: ParsedChunk, detail: 'headless' | 'log_start'): void {
    this.dropped(id, c);
    this.addReady({
      kind: 'incomplete',
      topic: record.topic,
      partition: record.partition,
      offset: record.offset,
      lastOffset: record.offset,
      timestamp: record.timestamp,
      key: record.key,
      headers: record.headers,
      value: null,
      incomplete: { setId: id, firstOffset: record.offset, lastOffset: record.offset, have: 1, count: c.count, detail },
    });
  }

  /** Drops a chunk of a set handed on or faulted before; its last chunk ends the dropping. */
  private dropped(id: string, c: ParsedChunk): void {
    if (c.index + 1 < c.count) this.drop(id);
    else this.dropping.delete(id);
  }

  /** Remembers a set to drop; bounded, since a set whose last chunk never comes would stay forever. */
  private drop(id: string): void {
    this.dropping.delete(id);
    this.dropping.add(id);
    if (this.dropping.size > MAX_DROPPING) this.dropping.delete(this.dropping.values().next().value!);
  }

  private addReady(r: Ready): void {
    const o = BigInt(r.offset);
    let i = this.ready.length;
    while (i > 0 && BigInt(this.ready[i - 1]!.offset) > o) i--;
    this.ready.splice(i, 0, r);
  }

  private enforceCap(): void {
    // One set alone, with nothing held behind it, always assembles: the
    // ceiling for a value is kafka.max_value_bytes, not this cap.
    while (this.open.size > 0 && this.bytes > this.maxHeldBytes && !(this.open.size === 1 && this.heldBehind() === 0)) {
      let oldest: OpenSet | null = null;
      for (const s of this.open.values()) if (oldest === null || BigInt(s.first.offset) < BigInt(oldest.first.offset)) oldest = s;
      this.giveUp(oldest!, 'memory_cap');
    }
  }
}

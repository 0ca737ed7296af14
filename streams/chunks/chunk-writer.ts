/**
 * The writer side of chunk sets (docs/design-chunked-records.md §2): turns
 * the records one `send` was given into the produce requests that carry
 * them. A record whose batch would pass its topic's `max.message.bytes` is
 * cut into a chunk set (chunk-format.ts) on one pinned partition; every
 * request then holds at most one topic limit of bytes per partition (a
 * produce request holds one batch per partition, and the batch is what the
 * broker limits) and at most `requestBudget` in all, in input order. Pure:
 * the sinks (chunking-sink.ts, ops-chunking-sink.ts) do the sending.
 */
import { randomBytes } from 'node:crypto';
import type { OutgoingRecord, RecordPosition } from '../kafka/types.js';
import { CHUNK_ALIGN, CHUNK_HEADER_BYTES, chunkCrc, encodeChunkHeader, SET_ID_BYTES } from './chunk-format.js';

/** A record batch's own header (v2 record batch format). */
export const BATCH_HEADER_BYTES = 61;
/** What one record costs beyond its key, value and headers (lengths, deltas, attributes): at most. */
export const RECORD_OVERHEAD_BYTES = 32;
/** Kept free under every topic limit, for what the estimates above miss. */
export const LIMIT_SLACK_BYTES = 1024;

const byteLength = (v: string | Buffer | null | undefined): number => (v === null || v === undefined ? 0 : typeof v === 'string' ? Buffer.byteLength(v) : v.length);

/** Bytes of a record's key and headers (names and values). */
export function keyAndHeaderBytes(r: Pick<OutgoingRecord, 'key' | 'headers'>): number {
  let n = byteLength(r.key);
  for (const [k, v] of Object.entries(r.headers ?? {})) n += Buffer.byteLength(k) + byteLength(v);
  return n;
}

/** What a record adds to its partition's batch (an upper estimate). */
export function recordBytes(r: Pick<OutgoingRecord, 'key' | 'value' | 'headers'>): number {
  return RECORD_OVERHEAD_BYTES + keyAndHeaderBytes(r) + (r.value?.length ?? 0);
}

/** The bytes of records one batch of a topic with `limit` (`max.message.bytes`) may hold. */
export function batchBudget(limit: number): number {
  return limit - BATCH_HEADER_BYTES - LIMIT_SLACK_BYTES;
}

/**
 * The payload of each chunk of `r` on a topic with `limit`:
 * limit − batch header − record overhead − key − headers − chunk header − slack,
 * rounded down to a multiple of 64. At most 0 when the limit cannot carry a chunk at all.
 */
export function chunkBudget(limit: number, r: Pick<OutgoingRecord, 'key' | 'headers'>): number {
  const raw = limit - BATCH_HEADER_BYTES - RECORD_OVERHEAD_BYTES - keyAndHeaderBytes(r) - CHUNK_HEADER_BYTES - LIMIT_SLACK_BYTES;
  return Math.floor(raw / CHUNK_ALIGN) * CHUNK_ALIGN;
}

export interface PlanOptions {
  /** The topic's `max.message.bytes` (RecordLimits.limit, loaded before planning). */
  limitOf: (topic: string) => number;
  /** Bytes one request may carry in all (`kafka.max_message_bytes`). */
  requestBudget: number;
  /** False for a topic whose records are never chunked (the compacted changelogs): an oversized one goes whole, and the broker refuses it. */
  chunkable: (topic: string) => boolean;
  /** A new set id (default: 16 random bytes); tests pass their own. */
  setId?: () => Buffer;
}

/** Where the parts of one input record went: send and index within it, of its first and of its last part. */
export interface PlannedRecord {
  first: { send: number; at: number };
  last: { send: number; at: number };
  /** 1 when sent whole. */
  chunks: number;
}

export interface SendPlan {
  /** The requests, in order; every record has its partition. */
  sends: OutgoingRecord[][];
  /** Per input record, in input order. */
  records: PlannedRecord[];
}

/**
 * Plans the sends of `records`, each already placed on a partition (its
 * `partition` set). A record whose batch bytes pass its topic's batch budget
 * and whose topic is chunkable becomes `count` chunk records with its key and
 * headers on the same partition; every other record goes whole. Each send
 * holds at most `batchBudget(limit)` bytes per topic-partition and
 * `requestBudget` bytes in all, unless it is a single record (which then
 * goes alone: the broker decides).
 */
export function planSends(records: readonly OutgoingRecord[], o: PlanOptions): SendPlan {
  const newSetId = o.setId ?? (() => randomBytes(SET_ID_BYTES));
  const sends: OutgoingRecord[][] = [];
  const planned: PlannedRecord[] = [];
  let current: OutgoingRecord[] = [];
  let total = 0;
  let perPartition = new Map<string, number>();
  const place = (r: OutgoingRecord): { send: number; at: number } => {
    const size = recordBytes(r);
    const tp = `${r.topic}/${r.partition}`;
    const inPartition = perPartition.get(tp) ?? 0;
    const fits = inPartition + size <= batchBudget(o.limitOf(r.topic)) && total + size <= o.requestBudget;
    if (current.length > 0 && !fits) {
      sends.push(current);
      current = [];
      total = 0;
      perPartition = new Map();
    }
    current.push(r);
    total += size;
    perPartition.set(tp, (perPartition.get(tp) ?? 0) + size);
    return { send: sends.length, at: current.length - 1 };
  };
  for (const r of records) {
    if (r.partition === undefined) throw new RangeError(`planSends: a record for ${r.topic} without a partition (place it first)`);
    const limit = o.limitOf(r.topic);
    const value = r.value;
    if (value === null || recordBytes(r) <= batchBudget(limit) || !o.chunkable(r.topic)) {
      const at = place(r);
      planned.push({ first: at, last: at, chunks: 1 });
      continue;
    }
    const payload = chunkBudget(limit, r);
    if (payload <= 0) throw new RangeError(`${r.topic}'s max.message.bytes of ${limit} cannot carry a chunk of a record with ${keyAndHeaderBytes(r)} bytes of key and headers`);
    const count = Math.ceil(value.length / payload);
    const setId = newSetId();
    const crc = chunkCrc(value);
    let first: { send: number; at: number } | null = null;
    let last: { send: number; at: number } | null = null;
    for (let index = 0; index < count; index++) {
      const payloadAt = index * payload;
      const header = encodeChunkHeader({ setId, index, count, totalSize: value.length, payloadAt, crc });
      const chunk: OutgoingRecord = {
        topic: r.topic,
        partition: r.partition,
        key: r.key,
        value: Buffer.concat([header, value.subarray(payloadAt, payloadAt + payload)]),
        ...(r.headers ? { headers: r.headers } : {}),
      };
      last = place(chunk);
      first ??= last;
    }
    planned.push({ first: first!, last: last!, chunks: count });
  }
  if (current.length > 0) sends.push(current);
  return { sends, records: planned };
}

/** A record's position once sent: its first chunk's offset, and its last chunk's (equal when sent whole). */
export type ChunkedPosition = RecordPosition & { lastOffset: string; chunks: number };

/** Per input record, its position from the acknowledged positions of each send of `plan`. */
export function positionsOf(plan: SendPlan, acked: ReadonlyArray<readonly RecordPosition[]>): ChunkedPosition[] {
  return plan.records.map((p) => {
    const first = acked[p.first.send]![p.first.at]!;
    const last = acked[p.last.send]![p.last.at]!;
    return { ...first, lastOffset: last.offset, chunks: p.chunks };
  });
}

/**
 * The pure half of the offset reader (./offset-reader.ts): what one
 * partition of kafkajs's decoded Fetch answer holds for a read_committed
 * reader, and how many bytes the next fetch should ask for.
 *
 * The broker answers a fetch at offset `o` with whole record batches, the
 * first one being the batch that contains `o` (so records below `o` come
 * too), plus the list of aborted transactions that overlap the range. As the
 * Java consumer does, records of a transactional batch are dropped while
 * their producer is inside an aborted transaction (from the transaction's
 * first offset to its ABORT marker), and control records (the markers) are
 * never records. kafkajs's consumer filters the same way (consumer/batch.js,
 * filterAbortedMessages.js), but opens only one aborted transaction per
 * record it looks at, so a fetch starting inside two aborted transactions of
 * different producers would keep records of the second: the filter here
 * opens every transaction that has begun.
 */
import type { FetchedRecord } from '../types.js';

/** A record as kafkajs decodes it (protocol/recordBatch/record/v0/decoder.js): the fields read here. */
export interface KafkajsRecord {
  offset: string;
  /** Epoch ms, decimal. */
  timestamp: string;
  key: Buffer | null;
  value: Buffer | null;
  /** An array where a key repeats. */
  headers: Record<string, Buffer | null | Array<Buffer | null>>;
  isControlRecord: boolean;
  /** Absent for the legacy message formats (magic 0 and 1), which have no transactions. */
  batchContext?: { firstOffset: string; lastOffsetDelta: number; producerId: string; inTransaction: boolean };
}

/** One partition of kafkajs's decoded Fetch answer, v4 and later (protocol/requests/fetch/v11/response.js). */
export interface KafkajsFetchPartition {
  partition: number;
  errorCode: number;
  highWatermark: string;
  lastStableOffset: string;
  abortedTransactions: Array<{ producerId: string; firstOffset: string }>;
  messages: KafkajsRecord[];
}

export interface CommittedRecords {
  /** Committed data records at or above the fetch offset, in offset order. */
  records: KafkajsRecord[];
  /** The last offset the answer's batches cover (control and aborted ones included); null when it had none. */
  through: bigint | null;
  /** Where the answer's first batch starts (null with `through`). */
  from: bigint | null;
  /** Bytes of keys, values and headers of every record in the answer (for the next request's size). */
  bytes: number;
}

/** A control record's key: version (int16), type (int16); type 0 is ABORT, 1 is COMMIT. */
function isAbortMarker(key: Buffer | null): boolean {
  return key !== null && key.length >= 4 && key.readInt16BE(2) === 0;
}

function headerBytes(headers: KafkajsRecord['headers']): number {
  let n = 0;
  for (const [k, v] of Object.entries(headers ?? {})) for (const b of Array.isArray(v) ? v : [v]) n += k.length + (b?.length ?? 0);
  return n;
}

/** Per record, besides key, value and headers: the record's own framing, about what Kafka's format v2 costs. */
const RECORD_OVERHEAD_BYTES = 16;

/** The committed records of a fetch at `fetchOffset` (see the module comment). */
export function committedRecords(p: KafkajsFetchPartition, fetchOffset: bigint): CommittedRecords {
  const aborted = p.abortedTransactions
    .map((t) => ({ producerId: t.producerId, first: BigInt(t.firstOffset) }))
    .sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  const inAborted = new Set<string>();
  let nextAborted = 0;
  const records: KafkajsRecord[] = [];
  let through: bigint | null = null;
  let from: bigint | null = null;
  let bytes = 0;
  for (const m of p.messages) {
    const offset = BigInt(m.offset);
    const batch = m.batchContext;
    const batchEnd = batch ? BigInt(batch.firstOffset) + BigInt(batch.lastOffsetDelta) : offset;
    if (through === null || batchEnd > through) through = batchEnd;
    const batchStart = batch ? BigInt(batch.firstOffset) : offset;
    if (from === null || batchStart < from) from = batchStart;
    bytes += (m.key?.length ?? 0) + (m.value?.length ?? 0) + headerBytes(m.headers) + RECORD_OVERHEAD_BYTES;
    while (nextAborted < aborted.length && aborted[nextAborted]!.first <= offset) inAborted.add(aborted[nextAborted++]!.producerId);
    if (m.isControlRecord) {
      if (batch && isAbortMarker(m.key)) inAborted.delete(batch.producerId);
      continue;
    }
    if (batch?.inTransaction && inAborted.has(batch.producerId)) continue;
    if (offset >= fetchOffset) records.push(m);
  }
  return { records, through, from, bytes };
}

/**
 * kafkajs hands out keys, values and header values as views (its Decoder's
 * `readBytes` slices) into the whole fetch answer, or into a batch's
 * decompressed bytes. A view that is most of its backing memory is kept (a
 * record larger than the request's size is most of its answer); a smaller
 * one is copied, so that keeping a few records does not keep a whole answer
 * of up to `maxBytes` alive.
 */
function owned(b: Buffer): Buffer {
  return b.byteLength * 2 >= b.buffer.byteLength ? b : Buffer.from(b);
}

/** Ours from kafkajs's: offsets stay decimal strings; a repeated header key keeps its last value (Java's `lastHeader`). */
export function toFetchedRecord(topic: string, partition: number, m: KafkajsRecord): FetchedRecord {
  const headers: Record<string, Buffer> = {};
  for (const [k, v] of Object.entries(m.headers ?? {})) {
    const last = Array.isArray(v) ? v[v.length - 1] : v;
    if (Buffer.isBuffer(last)) headers[k] = owned(last);
  }
  return {
    topic,
    partition,
    offset: m.offset,
    timestamp: Number(m.timestamp),
    key: m.key === null ? null : owned(m.key),
    value: m.value === null ? null : owned(m.value),
    headers,
  };
}

/** A first fetch of a partition, before its records' sizes are known. */
export const FIRST_REQUEST_BYTES = 1024 * 1024;
/** The smallest fetch asked for (below this a round trip costs more than the bytes). */
export const MIN_REQUEST_BYTES = 64 * 1024;
/** A gap between wanted offsets worth reading through rather than fetching again after it. */
export const GAP_BYTES = 256 * 1024;

/**
 * Bytes to ask for in a fetch at `wanted[from]` (`wanted` ascending): enough
 * for the wanted offsets that follow it without a gap larger than
 * GAP_BYTES, by `bytesPerOffset` (null: not known yet), with a quarter to
 * spare; never above `maxBytes`. The answer may hold fewer offsets than
 * that (larger records than estimated): the reader then fetches again from
 * the first offset it still lacks. Kafka returns a first batch larger than
 * the size asked for whole, so a small request never starves a large record.
 */
export function requestBytes(wanted: readonly bigint[], from: number, bytesPerOffset: number | null, maxBytes: number): number {
  if (bytesPerOffset === null) return Math.min(FIRST_REQUEST_BYTES, maxBytes);
  const start = wanted[from]!;
  let last = from;
  while (last + 1 < wanted.length) {
    const gap = Number(wanted[last + 1]! - wanted[last]!) * bytesPerOffset;
    const span = Number(wanted[last + 1]! - start + 1n) * bytesPerOffset;
    if (gap > GAP_BYTES || span > maxBytes) break;
    last++;
  }
  const span = Number(wanted[last]! - start + 1n);
  return Math.min(maxBytes, Math.max(MIN_REQUEST_BYTES, Math.ceil(span * bytesPerOffset * 1.25)));
}

/** `offsets` as ascending distinct bigints; throws RangeError on one that is not an offset as Kafka writes it (decimal, no leading zero). */
export function sortedOffsets(offsets: readonly string[]): bigint[] {
  const seen = new Set<bigint>();
  for (const o of offsets) {
    if (!/^(0|[1-9]\d*)$/.test(o)) throw new RangeError(`not an offset: ${JSON.stringify(o)}`);
    seen.add(BigInt(o));
  }
  return [...seen].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

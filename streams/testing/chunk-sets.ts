/**
 * Writes chunk sets for tests (docs/design-chunked-records.md §1), until the
 * stage writers make them: a value longer than `payloadBytes` is cut with
 * `splitIntoChunks` into records with the same key, partition and headers,
 * and everything goes out inside one transaction, so read_committed readers
 * never see part of a set. Works with any TransactionalSink: the memory
 * cluster's, or a real broker's (the integration tests).
 */
import { randomBytes } from 'node:crypto';
import { splitIntoChunks, SET_ID_BYTES } from '../chunks/chunk-format.js';
import type { Offset, OutgoingRecord, RecordPosition, TransactionalSink } from '../kafka/types.js';
import { partitionForKey } from '../topics/partitioner.js';

export interface ChunkSetOptions {
  /** Payload bytes per chunk (a positive multiple of 64); a value longer than this is chunked. */
  payloadBytes: number;
  /** Partitions of a topic, for pinning a record without a partition (murmur2 of its key, as the clients place it). */
  partitionsOf: (topic: string) => number;
}

/** Where a written record landed: its first chunk's position, and its last chunk's offset (equal when not chunked). */
export interface SetPosition extends RecordPosition {
  lastOffset: Offset;
  chunks: number;
}

/** The records to send for `records`: each one longer than `payloadBytes` as a chunk set on its pinned partition; how many records each became. */
export function asChunkSets(records: OutgoingRecord[], o: ChunkSetOptions): { records: OutgoingRecord[]; counts: number[] } {
  const out: OutgoingRecord[] = [];
  const counts: number[] = [];
  for (const r of records) {
    if (!r.value || r.value.length <= o.payloadBytes) {
      out.push(r);
      counts.push(1);
      continue;
    }
    const key = r.key === null ? null : Buffer.from(r.key);
    const partition = r.partition ?? (key === null ? 0 : partitionForKey(new Uint8Array(key), o.partitionsOf(r.topic)));
    const chunks = splitIntoChunks(r.value, o.payloadBytes, randomBytes(SET_ID_BYTES));
    for (const value of chunks) out.push({ ...r, partition, value });
    counts.push(chunks.length);
  }
  return { records: out, counts };
}

/**
 * Writes `records` in one transaction of `sink` (initialized; left open for
 * the next call), long values as chunk sets. Returns one position per input
 * record.
 */
export async function writeChunkSets(sink: TransactionalSink, records: OutgoingRecord[], o: ChunkSetOptions): Promise<SetPosition[]> {
  const { records: sends, counts } = asChunkSets(records, o);
  await sink.begin();
  let positions: RecordPosition[];
  try {
    positions = await sink.send(sends);
    await sink.commit();
  } catch (e) {
    await sink.abort().catch(() => undefined);
    throw e;
  }
  const out: SetPosition[] = [];
  let i = 0;
  for (const n of counts) {
    out.push({ ...positions[i]!, lastOffset: positions[i + n - 1]!.offset, chunks: n });
    i += n;
  }
  return out;
}

/**
 * Builds a PromptGroup record from its rows' original bytes instead of
 * re-encoding decoded rows: the accumulator's output is mostly its input.
 *
 * Avro encodes `rows` (the last field of PromptGroup) as
 *   zigzag-varint(N) row_body × N  0x00
 * and a RolloutRow inside the RowCompleted envelope as
 *   header(5) 0x00 (union branch 0 = RolloutRow) row_body
 * so when a row was written with our own row-completed schema id, its body
 * is copied as is. The group's other fields are encoded normally (an empty
 * `rows` array encodes as the single byte 0x00, which is cut off).
 * Returns null when any row came with another schema id (then the caller
 * re-encodes the decoded rows, which resolves the schema difference).
 */
import type { PromptGroup } from '../../processors/types.js';
import type { AvroBodyCodec } from './codec.js';
import { avroLong, HEADER_BYTES, readSchemaId, writeHeader } from './wire-format.js';

export function assembleGroupValue(
  group: PromptGroup,
  rowPayloads: Uint8Array[],
  rowSchemaId: number,
  groupBodyCodec: AvroBodyCodec<'groupComplete'>,
  groupSchemaId: number,
): Buffer | null {
  for (const p of rowPayloads) {
    if (p.length <= HEADER_BYTES + 1 || readSchemaId(p) !== rowSchemaId || p[HEADER_BYTES] !== 0) return null;
  }
  const head = groupBodyCodec.encodeBody({ ...group, rows: [] });
  const prefix = head.subarray(0, head.length - 1);
  const count = avroLong(rowPayloads.length);
  let size = HEADER_BYTES + prefix.length + count.length + 1;
  for (const p of rowPayloads) size += p.length - HEADER_BYTES - 1;
  const out = Buffer.allocUnsafe(size);
  writeHeader(out, groupSchemaId);
  let at = HEADER_BYTES;
  at += prefix.copy(out, at);
  out.set(count, at);
  at += count.length;
  for (const p of rowPayloads) {
    out.set(p.subarray(HEADER_BYTES + 1), at);
    at += p.length - HEADER_BYTES - 1;
  }
  out[at] = 0;
  return out;
}

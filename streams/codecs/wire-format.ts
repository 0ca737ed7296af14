/**
 * Confluent wire format: byte 0 = magic 0, bytes 1–4 = schema id (big-endian
 * int32), then the Avro binary body. Every topic value of SPEC §1 uses it.
 *
 *   value := 0x00 schema_id:int32be avro_body
 */
import { RolloutStreamError } from '../../errors/index.js';

export const MAGIC_BYTE = 0;
export const HEADER_BYTES = 5;

/** A value that cannot be decoded; it becomes an `undecodable` dead letter. */
export class UndecodableError extends RolloutStreamError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('undecodable', message, options);
  }
}

/** Reads the schema id of a framed value, or throws UndecodableError. */
export function readSchemaId(value: Uint8Array): number {
  if (value.length < HEADER_BYTES) {
    throw new UndecodableError(`value of ${value.length} bytes is shorter than the 5-byte Confluent header`);
  }
  if (value[0] !== MAGIC_BYTE) {
    throw new UndecodableError(`unknown magic byte ${value[0]} (expected 0: Confluent wire format)`);
  }
  return new DataView(value.buffer, value.byteOffset, value.byteLength).getInt32(1, false);
}

/** Writes the 5-byte header into `target` at offset 0. */
export function writeHeader(target: Uint8Array, schemaId: number): void {
  target[0] = MAGIC_BYTE;
  new DataView(target.buffer, target.byteOffset, target.byteLength).setInt32(1, schemaId, false);
}

/** The Avro encoding of an `int` or `long`: zigzag, then base-128 varint, low group first. */
export function avroLong(value: number): Uint8Array {
  const out: number[] = [];
  let z = value >= 0 ? BigInt(value) * 2n : -BigInt(value) * 2n - 1n;
  while (z >= 0x80n) {
    out.push(Number(z & 0x7fn) | 0x80);
    z >>= 7n;
  }
  out.push(Number(z));
  return Uint8Array.from(out);
}

/** The Avro encoding of an optional long (`["null", "long"]`): the branch index, then the value. */
function optionalLongBytes(value: number | null | undefined): Uint8Array {
  if (value === null || value === undefined) return Uint8Array.of(0);
  return Uint8Array.of(2, ...avroLong(value)); // branch 1, zigzag-encoded
}

/**
 * The bytes that identify a row-completed record's content for replay
 * detection (SPEC §3 rule 3: identical content ignoring only `produced_at`):
 * the Avro body without the header (so the schema id does not matter) and
 * without its trailing `produced_at`, which is the last field of both
 * `RolloutRow` and `GymResult` in every version of the schema. When the tail
 * is not the expected encoding of `producedAt` (a foreign writer), the whole
 * body is the identity. A view, no copy.
 */
export function replayIdentity(value: Uint8Array, producedAt: number | null | undefined): Uint8Array {
  const tail = optionalLongBytes(producedAt);
  const end = value.length - tail.length;
  if (end < HEADER_BYTES) return value.subarray(HEADER_BYTES);
  for (let i = 0; i < tail.length; i++) if (value[end + i] !== tail[i]) return value.subarray(HEADER_BYTES);
  return value.subarray(HEADER_BYTES, end);
}

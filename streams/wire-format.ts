/**
 * Confluent wire format: byte 0 = magic 0, bytes 1–4 = schema id (big-endian
 * int32), then the Avro binary body. Every topic value of SPEC §1 uses it.
 *
 *   value := 0x00 schema_id:int32be avro_body
 */
import { RolloutStreamError } from '../processors/errors.js';

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

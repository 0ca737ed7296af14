/**
 * Writes framed `PackedGroup` values whose tensor bytes sit at aligned
 * positions, so a consumer can view them in place (zero-copy numpy arrays and
 * torch tensors) instead of copying each field out of the record.
 *
 * Avro puts no padding before a `bytes` value: a field's `values` start
 * wherever the strings before them end. `PackedField.pad` (0–63 zero bytes,
 * just before `values`) moves each `values` to a multiple of
 * {@link VALUES_ALIGNMENT} bytes of the framed value (Confluent header
 * included). Decoders skip `pad`; readers of the schema without it resolve
 * it away.
 *
 * The body is assembled here rather than by `Type.toBuffer`: avsc encodes
 * everything but the tensor bytes (the group header, and each field with
 * empty `pad` and `values`), and the tensor bytes are copied once, straight
 * into the output. The result is the same Avro binary `toBuffer` writes for
 * the same object with those pads (checked by test/unit/codec/packed-writer.test.ts).
 *
 *   body   = prefix  count  field*  0x00         (one array block of fields)
 *   field  = head  len(pad) pad  len(values) values
 */
import type avro from 'avsc';
import { HEADER_BYTES, writeHeader } from './wire-format.js';

/* eslint-disable @typescript-eslint/no-explicit-any */

/** `values` start at a multiple of this many bytes of the framed value (a cache line; ≥ any dtype's size). */
export const VALUES_ALIGNMENT = 64;

const EMPTY = Buffer.alloc(0);

/** Bytes of the zigzag varint of a non-negative `n` (n < 2^53). */
function varintSize(n: number): number {
  let z = n * 2; // zigzag of a non-negative number
  let size = 1;
  while (z >= 0x80) {
    z = Math.floor(z / 0x80);
    size++;
  }
  return size;
}

function writeVarint(out: Uint8Array, pos: number, n: number): number {
  let z = n * 2;
  while (z >= 0x80) {
    out[pos++] = (z % 0x80) | 0x80;
    z = Math.floor(z / 0x80);
  }
  out[pos++] = z;
  return pos;
}

interface FieldPart {
  head: Uint8Array;
  pad: number;
  values: Uint8Array;
}

/**
 * The framed value (header + Avro body) of `obj`, an Avro-form PackedGroup
 * (see `packedToAvro`) written with `type`, every `values` aligned.
 */
export function encodeAlignedPacked(type: avro.Type, obj: Record<string, any>, schemaId: number): Buffer {
  const fields: Array<Record<string, any>> = obj.fields;
  const withoutFields = type.toBuffer({ ...obj, fields: [] });
  if (fields.length === 0) {
    const out = Buffer.allocUnsafe(HEADER_BYTES + withoutFields.length);
    writeHeader(out, schemaId);
    out.set(withoutFields, HEADER_BYTES);
    return out;
  }
  // withoutFields ends with the empty array's terminator; the prefix is what precedes it.
  const prefix = withoutFields.subarray(0, withoutFields.length - 1);
  const fieldType = (type as avro.types.RecordType).field('fields').type as avro.types.ArrayType;
  const itemType = fieldType.itemsType;
  let pos = HEADER_BYTES + prefix.length + varintSize(fields.length);
  const parts: FieldPart[] = [];
  for (const f of fields) {
    const bare = itemType.toBuffer({ ...f, pad: EMPTY, values: EMPTY });
    // The bare field ends with two zero lengths (pad, values); the head precedes them.
    const head = bare.subarray(0, bare.length - 2);
    const values: Uint8Array = f.values;
    const before = pos + head.length + 1 + varintSize(values.length); // pad length is one byte (pad ≤ 63)
    const pad = (VALUES_ALIGNMENT - (before % VALUES_ALIGNMENT)) % VALUES_ALIGNMENT;
    parts.push({ head, pad, values });
    pos = before + pad + values.length;
  }
  const out = Buffer.allocUnsafe(pos + 1);
  writeHeader(out, schemaId);
  let p = HEADER_BYTES;
  out.set(prefix, p);
  p = writeVarint(out, p + prefix.length, fields.length);
  for (const { head, pad, values } of parts) {
    out.set(head, p);
    p = writeVarint(out, p + head.length, pad);
    out.fill(0, p, p + pad);
    p = writeVarint(out, p + pad, values.length);
    out.set(values, p);
    p += values.length;
  }
  out[p] = 0; // end of the fields array
  return out;
}

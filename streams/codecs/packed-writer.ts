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
 * empty `pad` and `values`); `layOutAligned` places them and every field's
 * values, `writeAlignedFrame` writes all but the values, and the values are
 * written once, straight into their place — copied from the packed group
 * (`encodeAlignedPacked`), or by the packer itself before anything else
 * (`framed-pack-target.ts`). The result is the same Avro binary `toBuffer`
 * writes for the same object with those pads (checked by
 * test/unit/codec/packed-writer.test.ts).
 *
 *   value  = header(5)  body
 *   body   = prefix  count  field*  0x00         (one array block of fields)
 *   field  = head  len(pad) pad  len(values) values
 *
 * A group without fields is the plain encoding (`prefix` is then the whole
 * body, with its empty array).
 */
import type avro from 'avsc';
import type { PackedGroup } from '../../processors/types.js';
import { type PackedWire, type WireValues, fieldHeadToAvro, packedHeaderToAvro, wireValues } from './packed-mapping.js';
import { HEADER_BYTES, writeHeader } from './wire-format.js';

/* eslint-disable @typescript-eslint/no-explicit-any */

/** `values` start at a multiple of this many bytes of the framed value (a cache line; ≥ any dtype's size). */
export const VALUES_ALIGNMENT = 64;

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

/** Where one field sits in the framed value: its head, its pad, and the position and length of its values. */
export interface PlacedField {
  head: Uint8Array;
  pad: number;
  /** Offset of the values in the framed value (a multiple of VALUES_ALIGNMENT). */
  at: number;
  byteLength: number;
}

/** The framed value laid out: its size and everything but the values. */
export interface AlignedLayout {
  size: number;
  /** The body up to the fields array (the whole body when there are no fields). */
  prefix: Uint8Array;
  fields: PlacedField[];
}

/**
 * Lays out the framed value of `header` (an Avro-form PackedGroup without
 * fields, see `packedHeaderToAvro`) and `heads` (each field's Avro form with
 * empty pad and values, `fieldHeadToAvro`) whose values will be
 * `valueLengths[i]` bytes, every values 64-byte aligned.
 */
export function layOutAligned(type: avro.Type, header: Record<string, any>, heads: Record<string, any>[], valueLengths: readonly number[]): AlignedLayout {
  const withoutFields = type.toBuffer({ ...header, fields: [] });
  if (heads.length === 0) return { size: HEADER_BYTES + withoutFields.length, prefix: withoutFields, fields: [] };
  // withoutFields ends with the empty array's terminator; the prefix is what precedes it.
  const prefix = withoutFields.subarray(0, withoutFields.length - 1);
  const itemType = ((type as avro.types.RecordType).field('fields').type as avro.types.ArrayType).itemsType;
  let pos = HEADER_BYTES + prefix.length + varintSize(heads.length);
  const fields = heads.map((f, i): PlacedField => {
    // The bare field ends with two zero lengths (pad, values); the head precedes them.
    const bare = itemType.toBuffer(f);
    const head = bare.subarray(0, bare.length - 2);
    const byteLength = valueLengths[i]!;
    const before = pos + head.length + 1 + varintSize(byteLength); // pad length is one byte (pad ≤ 63)
    const pad = (VALUES_ALIGNMENT - (before % VALUES_ALIGNMENT)) % VALUES_ALIGNMENT;
    pos = before + pad + byteLength;
    return { head, pad, at: before + pad, byteLength };
  });
  return { size: pos + 1, prefix, fields };
}

/** Writes the header and everything of `layout` but the values into `out` (`layout.size` bytes); the values' bytes are left as they are. */
export function writeAlignedFrame(out: Uint8Array, layout: AlignedLayout, schemaId: number): void {
  writeHeader(out, schemaId);
  out.set(layout.prefix, HEADER_BYTES);
  if (layout.fields.length === 0) return;
  let p = writeVarint(out, HEADER_BYTES + layout.prefix.length, layout.fields.length);
  for (const { head, pad, byteLength } of layout.fields) {
    out.set(head, p);
    p = writeVarint(out, p + head.length, pad);
    out.fill(0, p, p + pad);
    p = writeVarint(out, p + pad, byteLength);
    p += byteLength;
  }
  out[p] = 0; // end of the fields array
}

/** Memory for a framed value of `bytes` bytes (contents unspecified); `Buffer.allocUnsafe` by default. */
export type ValueMemory = (bytes: number) => ArrayBuffer;

/**
 * The framed value (header + Avro body) of packed group `g` written with
 * `type`, every `values` aligned and in `wire` dtypes: one copy (or one
 * narrowing pass) of each field's values into the output. With `memory`, the
 * value is the first `size` bytes of the buffer it returns.
 */
export function encodeAlignedPacked(type: avro.Type, g: PackedGroup, wire: PackedWire, schemaId: number, memory?: ValueMemory): Buffer {
  const values: WireValues[] = g.fields.map((f) => wireValues(f, wire));
  const layout = layOutAligned(
    type,
    packedHeaderToAvro(g),
    g.fields.map((f, i) => fieldHeadToAvro(f, values[i]!.wire_dtype)),
    values.map((v) => v.byteLength),
  );
  const out = memory === undefined ? Buffer.allocUnsafe(layout.size) : Buffer.from(memory(layout.size), 0, layout.size);
  writeAlignedFrame(out, layout, schemaId);
  layout.fields.forEach((f, i) => values[i]!.write(out.subarray(f.at, f.at + f.byteLength)));
  return out;
}

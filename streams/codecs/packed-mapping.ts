/**
 * PackedGroup ↔ Avro object. The trainer dtype of a field is in `dtype`, the
 * element type of its `values` in `wire_dtype`. With the `trainer` wire (the
 * default) they are equal, so a decoder can view the bytes in place. With the
 * `narrow` wire, `values` travel narrower when every value fits, and decoders
 * widen back exactly:
 *
 *   bool                → uint8 (0/1)
 *   int64 (all 0..255)  → uint8      e.g. token_mask
 *   int64 (fits int32)  → int32      e.g. input_ids, prompt_ids_for_adv
 *   int16/int32 (all 0..255 or all -128..127) → uint8/int8   e.g. routed_experts
 *   int32 (fits int16)  → int16
 *   anything else       → unchanged
 *   object              → UTF-8 JSON text of the value list
 *
 * int64 data is read through an Int32Array view of its low/high words, which
 * avoids a BigInt per element.
 */
import type { DType, PackedField, PackedGroup, PackedRowTags, TypedArray } from '../../processors/types.js';
import { bytesOf, isDType, typedArrayFrom } from './tensor-bytes.js';
import { TYPED_ARRAY_CLASSES } from '../../processors/typed-arrays.js';
import { UndecodableError } from './wire-format.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type AvroObject = Record<string, any>;

function int64Words(values: BigInt64Array): Int32Array {
  return new Int32Array(values.buffer, values.byteOffset, values.length * 2);
}

/** Smallest exact wire dtype for int64 values: uint8, int32 or int64. */
function narrowInt64(values: BigInt64Array): 'uint8' | 'int32' | 'int64' {
  const w = int64Words(values);
  let fitsU8 = true;
  for (let i = 0; i < w.length; i += 2) {
    const lo = w[i]!;
    const hi = w[i + 1]!;
    if (hi !== (lo >> 31)) return 'int64';
    if (fitsU8 && (lo < 0 || lo > 255)) fitsU8 = false;
  }
  return fitsU8 ? 'uint8' : 'int32';
}

/** How packed values travel: in the trainer dtypes, or narrowed where every value fits (SPEC §5). */
export type PackedWire = 'trainer' | 'narrow';

const NO_PAD = Buffer.alloc(0);

/**
 * How one field's values travel: their element type on the wire, their byte
 * length, and `write`, which puts exactly those bytes into `out` (a slot of
 * `byteLength` bytes, e.g. inside the framed value being built). `bytes` is
 * set when the wire bytes already exist as they are (no narrowing): then
 * `write` is a plain copy of them.
 */
export interface WireValues {
  wire_dtype: string;
  byteLength: number;
  bytes: Uint8Array | null;
  write(out: Uint8Array): void;
}

function asIs(wire_dtype: string, bytes: Uint8Array): WireValues {
  return { wire_dtype, byteLength: bytes.byteLength, bytes, write: (out) => out.set(bytes) };
}

/** `length` elements of `dtype` written by `fill` into a typed view of `out` (a temporary when `out` is misaligned). */
function converted(wire_dtype: DType, length: number, fill: (dst: TypedArray) => void): WireValues {
  const ctor = TYPED_ARRAY_CLASSES[wire_dtype];
  const byteLength = length * ctor.BYTES_PER_ELEMENT;
  return {
    wire_dtype,
    byteLength,
    bytes: null,
    write(out) {
      if (out.byteOffset % ctor.BYTES_PER_ELEMENT === 0) {
        fill(new ctor(out.buffer as ArrayBuffer, out.byteOffset, length));
        return;
      }
      const tmp = new ctor(length);
      fill(tmp);
      out.set(bytesOf(tmp));
    },
  };
}

/** The wire form of a field's values (`pack.wire_dtypes`). */
export function wireValues(field: PackedField, wire: PackedWire): WireValues {
  if (field.dtype === 'object') return asIs('object', Buffer.from(JSON.stringify(Array.from(field.values as any)), 'utf8'));
  if (wire === 'trainer') return asIs(field.dtype, bytesOf(field.values));
  if (field.dtype === 'bool') return asIs('uint8', bytesOf(field.values));
  if (field.dtype === 'int64') {
    const values = field.values as BigInt64Array;
    const narrow = narrowInt64(values);
    if (narrow === 'int64') return asIs(narrow, bytesOf(values));
    const w = int64Words(values);
    return converted(narrow, values.length, (out) => {
      for (let i = 0, j = 0; i < out.length; i++, j += 2) out[i] = w[j]!;
    });
  }
  if (field.dtype === 'int16' || field.dtype === 'int32') {
    const values = field.values as Int16Array | Int32Array;
    const narrow = narrowSmallInt(values, field.dtype);
    if (narrow === field.dtype) return asIs(narrow, bytesOf(values));
    return converted(narrow, values.length, (out) => (out as Int16Array).set(values));
  }
  return asIs(field.dtype, bytesOf(field.values));
}

/** The wire bytes themselves: a view when they exist as they are, else written into fresh memory. */
function materialize(v: WireValues): Uint8Array {
  if (v.bytes !== null) return v.bytes;
  const out = Buffer.allocUnsafe(v.byteLength);
  v.write(out);
  return out;
}

/** Smallest exact wire dtype for int16/int32 values: uint8, int8, int16 or the dtype itself. */
function narrowSmallInt(values: Int16Array | Int32Array, dtype: 'int16' | 'int32'): 'uint8' | 'int8' | 'int16' | 'int32' {
  let lo = 0;
  let hi = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (v < lo) lo = v;
    else if (v > hi) hi = v;
  }
  if (lo >= 0 && hi <= 255) return 'uint8';
  if (lo >= -128 && hi <= 127) return 'int8';
  if (dtype === 'int32' && lo >= -32768 && hi <= 32767) return 'int16';
  return dtype;
}

/** Widens wire values back to the trainer dtype. */
export function widen(dtype: DType, wireDtype: DType, bytes: Uint8Array): TypedArray {
  const wire = typedArrayFrom(wireDtype, bytes);
  if (wireDtype === dtype || (dtype === 'bool' && wireDtype === 'uint8')) return wire;
  if (dtype === 'int64') {
    const out = new BigInt64Array(wire.length);
    const w = int64Words(out);
    for (let i = 0, j = 0; i < wire.length; i++, j += 2) {
      const v = Number(wire[i]);
      w[j] = v;
      w[j + 1] = v < 0 ? -1 : 0;
    }
    return out;
  }
  const narrower = wireDtype === 'uint8' || wireDtype === 'int8' || (wireDtype === 'int16' && dtype === 'int32');
  if ((dtype === 'int16' || dtype === 'int32') && narrower) {
    const out = new TYPED_ARRAY_CLASSES[dtype](wire.length);
    (out as Int32Array).set(wire as Int16Array);
    return out;
  }
  throw new UndecodableError(`cannot widen wire dtype ${wireDtype} to ${dtype}`);
}

/**
 * A field's Avro record with empty `pad` and `values`: everything the encoder
 * writes before the values (`packed-writer.ts` measures and places it).
 */
export function fieldHeadToAvro(f: Omit<PackedField, 'values'>, wire_dtype: string): AvroObject {
  return {
    name: f.name,
    dtype: f.dtype,
    wire_dtype,
    layout: f.layout,
    shape: f.shape,
    offsets: f.offsets ? bytesOf(f.offsets) : null,
    pad: NO_PAD,
    values: NO_PAD,
  };
}

function fieldToAvro(f: PackedField, wire: PackedWire): AvroObject {
  const v = wireValues(f, wire);
  return { ...fieldHeadToAvro(f, v.wire_dtype), values: materialize(v) };
}

function fieldFromAvro(o: AvroObject): PackedField {
  const offsets = o.offsets ? (typedArrayFrom('int64', o.offsets) as BigInt64Array) : null;
  if (o.dtype === 'object') {
    const list = JSON.parse(Buffer.from(o.values).toString('utf8')) as unknown[];
    return { name: o.name, dtype: 'object', layout: o.layout, shape: o.shape.map(Number), offsets, values: list as any };
  }
  if (!isDType(o.dtype) || !isDType(o.wire_dtype)) {
    throw new UndecodableError(`packed field ${o.name}: unknown dtype ${o.dtype}/${o.wire_dtype}`);
  }
  return {
    name: o.name,
    dtype: o.dtype,
    layout: o.layout,
    shape: o.shape.map(Number),
    offsets,
    values: widen(o.dtype, o.wire_dtype, o.values),
  };
}

function tagsToAvro(t: PackedRowTags): AvroObject {
  return { ...t, row_shapes: t.row_shapes ?? {} };
}

/** The group's Avro record without its fields (`fields: []`): ids and tags. */
export function packedHeaderToAvro(g: Omit<PackedGroup, 'fields'>): AvroObject {
  return {
    group_id: g.group_id,
    batch_id: g.batch_id,
    sample_ids: g.sample_ids,
    tags: g.tags.map(tagsToAvro),
    fields: [],
  };
}

export function packedToAvro(g: PackedGroup, wire: PackedWire = 'trainer'): AvroObject {
  return { ...packedHeaderToAvro(g), fields: g.fields.map((f) => fieldToAvro(f, wire)) };
}

export function packedFromAvro(o: AvroObject): PackedGroup {
  return {
    group_id: o.group_id,
    batch_id: o.batch_id,
    sample_ids: o.sample_ids,
    tags: o.tags.map((t: AvroObject) => ({
      ...t,
      row_shapes: Object.fromEntries(
        Object.entries(t.row_shapes as Record<string, unknown[][]>).map(([k, v]) => [k, v.map((s) => s.map(Number))]),
      ),
    })),
    fields: o.fields.map(fieldFromAvro),
  };
}

/**
 * Typed arrays ↔ little-endian bytes. Tensors travel as raw `bytes` (SPEC §1);
 * on a little-endian host a typed array *is* its wire form, so encoding is a
 * view and decoding is a view whenever the byte offset is aligned to the
 * element size (a copy only when it is not).
 */
import { endianness } from 'node:os';
import { isDType, TYPED_ARRAY_CLASSES } from '../../processors/typed-arrays.js';
import type { DType, TypedArray } from '../../processors/types.js';

if (endianness() !== 'LE') {
  throw new Error('rollout-stream assumes a little-endian host (tensors are little-endian on the wire)');
}

export { isDType };

export function elementSize(dtype: DType): number {
  return TYPED_ARRAY_CLASSES[dtype].BYTES_PER_ELEMENT;
}

/** A Buffer view over the bytes of a typed array (no copy). */
export function bytesOf(array: TypedArray): Buffer {
  return Buffer.from(array.buffer, array.byteOffset, array.byteLength);
}

/**
 * A typed array of `dtype` over `bytes`: a view when aligned, else a copy.
 * Throws RangeError when the byte length is not a multiple of the element size.
 */
export function typedArrayFrom(dtype: DType, bytes: Uint8Array): TypedArray {
  const ctor = TYPED_ARRAY_CLASSES[dtype];
  const size = ctor.BYTES_PER_ELEMENT;
  if (bytes.byteLength % size !== 0) {
    throw new RangeError(`${bytes.byteLength} bytes is not a whole number of ${dtype} elements`);
  }
  if (bytes.byteOffset % size === 0) {
    return new ctor(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength / size);
  }
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new ctor(copy.buffer, 0, bytes.byteLength / size);
}

export function int32From(bytes: Uint8Array): Int32Array {
  return typedArrayFrom('int32', bytes) as Int32Array;
}

export function float32From(bytes: Uint8Array): Float32Array {
  return typedArrayFrom('float32', bytes) as Float32Array;
}

/**
 * The jagged layout of per-token fields (SPEC §5.5; REFERENCE-NOTES 35).
 *
 * A per-token field of N rows is one `values` buffer holding the rows back to
 * back, without padding, plus `offsets` (int64, N+1 entries) in units of the
 * first dimension: row i is `values[offsets[i]·inner, offsets[i+1]·inner)`
 * where inner is the product of the field's `inner_shape`. This is the
 * layout `torch.nested` jagged tensors use, so the trainer wraps the bytes
 * without copying. All per-token fields of a group share one offsets array.
 */
import { elementCount } from './typed-arrays.js';
import type { DType, PackedField, TypedArray } from './types.js';

/**
 * Offsets for rows of the given lengths: N+1 entries, offsets[0] = 0,
 * offsets[i+1] − offsets[i] = lengths[i]. Lengths must be non-negative.
 */
export function jaggedOffsets(lengths: ArrayLike<number>): BigInt64Array {
  const offsets = new BigInt64Array(lengths.length + 1);
  let total = 0;
  for (let i = 0; i < lengths.length; i++) {
    total += lengths[i]!;
    offsets[i + 1] = BigInt(total);
  }
  return offsets;
}

/** A jagged PackedField over an already filled `values` buffer; `innerShape` are the per-token trailing dims. */
export function jaggedField(
  name: string,
  dtype: DType,
  values: TypedArray,
  offsets: BigInt64Array,
  innerShape: number[] = [],
): PackedField {
  return { name, dtype, layout: 'jagged', offsets, shape: innerShape, values };
}

/** A dense PackedField with its full shape. */
export function denseField(name: string, dtype: DType, values: TypedArray, shape: number[]): PackedField {
  return { name, dtype, layout: 'dense', offsets: null, shape, values };
}

/**
 * Row `row` of a jagged field as a view (no copy): `(offsets[row+1] −
 * offsets[row]) × inner` elements.
 *
 * @throws Error when the field is dense or `row` is out of range.
 */
export function jaggedRow(field: PackedField, row: number): TypedArray {
  const offsets = field.offsets;
  if (field.layout !== 'jagged' || offsets === null) throw new Error(`${field.name} is not jagged`);
  if (row < 0 || row + 1 >= offsets.length) throw new Error(`${field.name}: row ${row} out of range`);
  const inner = elementCount(field.shape);
  return field.values.subarray(Number(offsets[row]!) * inner, Number(offsets[row + 1]!) * inner);
}

/** Row `row` of a dense field whose first dim is N, as a view. */
export function denseRow(field: PackedField, row: number): TypedArray {
  if (field.layout !== 'dense') throw new Error(`${field.name} is not dense`);
  const perRow = elementCount(field.shape.slice(1));
  return field.values.subarray(row * perRow, (row + 1) * perRow);
}

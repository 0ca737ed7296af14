/**
 * The inverse of `packGroup`'s layout: a packed group back into per-row
 * arrays. Used by tests to prove packing loses nothing and by the Python
 * cross-checks as the TypeScript side of the shared vectors.
 */
import { denseRow, jaggedRow } from './jagged-pack.js';
import { elementCount } from './typed-arrays.js';
import type { PackedField, PackedGroup, PackedRowTags, Tensor, TypedArray } from './types.js';

export interface UnpackedRow {
  sample_id: string;
  tags: PackedRowTags;
  /** Jagged non-media fields: this row's values (tokens × inner dims), views into the packed buffers. */
  tokens: Record<string, TypedArray>;
  /** Dense fields: this row's slice (shape without the first dim), views. */
  dense: Record<string, TypedArray>;
  /** Media fields: this row's segments with their shapes from `row_shapes`. */
  media: Record<string, Tensor[]>;
}

/**
 * Splits every field of `packed` by row: jagged fields by their offsets,
 * dense fields by their first dim, media fields by the offsets and then
 * into segments by the row's `row_shapes` tag.
 *
 * @throws Error when a media row's shapes do not add up to its slice.
 */
export function unpackRows(packed: PackedGroup): UnpackedRow[] {
  const mediaNames = new Set<string>();
  for (const t of packed.tags) for (const name of Object.keys(t.row_shapes)) mediaNames.add(name);
  return packed.sample_ids.map((sample_id, row) => {
    const tags = packed.tags[row]!;
    const out: UnpackedRow = { sample_id, tags, tokens: {}, dense: {}, media: {} };
    for (const f of packed.fields) {
      if (mediaNames.has(f.name)) out.media[f.name] = mediaSegments(f, row, tags.row_shapes[f.name] ?? []);
      else if (f.layout === 'jagged') out.tokens[f.name] = jaggedRow(f, row);
      else out.dense[f.name] = denseRow(f, row);
    }
    return out;
  });
}

function mediaSegments(field: PackedField, row: number, shapes: number[][]): Tensor[] {
  const flat = jaggedRow(field, row);
  const segments: Tensor[] = [];
  let at = 0;
  for (const shape of shapes) {
    const size = elementCount(shape);
    segments.push({ dtype: field.dtype as Tensor['dtype'], shape: [...shape], data: flat.subarray(at, at + size) });
    at += size;
  }
  if (at !== flat.length) throw new Error(`${field.name} row ${row}: shapes cover ${at} of ${flat.length} elements`);
  return segments;
}

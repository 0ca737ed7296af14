/**
 * Media fields (SPEC §5.5–5.6): named tensors on messages (images, audio
 * features…) whose first dim is the item count.
 *
 * Each field becomes one jagged PackedField: every row's segments (one per
 * message carrying the field, in message order) concatenated along dim 0,
 * rows back to back, and each row's true segment shapes in its tags as
 * `<field>__row_shapes`. When all segments of a field agree on their
 * trailing dims those are the field's `inner_shape` and the offsets count
 * dim-0 items; when they do not (dynamic resolution), each segment is
 * flattened, `inner_shape` is [] and the offsets count elements — the same
 * bytes either way, and the reference's wire form in the second case. The
 * row shapes always suffice to cut the segments back out.
 *
 * Planned first (dtype, element count) so the values can live in the
 * group's slab, then written.
 */
import { jaggedField, jaggedOffsets } from './jagged-pack.js';
import { PackError } from './pack-error.js';
import { copyElements, elementCount, matchesDType } from './typed-arrays.js';
import type { DType, Message, PackedField, Tensor, TypedArray } from './types.js';

export interface MediaFieldPlan {
  name: string;
  dtype: DType;
  /** Trailing dims shared by every segment, or null when they differ. */
  trailing: number[] | null;
  /** Total elements over the group. */
  elements: number;
}

export interface MediaPack {
  /** One jagged field per media name, names sorted. */
  fields: PackedField[];
  /** Per row: media name → this row's segment shapes ([] when the row has none of it). */
  rowShapes: Record<string, number[][]>[];
}

/**
 * The media fields of the group's message logs, sorted by name.
 *
 * @throws PackError `pack_bad_media` for a rank-0 tensor, data whose length or
 *   array type does not match its shape and dtype, or one name used with two dtypes.
 */
export function planMediaFields(messageLogs: readonly (readonly Message[])[]): MediaFieldPlan[] {
  const plans = new Map<string, MediaFieldPlan>();
  messageLogs.forEach((log, row) => {
    for (const m of log) {
      if (m.media == null) continue;
      for (const [name, t] of Object.entries(m.media)) planSegment(plans, name, t, row);
    }
  });
  return [...plans.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * Writes the planned media fields; `values[k]` must hold `plans[k].elements`
 * elements of `plans[k].dtype` and is entirely overwritten.
 */
export function writeMediaFields(
  messageLogs: readonly (readonly Message[])[],
  plans: readonly MediaFieldPlan[],
  values: readonly TypedArray[],
): MediaPack {
  const rowShapes = messageLogs.map(() => {
    const shapes: Record<string, number[][]> = {};
    for (const p of plans) shapes[p.name] = [];
    return shapes;
  });
  const fields = plans.map((plan, k) => {
    const out = values[k]!;
    const lengths = new Array<number>(messageLogs.length).fill(0);
    let at = 0;
    messageLogs.forEach((log, row) => {
      for (const m of log) {
        const t = m.media?.[plan.name];
        if (t == null) continue;
        copyElements(out, at, t.data);
        at += t.data.length;
        lengths[row]! += plan.trailing === null ? t.data.length : t.shape[0]!;
        rowShapes[row]![plan.name]!.push([...t.shape]);
      }
    });
    return jaggedField(plan.name, plan.dtype, out, jaggedOffsets(lengths), plan.trailing ?? []);
  });
  return { fields, rowShapes };
}

function planSegment(plans: Map<string, MediaFieldPlan>, name: string, t: Tensor, row: number): void {
  if (t.shape.length === 0 || !matchesDType(t.data, t.dtype) || t.data.length !== elementCount(t.shape)) {
    throw new PackError('pack_bad_media', `media ${name}: data does not match shape [${t.shape.join(', ')}] and dtype ${t.dtype}`, row);
  }
  const plan = plans.get(name);
  if (plan === undefined) {
    plans.set(name, { name, dtype: t.dtype, trailing: t.shape.slice(1), elements: t.data.length });
    return;
  }
  if (plan.dtype !== t.dtype) {
    throw new PackError('pack_bad_media', `media ${name}: dtype ${t.dtype} differs from ${plan.dtype} seen earlier in the group`, row);
  }
  plan.elements += t.data.length;
  if (plan.trailing !== null && !sameTrailing(plan.trailing, t.shape)) plan.trailing = null;
}

function sameTrailing(trailing: readonly number[], shape: readonly number[]): boolean {
  if (shape.length !== trailing.length + 1) return false;
  for (let i = 0; i < trailing.length; i++) if (trailing[i] !== shape[i + 1]) return false;
  return true;
}

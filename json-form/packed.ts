/**
 * Packed groups in the JSON form (SPEC §9): fields as
 * `{"dtype", "layout", "offsets" + "inner_shape" | "shape", "values"}`, row
 * tags with their `<field>__row_shapes` keys flattened in.
 */
import type { JsonObject, PackedField, PackedGroup, PackedRowTags } from '../processors/types.js';
import { buildTypedArray, JsonFormError, requireObject, typedToJson } from './values.js';

const ROW_SHAPES_SUFFIX = '__row_shapes';

function tagsToJson(t: PackedRowTags): JsonObject {
  const o: JsonObject = {
    weight_version: t.weight_version,
    prompt_idx: t.prompt_idx,
    group_id: t.group_id,
    num_invalid_tool_calls: t.num_invalid_tool_calls,
    num_malformed_thinking: t.num_malformed_thinking,
    num_assistant_messages: t.num_assistant_messages,
    num_routed_experts_backfilled: t.num_routed_experts_backfilled,
  };
  for (const [field, shapes] of Object.entries(t.row_shapes)) o[field + ROW_SHAPES_SUFFIX] = shapes;
  return o;
}

function tagsFromJson(v: unknown): PackedRowTags {
  const o = requireObject(v, 'packed tag');
  const row_shapes: Record<string, number[][]> = {};
  for (const [k, shapes] of Object.entries(o)) {
    if (k.endsWith(ROW_SHAPES_SUFFIX)) row_shapes[k.slice(0, -ROW_SHAPES_SUFFIX.length)] = shapes as number[][];
  }
  return {
    weight_version: o.weight_version as number,
    prompt_idx: o.prompt_idx as number,
    group_id: o.group_id as string,
    num_invalid_tool_calls: o.num_invalid_tool_calls as number,
    num_malformed_thinking: o.num_malformed_thinking as number,
    num_assistant_messages: o.num_assistant_messages as number,
    num_routed_experts_backfilled: o.num_routed_experts_backfilled as number,
    row_shapes,
  };
}

function fieldToJson(f: PackedField): JsonObject {
  const dtype = f.dtype === 'object' ? 'float64' : f.dtype;
  const values = typedToJson(dtype, f.values);
  if (f.layout === 'jagged') {
    const offsets = f.offsets ? Array.from(f.offsets, Number) : [];
    return { dtype: f.dtype, layout: 'jagged', offsets, inner_shape: [...f.shape], values };
  }
  return { dtype: f.dtype, layout: 'dense', shape: [...f.shape], values };
}

function fieldFromJson(name: string, v: unknown): PackedField {
  const o = requireObject(v, `packed field ${name}`);
  const dtype = o.dtype as PackedField['dtype'];
  const values = Array.isArray(o.values) ? buildTypedArray(dtype === 'object' ? 'float64' : dtype, o.values) : null;
  if (!values) throw new JsonFormError(`packed field ${name} has values that are not ${String(dtype)}`);
  if (o.layout === 'jagged') {
    const offsets = Array.isArray(o.offsets) ? (buildTypedArray('int64', o.offsets) as BigInt64Array | null) : null;
    if (!offsets) throw new JsonFormError(`jagged packed field ${name} needs integer offsets`);
    return { name, dtype, layout: 'jagged', offsets, shape: (o.inner_shape ?? []) as number[], values };
  }
  if (o.layout !== 'dense') throw new JsonFormError(`packed field ${name} has layout ${JSON.stringify(o.layout)}`);
  return { name, dtype, layout: 'dense', offsets: null, shape: (o.shape ?? []) as number[], values };
}

export function packedToJson(p: PackedGroup): JsonObject {
  const fields: JsonObject = {};
  for (const f of p.fields) fields[f.name] = fieldToJson(f);
  return { group_id: p.group_id, batch_id: p.batch_id, sample_ids: [...p.sample_ids], tags: p.tags.map(tagsToJson), fields };
}

export function packedFromJson(v: unknown): PackedGroup {
  const o = requireObject(v, 'packed');
  const fields = requireObject(o.fields, 'packed.fields');
  return {
    group_id: o.group_id as string,
    batch_id: o.batch_id as string,
    sample_ids: (o.sample_ids ?? []) as string[],
    tags: Array.isArray(o.tags) ? o.tags.map(tagsFromJson) : [],
    fields: Object.entries(fields).map(([name, f]) => fieldFromJson(name, f)),
  };
}

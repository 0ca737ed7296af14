/**
 * The JSON form of SPEC §9: the records of §2–§5 with their snake_case field
 * names, one JSON object per line, used by `offline`, `replay` printing and
 * test vectors.
 *
 *   row line         := row object | {"batch_end": {batch_id, num_rows}}
 *   other lines      := {"group"|"penalized"|"packed"|"metrics"|"dead_letter": record}
 *   non-finite float := "NaN" | "Infinity" | "-Infinity"
 *   token ids, logprobs   := flat JSON arrays
 *   routed_experts, media := nested arrays (row-major, e.g. [tokens][layers][topk]) when the
 *                            dtype is the default (int32 / float32) and no dim is 0;
 *                            otherwise {"dtype", "shape", "values": [flat]} so the value
 *                            round-trips exactly (a nested [] cannot carry [0, layers, topk])
 *   packed field     := {"dtype", "layout": "jagged", "offsets", "inner_shape", "values"}
 *                     | {"dtype", "layout": "dense", "shape", "values"}; int64 as JSON
 *                       numbers, bool as true/false
 *
 * Reading a row converts tensor arrays only: scalar fields pass through
 * unchanged, even when invalid, because judging a row is accumulate's job
 * (`validateRow`). An array that cannot become its typed array is left as a
 * plain array for the same reason.
 */
import type {
  BatchEnd,
  DeadLetterDecision,
  DType,
  JsonObject,
  JsonValue,
  Message,
  MetricsRecord,
  PackedField,
  PackedGroup,
  PackedRowTags,
  PenalizedGroup,
  PenalizedRow,
  PromptGroup,
  RolloutRow,
  Tensor,
} from '../processors/types.js';
import { isPlainObject } from '../processors/message-validation.js';
import {
  buildTypedArray,
  float32ToJson,
  nestedToTensor,
  numberFromJson,
  numberToJson,
  tensorToNested,
  typedToJson,
} from './json-tensors.js';

/** A JSON line that is not valid JSON or not one of the line shapes of SPEC §9. */
export class JsonFormError extends Error {
  override name = 'JsonFormError';
}

export type JsonLine =
  | { kind: 'row'; record: unknown }
  | { kind: 'batch_end'; end: BatchEnd }
  | { kind: 'group'; group: PromptGroup }
  | { kind: 'penalized'; group: PenalizedGroup }
  | { kind: 'packed'; packed: PackedGroup }
  | { kind: 'metrics'; metrics: MetricsRecord }
  | { kind: 'dead_letter'; deadLetter: DeadLetterDecision };

type Obj = Record<string, unknown>;

const ROUTED_DEFAULT: DType = 'int32';
const MEDIA_DEFAULT: DType = 'float32';

// ---------------------------------------------------------------- tensors

function tensorToJson(t: Tensor, defaultDtype: DType): JsonValue {
  const nested = t.dtype === defaultDtype ? tensorToNested(t) : null;
  return nested ?? { dtype: t.dtype, shape: [...t.shape], values: typedToJson(t.dtype, t.data) };
}

/** A tensor from its JSON form, or the input unchanged when it is not a valid one. */
function tensorFromJson(v: unknown, defaultDtype: DType): unknown {
  if (Array.isArray(v)) return nestedToTensor(v, defaultDtype) ?? v;
  if (isPlainObject(v) && typeof v.dtype === 'string' && Array.isArray(v.shape) && Array.isArray(v.values)) {
    const data = buildTypedArray(v.dtype, v.values);
    return data ? { dtype: v.dtype, shape: v.shape, data } : v;
  }
  return v;
}

// ---------------------------------------------------------------- messages

export function messageToJson(m: Message): JsonObject {
  const o: JsonObject = { role: m.role, token_ids: Array.from(m.token_ids) };
  if (m.generation_logprobs) o.generation_logprobs = Array.from(m.generation_logprobs, float32ToJson);
  if (m.routed_experts) o.routed_experts = tensorToJson(m.routed_experts, ROUTED_DEFAULT);
  if (m.has_malformed_thinking != null) o.has_malformed_thinking = m.has_malformed_thinking;
  if (m.is_invalid_tool_call != null) o.is_invalid_tool_call = m.is_invalid_tool_call;
  if (m.content != null) o.content = m.content;
  if (m.media) {
    const media: JsonObject = {};
    for (const [k, t] of Object.entries(m.media)) media[k] = tensorToJson(t, MEDIA_DEFAULT);
    o.media = media;
  }
  return o;
}

/** Converts the tensor arrays of one JSON message; anything else passes through. */
export function messageFromJson(v: unknown): unknown {
  if (!isPlainObject(v)) return v;
  const m: Obj = { ...v };
  if (Array.isArray(m.token_ids)) m.token_ids = buildTypedArray('int32', m.token_ids) ?? m.token_ids;
  if (Array.isArray(m.generation_logprobs)) {
    m.generation_logprobs = buildTypedArray('float32', m.generation_logprobs) ?? m.generation_logprobs;
  }
  if (m.routed_experts != null) m.routed_experts = tensorFromJson(m.routed_experts, ROUTED_DEFAULT);
  if (isPlainObject(m.media)) {
    const media: Obj = {};
    for (const [k, t] of Object.entries(m.media)) media[k] = tensorFromJson(t, MEDIA_DEFAULT);
    m.media = media;
  }
  return m;
}

function messagesFromJson(v: unknown): unknown {
  return Array.isArray(v) ? v.map(messageFromJson) : v;
}

// ---------------------------------------------------------------- rows and groups

export function rowToJson(r: RolloutRow): JsonObject {
  const o: JsonObject = {
    batch_id: r.batch_id,
    group_id: r.group_id,
    group_index: r.group_index,
    row_index: r.row_index,
    num_generations: r.num_generations,
    prompt_idx: r.prompt_idx,
  };
  if (r.task_index != null) o.task_index = r.task_index;
  o.agent_ref = r.agent_ref;
  o.weight_version = r.weight_version;
  if (r.instance_label != null) o.instance_label = r.instance_label;
  o.request = r.request;
  o.input_message_log = r.input_message_log.map(messageToJson);
  o.message_log = r.message_log.map(messageToJson);
  o.full_result = r.full_result;
  if (r.timing != null) o.timing = mapNumbersToJson(r.timing);
  if (r.produced_at != null) o.produced_at = r.produced_at;
  return o;
}

/**
 * A row record from its JSON object: message tensors converted, an ISO-8601
 * `produced_at` turned into epoch milliseconds; every other value as given.
 */
export function rowFromJson(v: unknown): unknown {
  if (!isPlainObject(v)) return v;
  const r: Obj = { ...v };
  r.input_message_log = messagesFromJson(r.input_message_log);
  r.message_log = messagesFromJson(r.message_log);
  if (typeof r.produced_at === 'string') {
    const ms = Date.parse(r.produced_at);
    if (!Number.isNaN(ms)) r.produced_at = ms;
  }
  if (isPlainObject(r.timing)) r.timing = mapNumbersFromJson(r.timing);
  return r;
}

export function groupToJson(g: PromptGroup): JsonObject {
  return {
    group_id: g.group_id,
    batch_id: g.batch_id,
    group_index: g.group_index,
    num_generations: g.num_generations,
    prompt_idx: g.prompt_idx,
    task_index: g.task_index,
    rows: g.rows.map(rowToJson),
  };
}

/** A PromptGroup from JSON; its rows are converted but not validated (see `validateRow`). */
export function groupFromJson(v: unknown): PromptGroup {
  const o = requireObject(v, 'group');
  if (!Array.isArray(o.rows)) throw new JsonFormError('group.rows must be a list');
  return {
    group_id: o.group_id as string,
    batch_id: o.batch_id as string,
    group_index: o.group_index as number,
    num_generations: o.num_generations as number,
    prompt_idx: o.prompt_idx as number,
    task_index: (o.task_index ?? null) as number | null,
    rows: o.rows.map(rowFromJson) as RolloutRow[],
  };
}

// ---------------------------------------------------------------- penalized

function penalizedRowToJson(r: PenalizedRow): JsonObject {
  return {
    row_index: r.row_index,
    total_reward: numberToJson(r.total_reward),
    original_reward: numberToJson(r.original_reward),
    truncated: r.truncated,
    mask_sample: r.mask_sample,
    reward_components: r.reward_components ? mapNumbersToJson(r.reward_components) : null,
    violation_counts: { ...r.violation_counts },
    agent_ref: r.agent_ref,
    weight_version: r.weight_version,
    message_log: r.message_log.map(messageToJson),
  };
}

function penalizedRowFromJson(v: unknown): PenalizedRow {
  const o = requireObject(v, 'penalized row');
  return {
    row_index: o.row_index as number,
    total_reward: numberFromJson(o.total_reward) as number,
    original_reward: numberFromJson(o.original_reward) as number,
    truncated: o.truncated as boolean,
    mask_sample: (o.mask_sample ?? null) as boolean | null,
    reward_components: isPlainObject(o.reward_components) ? mapNumbersFromJson(o.reward_components) : null,
    violation_counts: { ...(o.violation_counts as PenalizedRow['violation_counts']) },
    agent_ref: o.agent_ref as JsonObject,
    weight_version: o.weight_version as number,
    message_log: messagesFromJson(o.message_log) as Message[],
  };
}

export function penalizedToJson(g: PenalizedGroup): JsonObject {
  return {
    group_id: g.group_id,
    batch_id: g.batch_id,
    group_index: g.group_index,
    num_generations: g.num_generations,
    prompt_idx: g.prompt_idx,
    weight_version: g.weight_version,
    task_index: g.task_index,
    prompt: g.prompt.map(messageToJson),
    reward_component_names: [...g.reward_component_names],
    rows: g.rows.map(penalizedRowToJson),
    metrics: mapNumbersToJson(g.metrics),
  };
}

export function penalizedFromJson(v: unknown): PenalizedGroup {
  const o = requireObject(v, 'penalized');
  if (!Array.isArray(o.rows)) throw new JsonFormError('penalized.rows must be a list');
  return {
    group_id: o.group_id as string,
    batch_id: o.batch_id as string,
    group_index: o.group_index as number,
    num_generations: o.num_generations as number,
    prompt_idx: o.prompt_idx as number,
    weight_version: o.weight_version as number,
    task_index: (o.task_index ?? null) as number | null,
    prompt: messagesFromJson(o.prompt) as Message[],
    reward_component_names: (o.reward_component_names ?? []) as string[],
    rows: o.rows.map(penalizedRowFromJson),
    metrics: isPlainObject(o.metrics) ? mapNumbersFromJson(o.metrics) : {},
  };
}

// ---------------------------------------------------------------- packed

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

// ---------------------------------------------------------------- metrics and dead letters

export function metricsToJson(m: MetricsRecord): JsonObject {
  const o: JsonObject = { scope: m.scope };
  if (m.group_id !== null) o.group_id = m.group_id;
  o.batch_id = m.batch_id;
  o.values = mapNumbersToJson(m.values);
  return o;
}

export function metricsFromJson(v: unknown): MetricsRecord {
  const o = requireObject(v, 'metrics');
  if (o.scope !== 'group' && o.scope !== 'batch') throw new JsonFormError('metrics.scope must be "group" or "batch"');
  return {
    scope: o.scope,
    group_id: (o.group_id ?? null) as string | null,
    batch_id: o.batch_id as string,
    values: isPlainObject(o.values) ? mapNumbersFromJson(o.values) : {},
  };
}

/** The JSON dead letter of SPEC §9; the raw payloads are not part of the JSON form. */
export function deadLetterToJson(d: DeadLetterDecision): JsonObject {
  return {
    reason: d.reason,
    message: d.message,
    group_id: d.group_id,
    row_indices: [...d.row_indices],
    missing_row_indices: [...d.missing_row_indices],
  };
}

export function deadLetterFromJson(v: unknown): DeadLetterDecision {
  const o = requireObject(v, 'dead_letter');
  return {
    reason: o.reason as DeadLetterDecision['reason'],
    message: String(o.message ?? ''),
    group_id: (o.group_id ?? null) as string | null,
    batch_id: (o.batch_id ?? null) as string | null,
    row_indices: (o.row_indices ?? []) as number[],
    missing_row_indices: (o.missing_row_indices ?? []) as number[],
    payloads: [],
  };
}

// ---------------------------------------------------------------- lines

/**
 * Parses one line of the JSON form. A `{"batch_end": …}` line, a line with
 * exactly one of the record keys, or else a plain row object (returned
 * unvalidated as `record`). Throws JsonFormError for invalid JSON, a
 * non-object line, or a record key whose value is malformed.
 */
export function parseJsonLine(line: string): JsonLine {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (cause) {
    throw new JsonFormError(`not valid JSON: ${(cause as Error).message}`);
  }
  if (!isPlainObject(value)) throw new JsonFormError('a line must be a JSON object');
  const keys = Object.keys(value);
  const only = keys.length === 1 ? keys[0] : undefined;
  switch (only) {
    case 'batch_end': {
      const end = requireObject(value.batch_end, 'batch_end');
      if (typeof end.batch_id !== 'string') throw new JsonFormError('batch_end.batch_id must be a string');
      return { kind: 'batch_end', end: { batch_id: end.batch_id, num_rows: Number(end.num_rows ?? 0) } };
    }
    case 'group':
      return { kind: 'group', group: groupFromJson(value.group) };
    case 'penalized':
      return { kind: 'penalized', group: penalizedFromJson(value.penalized) };
    case 'packed':
      return { kind: 'packed', packed: packedFromJson(value.packed) };
    case 'metrics':
      return { kind: 'metrics', metrics: metricsFromJson(value.metrics) };
    case 'dead_letter':
      return { kind: 'dead_letter', deadLetter: deadLetterFromJson(value.dead_letter) };
    default:
      return { kind: 'row', record: rowFromJson(value) };
  }
}

/** One output line (no trailing newline) for a record of the JSON form. */
export function formatJsonLine(line: Exclude<JsonLine, { kind: 'row' }> | { kind: 'row'; record: RolloutRow }): string {
  switch (line.kind) {
    case 'row':
      return JSON.stringify(rowToJson(line.record));
    case 'batch_end':
      return JSON.stringify({ batch_end: { batch_id: line.end.batch_id, num_rows: line.end.num_rows } });
    case 'group':
      return JSON.stringify({ group: groupToJson(line.group) });
    case 'penalized':
      return JSON.stringify({ penalized: penalizedToJson(line.group) });
    case 'packed':
      return JSON.stringify({ packed: packedToJson(line.packed) });
    case 'metrics':
      return JSON.stringify({ metrics: metricsToJson(line.metrics) });
    case 'dead_letter':
      return JSON.stringify({ dead_letter: deadLetterToJson(line.deadLetter) });
  }
}

// ---------------------------------------------------------------- helpers

function requireObject(v: unknown, what: string): Obj {
  if (!isPlainObject(v)) throw new JsonFormError(`${what} must be a JSON object`);
  return v;
}

function mapNumbersToJson(m: Record<string, number>): JsonObject {
  const o: JsonObject = {};
  for (const [k, x] of Object.entries(m)) o[k] = numberToJson(x);
  return o;
}

/** Map values that are numbers or non-finite strings become numbers; anything else stays as given. */
function mapNumbersFromJson(m: Obj): Record<string, number> {
  const o: Record<string, number> = {};
  for (const [k, x] of Object.entries(m)) o[k] = (numberFromJson(x) ?? x) as number;
  return o;
}

/**
 * Messages, rows and groups in the JSON form (SPEC §9; layout in json-form.ts).
 * Reading converts tensor arrays only and passes scalar fields through,
 * even invalid ones, so that accumulate's `validateRow` judges them.
 */
import { jsonGymResult } from '../processors/gym-columns.js';
import { isPlainObject } from '../processors/message-validation.js';
import type { DType, GymResult, JsonObject, JsonValue, Message, PromptGroup, RolloutRow, Tensor } from '../processors/types.js';
import {
  buildTypedArray,
  float32ToJson,
  JsonFormError,
  mapNumbersFromJson,
  mapNumbersToJson,
  nestedToTensor,
  requireObject,
  tensorToNested,
  typedToJson,
} from './values.js';

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

export function messagesFromJson(v: unknown): unknown {
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

/** An ISO-8601 `produced_at` as epoch milliseconds and `timing` numbers from the JSON form, in place. */
function identityFromJson(r: Obj): Obj {
  if (typeof r.produced_at === 'string') {
    const ms = Date.parse(r.produced_at);
    if (!Number.isNaN(ms)) r.produced_at = ms;
  }
  if (isPlainObject(r.timing)) r.timing = mapNumbersFromJson(r.timing);
  return r;
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
  return identityFromJson(r);
}

/** Whether a plain JSON-form object is a GymResult line (SPEC §9): `gym_row` or `gym_result`, and no `message_log`. */
export function isGymResultObject(v: Obj): boolean {
  return ('gym_row' in v || 'gym_result' in v) && !('message_log' in v);
}

/**
 * A GymResult record from its JSON object: `produced_at` and `timing` as for
 * rows; `gym_row` and `gym_result` stay plain JSON (the ingest step reads
 * them, SPEC §2.1); nothing is validated here.
 */
export function gymResultFromJson(v: unknown): unknown {
  return isPlainObject(v) ? identityFromJson({ ...v }) : v;
}

export function gymResultToJson(g: GymResult): JsonObject {
  const o: JsonObject = {
    batch_id: g.batch_id,
    group_id: g.group_id,
    group_index: g.group_index,
    row_index: g.row_index,
    num_generations: g.num_generations,
    prompt_idx: g.prompt_idx,
  };
  if (g.task_index != null) o.task_index = g.task_index;
  o.weight_version = g.weight_version;
  if (g.instance_label != null) o.instance_label = g.instance_label;
  o.gym_row = g.gym_row;
  // Assembled from version 2, token ids and logprobs are typed arrays: printed as lists.
  o.gym_result = jsonGymResult(g.gym_result);
  if (g.timing != null) o.timing = mapNumbersToJson(g.timing);
  if (g.produced_at != null) o.produced_at = g.produced_at;
  return o;
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

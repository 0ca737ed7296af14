/**
 * The JSON form of SPEC §9: the records of §2–§5 with their snake_case field
 * names, one JSON object per line, used by `offline`, `replay` printing and
 * test vectors.
 *
 *   row line         := row object | GymResult object | {"batch_end": {batch_id, num_rows}}
 *   GymResult object := identity fields of §2 + gym_row + gym_result, no message_log (SPEC §2.1)
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
import { isPlainObject } from '../processors/message-validation.js';
import type {
  BatchEnd,
  DeadLetterDecision,
  GymResult,
  JsonObject,
  Message,
  MetricsRecord,
  PackedGroup,
  PenalizedGroup,
  PenalizedRow,
  PromptGroup,
  RolloutRow,
} from '../processors/types.js';
import {
  groupFromJson,
  groupToJson,
  gymResultFromJson,
  gymResultToJson,
  isGymResultObject,
  messagesFromJson,
  messageToJson,
  rowFromJson,
  rowToJson,
} from './messages.js';
import { packedFromJson, packedToJson } from './packed.js';
import { JsonFormError, mapNumbersFromJson, mapNumbersToJson, numberFromJson, numberToJson, requireObject } from './values.js';

export { JsonFormError } from './values.js';
export {
  groupFromJson,
  groupToJson,
  gymResultFromJson,
  gymResultToJson,
  messageFromJson,
  messageToJson,
  rowFromJson,
  rowToJson,
} from './messages.js';
export { packedFromJson, packedToJson } from './packed.js';

export type JsonLine =
  | { kind: 'row'; record: unknown }
  | { kind: 'gym_result'; record: unknown }
  | { kind: 'batch_end'; end: BatchEnd }
  | { kind: 'group'; group: PromptGroup }
  | { kind: 'penalized'; group: PenalizedGroup }
  | { kind: 'packed'; packed: PackedGroup }
  | { kind: 'metrics'; metrics: MetricsRecord }
  | { kind: 'dead_letter'; deadLetter: DeadLetterDecision };

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
 * exactly one of the record keys, a GymResult object (`gym_row`/`gym_result`
 * and no `message_log`), or else a plain row object (both returned
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
      return isGymResultObject(value) ? { kind: 'gym_result', record: gymResultFromJson(value) } : { kind: 'row', record: rowFromJson(value) };
  }
}

/** One output line (no trailing newline) for a record of the JSON form. */
export function formatJsonLine(
  line: Exclude<JsonLine, { kind: 'row' | 'gym_result' }> | { kind: 'row'; record: RolloutRow } | { kind: 'gym_result'; record: GymResult },
): string {
  switch (line.kind) {
    case 'row':
      return JSON.stringify(rowToJson(line.record));
    case 'gym_result':
      return JSON.stringify(gymResultToJson(line.record));
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

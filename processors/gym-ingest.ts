/**
 * GymResult → RolloutRow (SPEC §2.1): the RolloutRow NeMo-RL's NeMo-Gym
 * actor would have built from a raw NeMo-Gym result, so rollout workers can
 * publish what NeMo-Gym returned and leave the message log to the pipeline.
 * Accumulate runs this as a pure step before the §3 rules; `offline ingest`
 * runs it alone.
 *
 * Where §2.1 is silent this follows the reference
 * (`NemoGym._postprocess_nemo_gym_to_nemo_rl_result`): output items that
 * are not objects are carried along untouched and never trainable; the
 * copies of `responses_create_params` and `_ng_task_index` inside
 * `gym_result` are not read. It is stricter where the reference would raise
 * mid-batch or go wrong silently: every malformed column is a row-level
 * `invalid_row` naming the field, and so is a route block whose
 * `[layers, topk]` differs from an earlier item's in the same row (the
 * reference fails on the last-route overwrite; the packer would refuse the
 * whole group).
 */
import { columnsProblem } from './gym-columns.js';
import { buildMessageLog } from './gym-message-log.js';
import { gymResultStructureProblem } from './gym-result-fields.js';
import type { ResolvedIngestConfig } from './ingest-config.js';
import { isAbsent, isPlainObject } from './message-validation.js';
import type { GymResult, JsonObject, JsonValue, RolloutRow } from './types.js';

export { gymResultProblem } from './gym-result-fields.js';

export type IngestRejectReason =
  | 'invalid_row'
  | 'non_contiguous_tokens'
  | 'no_generation_data'
  | 'undecodable'
  | 'row_index_type'
  | 'row_index_out_of_range';

export type IngestOutcome =
  | { ok: true; row: RolloutRow }
  | {
      ok: false;
      reason: IngestRejectReason;
      message: string;
      /** Identity read best-effort from the record, for the dead letter. */
      group_id: string | null;
      batch_id: string | null;
      row_index: number | null;
    };

function reject(reason: IngestRejectReason, message: string, record: unknown): IngestOutcome {
  const r = isPlainObject(record) ? record : {};
  return {
    ok: false,
    reason,
    message,
    group_id: typeof r.group_id === 'string' ? r.group_id : null,
    batch_id: typeof r.batch_id === 'string' ? r.batch_id : null,
    row_index: typeof r.row_index === 'number' && Number.isSafeInteger(r.row_index) ? r.row_index : null,
  };
}

/** `type` of each output item, for the message of a result with nothing to train on. */
function itemTypes(output: readonly JsonValue[]): string {
  const types = output.map((item) => (isPlainObject(item) && typeof item.type === 'string' ? item.type : '?'));
  return `[${types.join(', ')}]`;
}

/**
 * Converts one unvalidated decoded GymResult (from Avro or the JSON form).
 * Pure and total: bad input is a rejection with a reason code, never an
 * exception; the input is not changed (edited parts are copies, untouched
 * parts are shared).
 *
 * Rejections: not an object → `undecodable`; `row_index` not an integer →
 * `row_index_type`, outside its group's range → `row_index_out_of_range`;
 * another identity or structure problem, binary columns that did not fit
 * the JSON (version 2), or a malformed trainable item → `invalid_row`; a prompt that does not extend the earlier turns →
 * `non_contiguous_tokens`; no trainable item → `no_generation_data`.
 *
 * The row: `message_log` built from the trainable items (a user and an
 * assistant message each), `input_message_log` its first message,
 * `request` = `gym_row.responses_create_params`, `agent_ref` =
 * `gym_row.agent_ref`, `full_result` = `gym_result` with the edited items,
 * identity as given, `task_index` the line's or else
 * `gym_row._ng_task_index`. A valid input gives a row that passes
 * `validateRow`; a NaN logprob is left for it to report as `nan_logprobs`.
 */
export function ingestGymResult(record: unknown, cfg: ResolvedIngestConfig): IngestOutcome {
  const problem = gymResultStructureProblem(record);
  if (problem) return reject(problem.reason, problem.message, record);
  // Binary columns that did not fit the JSON when the record was decoded (gym-columns.ts).
  const columns = columnsProblem(record);
  if (columns !== null) return reject('invalid_row', columns, record);
  const g = record as unknown as GymResult;
  const response = g.gym_result.response as JsonObject;
  const output = response.output as JsonValue[];

  const built = buildMessageLog(output, cfg);
  if (!built.ok) return reject(built.reason, built.message, record);
  if (built.messages.length === 0) {
    return reject(
      'no_generation_data',
      `gym_result.response.output has no item with generation_token_ids (${output.length} items, types ${itemTypes(output)})`,
      record,
    );
  }

  const taskIndex = isAbsent(g.task_index) ? g.gym_row._ng_task_index : g.task_index;
  const row: RolloutRow = {
    batch_id: g.batch_id,
    group_id: g.group_id,
    group_index: g.group_index,
    row_index: g.row_index,
    num_generations: g.num_generations,
    prompt_idx: g.prompt_idx,
    ...(isAbsent(taskIndex) ? {} : { task_index: taskIndex as number }),
    agent_ref: g.gym_row.agent_ref as JsonObject,
    weight_version: g.weight_version,
    ...(isAbsent(g.instance_label) ? {} : { instance_label: g.instance_label }),
    request: g.gym_row.responses_create_params as JsonObject,
    input_message_log: built.messages.slice(0, 1),
    message_log: built.messages,
    full_result: { ...g.gym_result, response: { ...response, output: built.output } },
    ...(isAbsent(g.timing) ? {} : { timing: g.timing }),
    ...(isAbsent(g.produced_at) ? {} : { produced_at: g.produced_at }),
  };
  return { ok: true, row };
}

/**
 * Structural checks of a GymResult (SPEC §2.1) before its output items are
 * read: the stream identity of §2, the row-index range, and the JSON the
 * converted row is built from (`gym_row.agent_ref`,
 * `gym_row.responses_create_params`, `gym_result.response.output`).
 *
 * The identity fields follow exactly the rules of a RolloutRow, so they are
 * judged by `validateRow` itself on a stand-in row whose row-only parts are
 * trivially valid: one definition of §2, and the same reason codes and
 * messages for a bad `row_index` whichever form the row arrived in.
 */
import { isAbsent, isPlainObject } from './message-validation.js';
import { validateRow } from './row-validation.js';

export type GymResultRejectReason = 'undecodable' | 'row_index_type' | 'row_index_out_of_range' | 'invalid_row';

export interface GymResultReject {
  reason: GymResultRejectReason;
  message: string;
}

type Fields = Record<string, unknown>;

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

/** Row-only fields a GymResult does not have; valid placeholders for `validateRow`. */
const STAND_IN = { agent_ref: { name: '' }, request: {}, input_message_log: [], message_log: [], full_result: {} };

function objectField(parent: Fields, key: string, path: string): string | null {
  if (isAbsent(parent[key])) return `missing required field ${path}`;
  return isPlainObject(parent[key]) ? null : `${path} must be a JSON object`;
}

/** Why the JSON parts of a GymResult cannot be converted, or null. `r` passed the identity checks. */
function jsonPartsProblem(r: Fields): string | null {
  const rowProblem = objectField(r, 'gym_row', 'gym_row');
  if (rowProblem) return rowProblem;
  const gymRow = r.gym_row as Fields;
  const agentProblem = objectField(gymRow, 'agent_ref', 'gym_row.agent_ref');
  if (agentProblem) return agentProblem;
  if (typeof (gymRow.agent_ref as Fields).name !== 'string') return 'gym_row.agent_ref.name must be a string';
  const requestProblem = objectField(gymRow, 'responses_create_params', 'gym_row.responses_create_params');
  if (requestProblem) return requestProblem;
  // The line's task_index wins; the task row's copy is read only without one.
  if (isAbsent(r.task_index) && !isAbsent(gymRow._ng_task_index) && !isInt(gymRow._ng_task_index)) {
    return 'gym_row._ng_task_index must be an integer when present';
  }
  const resultProblem = objectField(r, 'gym_result', 'gym_result');
  if (resultProblem) return resultProblem;
  const gymResult = r.gym_result as Fields;
  const responseProblem = objectField(gymResult, 'response', 'gym_result.response');
  if (responseProblem) return responseProblem;
  const output = (gymResult.response as Fields).output;
  if (isAbsent(output)) return 'missing required field gym_result.response.output';
  return Array.isArray(output) ? null : 'gym_result.response.output must be a list of output items';
}

/**
 * The first structural problem of a GymResult record with its reason code,
 * or null. Order: not an object → `undecodable`; the identity checks of
 * `validateRow` (`row_index` type and range first); then `gym_row` (an
 * object with `agent_ref.name` a string and `responses_create_params` an
 * object; `_ng_task_index` an integer when the line has no `task_index`) and
 * `gym_result` (an object whose `response.output` is a list) → `invalid_row`.
 */
export function gymResultStructureProblem(record: unknown): GymResultReject | null {
  if (!isPlainObject(record)) return { reason: 'undecodable', message: 'record is not an object' };
  const identity = validateRow({ ...record, ...STAND_IN });
  if (!identity.ok) {
    // A stand-in row has no generated message, so nan_logprobs cannot occur here.
    return { reason: identity.reason as GymResultRejectReason, message: identity.message };
  }
  const problem = jsonPartsProblem(record);
  return problem ? { reason: 'invalid_row', message: problem } : null;
}

/**
 * Publisher-side structural check of a GymResult before sending (SPEC
 * §2.2): null when fine, else a message naming the field. The Python
 * publisher mirrors these rules.
 */
export function gymResultProblem(record: unknown): string | null {
  return gymResultStructureProblem(record)?.message ?? null;
}

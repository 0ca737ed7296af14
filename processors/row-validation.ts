/**
 * Validation of one decoded row-completed record before it may join a group
 * (SPEC §2, §3 rules 1, 2, 7, 8 and `invalid_row`). Everything here depends on
 * the row alone; rules that compare rows (duplicates, consistency, agents,
 * task indices) live in the accumulator.
 */
import { hasNanLogprobs, isAbsent, isPlainObject, messageProblem } from './message-validation.js';
import type { RolloutRow } from './types.js';

/** The row-only reasons `validateRow` can give. */
export type RowRejectReason = 'undecodable' | 'row_index_type' | 'row_index_out_of_range' | 'invalid_row' | 'nan_logprobs';

export type RowValidation =
  | { ok: true; row: RolloutRow }
  | {
      ok: false;
      reason: RowRejectReason;
      message: string;
      /** Identity read best-effort from the record, for the dead letter's key and fields. */
      group_id: string | null;
      batch_id: string | null;
      row_index: number | null;
    };

type Fields = Record<string, unknown>;
type Check = (r: Fields) => string | null;

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

function required(key: string, ok: (v: unknown) => boolean, what: string): Check {
  return (r) => {
    if (isAbsent(r[key])) return `missing required field ${key}`;
    return ok(r[key]) ? null : `${key} must be ${what}`;
  };
}

function optional(key: string, ok: (v: unknown) => boolean, what: string): Check {
  return (r) => (isAbsent(r[key]) || ok(r[key]) ? null : `${key} must be ${what} when present`);
}

const nonEmptyString = (v: unknown) => typeof v === 'string' && v.length > 0;

function messages(key: string): Check {
  return (r) => {
    const list = r[key];
    if (isAbsent(list)) return `missing required field ${key}`;
    if (!Array.isArray(list)) return `${key} must be a list of messages`;
    for (let i = 0; i < list.length; i++) {
      const problem = messageProblem(list[i]);
      if (problem) return `${key}[${i}] ${problem}`;
    }
    return null;
  };
}

const agentRef: Check = (r) => {
  if (isAbsent(r.agent_ref)) return 'missing required field agent_ref';
  if (!isPlainObject(r.agent_ref)) return 'agent_ref must be a JSON object';
  return typeof r.agent_ref.name === 'string' ? null : 'agent_ref.name must be a string';
};

const timing: Check = (r) => {
  if (isAbsent(r.timing)) return null;
  if (!isPlainObject(r.timing)) return 'timing must be a map of numbers when present';
  const bad = Object.entries(r.timing).find(([, v]) => typeof v !== 'number');
  return bad ? `timing.${bad[0]} must be a number` : null;
};

/** Needed before the range check, which is computed from them. */
const GROUP_SHAPE: Check[] = [
  required('num_generations', (v) => isInt(v) && v >= 1, 'an integer >= 1'),
  required('group_index', (v) => isInt(v) && v >= 0, 'a non-negative integer'),
];

const REST: Check[] = [
  required('batch_id', nonEmptyString, 'a non-empty string'),
  required('group_id', nonEmptyString, 'a non-empty string'),
  required('prompt_idx', isInt, 'an integer'),
  optional('task_index', isInt, 'an integer'),
  agentRef,
  required('weight_version', isInt, 'an integer'),
  optional('instance_label', (v) => typeof v === 'string', 'a string'),
  required('request', isPlainObject, 'a JSON object'),
  messages('input_message_log'),
  messages('message_log'),
  required('full_result', isPlainObject, 'a JSON object'),
  timing,
  optional('produced_at', (v) => typeof v === 'number' && Number.isFinite(v), 'epoch milliseconds'),
];

function firstProblem(checks: Check[], r: Fields): string | null {
  for (const check of checks) {
    const problem = check(r);
    if (problem) return problem;
  }
  return null;
}

/**
 * Checks one decoded record and returns it typed as a RolloutRow, or the
 * reason it must be dead-lettered on its own. Order (REFERENCE-NOTES 24,
 * extended): not an object → `undecodable`; `row_index` absent →
 * `invalid_row`, not an integer → `row_index_type`; N or `group_index`
 * unusable → `invalid_row`; `row_index` outside `[group_index*N,
 * group_index*N + N)` (negative included) → `row_index_out_of_range`; any
 * other field problem → `invalid_row`; a NaN logprob in a generated message →
 * `nan_logprobs`. The returned row is the input object itself (no copy).
 */
export function validateRow(record: unknown): RowValidation {
  if (!isPlainObject(record)) {
    return reject('undecodable', 'record is not an object', null);
  }
  const r = record;
  const reject2 = (reason: RowRejectReason, message: string) => reject(reason, message, r);
  if (isAbsent(r.row_index)) return reject2('invalid_row', 'missing required field row_index');
  if (!isInt(r.row_index)) {
    return reject2('row_index_type', `row_index must be an integer, got ${describe(r.row_index)}`);
  }
  const shapeProblem = firstProblem(GROUP_SHAPE, r);
  if (shapeProblem) return reject2('invalid_row', shapeProblem);
  const n = r.num_generations as number;
  const start = (r.group_index as number) * n;
  if (r.row_index < start || r.row_index >= start + n) {
    return reject2(
      'row_index_out_of_range',
      `row_index ${r.row_index} is outside [${start}, ${start + n}) for group_index ${r.group_index} with ${n} generations`,
    );
  }
  const problem = firstProblem(REST, r);
  if (problem) return reject2('invalid_row', problem);
  const row = r as unknown as RolloutRow;
  const nanAt = row.message_log.findIndex(hasNanLogprobs);
  if (nanAt >= 0) return reject2('nan_logprobs', `message_log[${nanAt}] is generated and has a NaN logprob`);
  return { ok: true, row };
}

function reject(reason: RowRejectReason, message: string, r: Fields | null): RowValidation {
  return {
    ok: false,
    reason,
    message,
    group_id: r && typeof r.group_id === 'string' ? r.group_id : null,
    batch_id: r && typeof r.batch_id === 'string' ? r.batch_id : null,
    row_index: r && isInt(r.row_index) ? r.row_index : null,
  };
}

function describe(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  return Array.isArray(value) ? 'a list' : typeof value;
}

/**
 * What a publisher checks before a record may leave the process (SPEC §2.2:
 * "validate a row against §2 before sending and raise a clear error"). The
 * broker is not the first line of defence: a refused record raises a
 * `PublishValidationError` naming the field, and nothing of it is sent.
 *
 * Rows are judged by accumulate's own `validateRow`, so a row the publisher
 * accepts is one accumulate accepts, with one exception: a NaN logprob
 * (`nan_logprobs`) is sent, because the pipeline dead-letters it with the
 * row's bytes kept, which is what an operator wants to find later.
 * GymResults get the structural check of `gymResultProblem`; their full
 * conversion (SPEC §2.1) happens in accumulate.
 */
import avro from 'avsc';
import { RolloutStreamError } from '../../errors/index.js';
import { movesToColumn } from '../../processors/gym-columns.js';
import { gymResultProblem } from '../../processors/gym-ingest.js';
import { validateRow, type RowRejectReason } from '../../processors/row-validation.js';
import type { BatchEnd, GymResult, JsonValue, RolloutRow } from '../../processors/types.js';
import { avroType } from '../codecs/codec.js';
import { rowCompletedToAvro, type RowCompletedEvent } from '../codecs/record-mapping.js';

/**
 * Why a record was refused: a row rule of `validateRow` (SPEC §3 codes),
 * `invalid_gym_result` (the GymResult structure), `invalid_batch_end`,
 * `not_encodable` (a value the Avro schema cannot hold, e.g. a fractional
 * `produced_at`), `record_too_large` (over `kafka.max_value_bytes`).
 */
export type PublishRejectReason = Exclude<RowRejectReason, 'nan_logprobs'> | 'invalid_gym_result' | 'invalid_batch_end' | 'not_encodable' | 'record_too_large';

/** A record the publisher refused before sending anything of it. */
export class PublishValidationError extends RolloutStreamError {
  readonly reason: PublishRejectReason;
  /** What was refused. */
  readonly record: 'row' | 'gym_result' | 'batch_end';
  /** Identity read best-effort from the record (null when absent or malformed). */
  readonly group_id: string | null;
  readonly row_index: number | null;

  constructor(
    record: 'row' | 'gym_result' | 'batch_end',
    reason: PublishRejectReason,
    message: string,
    identity: { group_id?: string | null; row_index?: number | null } = {},
    options: { cause?: unknown } = {},
  ) {
    super('publish_invalid', `${record === 'gym_result' ? 'GymResult' : record === 'batch_end' ? 'BatchEnd' : 'row'} refused (${reason}): ${message}`, options);
    this.reason = reason;
    this.record = record;
    this.group_id = identity.group_id ?? null;
    this.row_index = identity.row_index ?? null;
  }
}

function identityOf(record: unknown): { group_id: string | null; row_index: number | null } {
  const r = (record !== null && typeof record === 'object' ? record : {}) as Record<string, unknown>;
  return {
    group_id: typeof r.group_id === 'string' ? r.group_id : null,
    row_index: typeof r.row_index === 'number' && Number.isSafeInteger(r.row_index) ? r.row_index : null,
  };
}

/** `row` typed as a RolloutRow when `validateRow` accepts it (NaN logprobs included); otherwise throws. */
export function checkRow(row: unknown): RolloutRow {
  const v = validateRow(row);
  if (v.ok) return v.row;
  // validateRow checks NaN last, so a nan_logprobs row passed every other rule.
  if (v.reason === 'nan_logprobs') return row as RolloutRow;
  throw new PublishValidationError('row', v.reason, v.message, v);
}

/**
 * `result` with its `gym_row` and `gym_result` made JSON-safe (see
 * `jsonSafe`; token ids, logprobs and routes that travel as binary columns
 * are left as they are, typed arrays and NaN included), when `gymResultProblem` finds nothing wrong; otherwise throws.
 * The caller's object is never modified.
 */
export function checkGymResult(result: unknown): GymResult {
  const identity = identityOf(result);
  let safe: unknown = result;
  if (result !== null && typeof result === 'object' && !Array.isArray(result)) {
    const r = result as Record<string, unknown>;
    safe = { ...r, gym_row: jsonSafe(r.gym_row), gym_result: jsonSafeGymResult(r.gym_result) };
  }
  const problem = gymResultProblem(safe);
  if (problem !== null) throw new PublishValidationError('gym_result', 'invalid_gym_result', problem, identity);
  return safe as GymResult;
}

/** A BatchEnd for `batchId` with `numRows`, or throws naming the bad argument. */
export function checkBatchEnd(batchId: unknown, numRows: unknown): BatchEnd {
  if (typeof batchId !== 'string' || batchId.length === 0) {
    throw new PublishValidationError('batch_end', 'invalid_batch_end', `batch_id must be a non-empty string, got ${JSON.stringify(batchId)}`);
  }
  if (typeof numRows !== 'number' || !Number.isSafeInteger(numRows) || numRows < 0) {
    throw new PublishValidationError('batch_end', 'invalid_batch_end', `num_rows must be a non-negative integer, got ${String(numRows)}`);
  }
  return { batch_id: batchId, num_rows: numRows };
}

const NON_FINITE_TEXT = (x: number): string => (Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity');

/**
 * A free-form JSON value as it must travel (JSON text, SPEC §9): typed
 * arrays become lists (JSON.stringify would write them as `{"0": …}`
 * objects), and NaN / ±Infinity become the strings "NaN", "Infinity",
 * "-Infinity" (JSON.stringify would write `null`, silently turning a NaN
 * logprob into a missing one). Returns the input itself when nothing needs
 * changing, so a clean multi-megabyte result is not copied.
 */
export function jsonSafe(value: unknown): unknown {
  if (typeof value === 'number') return Number.isFinite(value) ? value : NON_FINITE_TEXT(value);
  if (value === null || typeof value !== 'object') return value;
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    const out: JsonValue[] = [];
    const view = value as unknown as ArrayLike<number | bigint>;
    for (let i = 0; i < view.length; i++) {
      const n = Number(view[i]);
      out.push(Number.isFinite(n) ? n : NON_FINITE_TEXT(n));
    }
    return out;
  }
  if (Array.isArray(value)) {
    let copy: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const v = value[i];
      const safe = jsonSafe(v);
      if (safe !== v) {
        copy ??= value.slice();
        copy[i] = safe;
      }
    }
    return copy ?? value;
  }
  let copy: Record<string, unknown> | null = null;
  for (const [k, v] of Object.entries(value)) {
    const safe = jsonSafe(v);
    if (safe !== v) {
      copy ??= { ...(value as Record<string, unknown>) };
      copy[k] = safe;
    }
  }
  return copy ?? value;
}

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v);

/** `obj` with every value JSON-safe, `key`'s being `value` (copied only when something changed). */
function safeWith(obj: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  let copy: Record<string, unknown> | null = null;
  for (const [k, v] of Object.entries(obj)) {
    const safe = k === key ? value : jsonSafe(v);
    if (safe !== v) {
      copy ??= { ...obj };
      copy[k] = safe;
    }
  }
  return copy ?? obj;
}

/**
 * `jsonSafe` of a `gym_result`, except the output items' values that move to
 * the binary columns of the record (processors/gym-columns.ts): those are
 * not JSON text, so typed arrays stay typed arrays (no copy into a list, no
 * per-number pass) and a NaN logprob stays a number.
 */
export function jsonSafeGymResult(value: unknown): unknown {
  const response = isObj(value) ? value.response : undefined;
  if (!isObj(value) || !isObj(response) || !Array.isArray(response.output)) return jsonSafe(value);
  const output: unknown[] = response.output;
  let items: unknown[] | null = null;
  for (let i = 0; i < output.length; i++) {
    const item = output[i];
    let safe: unknown;
    if (isObj(item)) {
      let copy: Record<string, unknown> | null = null;
      for (const [k, v] of Object.entries(item)) {
        const kept = typeof v !== 'string' && movesToColumn(k, v) ? v : jsonSafe(v);
        if (kept !== v) {
          copy ??= { ...item };
          copy[k] = kept;
        }
      }
      safe = copy ?? item;
    } else {
      safe = jsonSafe(item);
    }
    if (safe !== item) (items ??= output.slice())[i] = safe;
  }
  return safeWith(value, 'response', safeWith(response, 'output', items ?? output));
}

let rowCompletedType: avro.Type | null = null;

/**
 * Why the Avro schema cannot hold `event`, naming the first offending field
 * path (e.g. `produced_at`), for the error of a record that passed the
 * field checks but still cannot be encoded.
 */
export function encodeProblem(event: RowCompletedEvent, cause: unknown): string {
  rowCompletedType ??= avroType('rowCompleted');
  let path: string | null = null;
  try {
    rowCompletedType.isValid(rowCompletedToAvro(event), {
      errorHook: (p: string[]) => {
        // The union branch names (`event`, `dev.rolloutstream.v1.RolloutRow`) say nothing to a user.
        path ??= p.filter((s) => s !== 'event' && !s.startsWith('dev.rolloutstream.')).join('.');
      },
    });
  } catch {
    // Mapping failed before Avro saw the value; the original error says why.
  }
  const detail = cause instanceof Error ? cause.message : String(cause);
  return path ? `${path} cannot be encoded (${detail})` : `the record cannot be encoded: ${detail}`;
}


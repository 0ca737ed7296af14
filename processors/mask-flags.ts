/**
 * Env-driven loss masks (SPEC §4.5, REFERENCE-NOTES 21).
 *
 * A verifier asks the trainer to drop a sample from the loss by setting
 * `mask_sample`. Gym serialises a first-class `mask_sample: false` on every
 * response, so an environment that only flags `instance_config.mask_sample`
 * leaves a false first-class field beside the true nested one: both places
 * are read and either one masks the row.
 */
import { asObject } from './json-access.js';
import type { JsonObject, JsonValue } from './types.js';

/**
 * Python's `bool(value)` for a JSON value: null/absent, `false`, `0`, `""`,
 * `[]` and `{}` are false; everything else is true, including the string
 * `"false"` and NaN (Python's `bool(float('nan'))` is True).
 */
export function isPythonTruthy(value: JsonValue | undefined): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value !== 0;
  if (typeof value === 'string') return value.length > 0;
  if (Array.isArray(value)) return value.length > 0;
  return Object.keys(value).length > 0;
}

/**
 * Whether the verifier asked to mask this row: `full_result.mask_sample` or
 * `full_result.instance_config.mask_sample` is truthy. A missing, null or
 * non-object `instance_config` contributes nothing.
 */
export function maskSampleFlag(fullResult: JsonObject): boolean {
  if (isPythonTruthy(fullResult['mask_sample'])) return true;
  const instanceConfig = asObject(fullResult['instance_config']);
  return instanceConfig !== null && isPythonTruthy(instanceConfig['mask_sample']);
}

/**
 * The per-row `mask_sample` field: the flag when `gateOn`
 * (`mask_env_flagged_samples`), else null, because with the gate off the
 * column is absent rather than all-false.
 */
export function maskSampleField(fullResult: JsonObject, gateOn: boolean): boolean | null {
  return gateOn ? maskSampleFlag(fullResult) : null;
}

/**
 * The token columns of a NeMo-Gym output item as typed arrays (SPEC §2.1
 * rule 2): token ids as int32, logprobs as float32. One pass per list, no
 * intermediate JS arrays. Problems come back as a sentence naming the field,
 * never thrown. A list is a JS array or, from a version-2 record, a typed
 * array (gym-columns.ts), read without turning it back into a JS array.
 */
import { isTokenList } from './gym-columns.js';

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

/**
 * Non-finite floats as the JSON form writes them (SPEC §9): JSON text cannot
 * hold NaN, so publishers send these strings and we turn them back here. A
 * NaN logprob is then `nan_logprobs` in the row validation, like any row's.
 */
const NON_FINITE: Readonly<Record<string, number>> = { NaN: Number.NaN, Infinity: Infinity, '-Infinity': -Infinity };

/** `list[from:]` as an Int32Array, or why an element is not an int32 token id. */
export function int32Tail(list: ArrayLike<unknown>, from: number, field: string): Int32Array | string {
  // A version-2 column is int32 already: one copy, no element checks.
  if (list instanceof Int32Array) return list.slice(from);
  const out = new Int32Array(list.length - from);
  for (let i = from; i < list.length; i++) {
    const v = list[i];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < INT32_MIN || v > INT32_MAX) {
      return `${field}[${i}] is ${describe(v)}; token ids must be int32 integers`;
    }
    out[i - from] = v;
  }
  return out;
}

/**
 * `generation_log_probs` as a Float32Array of exactly `tokens` entries.
 * Entries are numbers or the strings "NaN", "Infinity", "-Infinity".
 * **Deviation** (SPEC §2.1 rule 2): a list of another length is refused;
 * the reference pads the short column with zeros.
 */
export function float32Logprobs(value: unknown, tokens: number, field: string): Float32Array | string {
  if (value === undefined || value === null) return `missing ${field} for ${tokens} generated tokens`;
  if (!isTokenList(value)) return `${field} must be a list of numbers`;
  if (value.length !== tokens) return `${field} has ${value.length} entries for ${tokens} generated tokens`;
  // A version-2 column (float64): every element a number; rounded to float32 as one element at a time would be.
  if (value instanceof Float64Array) return new Float32Array(value);
  const out = new Float32Array(tokens);
  for (let i = 0; i < tokens; i++) {
    const v: unknown = value[i];
    if (typeof v === 'number') out[i] = v;
    else if (typeof v === 'string' && Object.hasOwn(NON_FINITE, v)) out[i] = NON_FINITE[v]!;
    else return `${field}[${i}] is ${describe(v)}; logprobs must be numbers or "NaN", "Infinity", "-Infinity"`;
  }
  return out;
}

export function describe(v: unknown): string {
  if (v === undefined) return 'missing';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  if (Array.isArray(v)) return 'a list';
  if (v === null || typeof v !== 'object') return String(v);
  return 'an object';
}

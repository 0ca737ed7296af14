/**
 * GymResult version 2: the numbers of NeMo-Gym's output items as binary
 * columns beside the rest of the result as JSON text (docs/formats.md,
 * "GymResult").
 *
 * In each object item of `gym_result.response.output`, a key moves out of
 * the JSON into the item's columns entry exactly when its value passes the
 * rule below; otherwise it stays in the JSON as in version 1:
 *
 *   prompt_token_ids, generation_token_ids  every element an integer in the
 *                                           int32 range  → int32 LE
 *   generation_log_probs                    every element a number (NaN and
 *                                           ±Infinity included) → float64 LE
 *   routed_experts                          a canonical nrlre1 envelope
 *                                           (re-renders byte for byte from
 *                                           dtype, shape and data) → its
 *                                           bytes; a rectangular [S][L][K]
 *                                           list (S, L, K ≥ 1) of int32
 *                                           integers → int32 LE
 *
 * Reassembled, the item has every key back with the value it had (token ids
 * as Int32Array, logprobs as Float64Array, routes as the same envelope string
 * or nested number lists). The Python publisher applies the same rules, so
 * both write the same split of the same result.
 *
 * Pure and Avro-free: the columns are plain objects of bytes whose fields
 * mirror the schema's `GymItemColumns`; streams/codecs maps them.
 */
import { Buffer } from 'node:buffer';
import type { JsonObject, JsonValue } from './types.js';

export const COLUMN_KEYS = ['prompt_token_ids', 'generation_token_ids', 'generation_log_probs', 'routed_experts'] as const;
export type ColumnKey = (typeof COLUMN_KEYS)[number];

export type RouteForm = 'envelope' | 'lists';

export interface GymRouteColumn {
  form: RouteForm;
  dtype: string;
  shape: number[];
  data: Uint8Array;
}

/** One output item's columns (schema record `GymItemColumns`); null: the key is not a column of this item. */
export interface GymItemColumns {
  item: number;
  prompt_token_ids: Uint8Array | null;
  generation_token_ids: Uint8Array | null;
  generation_log_probs: Uint8Array | null;
  routed_experts: GymRouteColumn | null;
}

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;
const MAGIC = 'nrlre1';
const ROUTE_SIZES: Readonly<Record<string, number>> = { int8: 1, int16: 2, int32: 4 };
const CANONICAL_DIM = /^(0|[1-9][0-9]{0,9})$/;
const MOVED = Symbol('moved');

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v);

type NumericArray = Int8Array | Uint8Array | Uint8ClampedArray | Int16Array | Uint16Array | Int32Array | Uint32Array | Float32Array | Float64Array;

/** A typed array of numbers (not a DataView, not a BigInt array). */
export function isNumericTypedArray(v: unknown): v is NumericArray {
  return ArrayBuffer.isView(v) && !(v instanceof DataView) && !(v instanceof BigInt64Array) && !(v instanceof BigUint64Array);
}

/** A list the conversion reads element by element: a JS array or a typed array of numbers. */
export function isTokenList(v: unknown): v is ArrayLike<unknown> {
  return Array.isArray(v) || isNumericTypedArray(v);
}

const view = (a: NumericArray): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/** The int32 rule: `v` as an Int32Array when every element is an integer in the int32 range, else null. */
export function asInt32Column(v: unknown): Int32Array | null {
  if (v instanceof Int32Array) return v;
  if (!Array.isArray(v) && !isNumericTypedArray(v)) return null;
  const list = v as ArrayLike<unknown>;
  const out = new Int32Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const x = list[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < INT32_MIN || x > INT32_MAX) return null;
    out[i] = x;
  }
  return out;
}

/** The number rule: `v` as a Float64Array when every element is a number, else null. */
export function asFloat64Column(v: unknown): Float64Array | null {
  if (v instanceof Float64Array) return v;
  if (isNumericTypedArray(v)) return Float64Array.from(v);
  if (!Array.isArray(v)) return null;
  const out = new Float64Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const x: unknown = v[i];
    if (typeof x !== 'number') return null;
    out[i] = x;
  }
  return out;
}

function envelopeText(dtype: string, shape: readonly number[], data: Uint8Array): string {
  return `${MAGIC}:${dtype}:${shape.join('x')}:${Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64')}`;
}

/** The envelope's column when it is canonical (re-renders byte for byte), else null. */
function envelopeColumn(text: string): GymRouteColumn | null {
  const a = text.indexOf(':');
  const b = a < 0 ? -1 : text.indexOf(':', a + 1);
  const c = b < 0 ? -1 : text.indexOf(':', b + 1);
  if (c < 0 || text.slice(0, a) !== MAGIC) return null;
  const dtype = text.slice(a + 1, b);
  const size = ROUTE_SIZES[dtype];
  if (size === undefined) return null;
  const dims = text.slice(b + 1, c).split('x');
  if (dims.length !== 3 || !dims.every((d) => CANONICAL_DIM.test(d))) return null;
  const shape = dims.map(Number);
  if (shape.some((d) => d > INT32_MAX)) return null;
  const payload = text.slice(c + 1);
  const data = Buffer.from(payload, 'base64');
  if (data.length !== shape[0]! * shape[1]! * shape[2]! * size) return null;
  // Node's decoder forgives (missing padding, URL-safe letters, stray
  // characters); only a text that is exactly what we would write moves.
  if (data.toString('base64') !== payload) return null;
  return { form: 'envelope', dtype, shape, data };
}

/** A rectangular `[S][L][K]` list (S, L, K ≥ 1) of int32 integers as an int32 column, else null. */
function listsColumn(list: readonly unknown[]): GymRouteColumn | null {
  const s = list.length;
  const first = list[0];
  if (s === 0 || !Array.isArray(first) || first.length === 0) return null;
  const l = first.length;
  const inner = first[0] as unknown;
  if (!Array.isArray(inner) || inner.length === 0) return null;
  const k = inner.length;
  const out = new Int32Array(s * l * k);
  let at = 0;
  for (let i = 0; i < s; i++) {
    const row = list[i];
    if (!Array.isArray(row) || row.length !== l) return null;
    for (let j = 0; j < l; j++) {
      const experts: unknown = row[j];
      if (!Array.isArray(experts) || experts.length !== k) return null;
      for (let m = 0; m < k; m++) {
        const x: unknown = experts[m];
        if (typeof x !== 'number' || !Number.isInteger(x) || x < INT32_MIN || x > INT32_MAX) return null;
        out[at++] = x;
      }
    }
  }
  return { form: 'lists', dtype: 'int32', shape: [s, l, k], data: view(out) };
}

/** The column `key`'s value moves to, or null when it stays in the JSON. */
function columnOf(key: ColumnKey, v: unknown): Uint8Array | GymRouteColumn | null {
  switch (key) {
    case 'prompt_token_ids':
    case 'generation_token_ids': {
      const ids = asInt32Column(v);
      return ids === null ? null : view(ids);
    }
    case 'generation_log_probs': {
      const lp = asFloat64Column(v);
      return lp === null ? null : view(lp);
    }
    case 'routed_experts':
      if (typeof v === 'string') return envelopeColumn(v);
      return Array.isArray(v) ? listsColumn(v) : null;
  }
}

/**
 * Whether `value` of `key` moves into a column (for a publisher's JSON-safety
 * pass, which must leave such values alone: binary keeps NaN and typed arrays).
 */
export function movesToColumn(key: string, value: unknown): boolean {
  return (COLUMN_KEYS as readonly string[]).includes(key) && columnOf(key as ColumnKey, value) !== null;
}

/**
 * A value that stays in the JSON text as JSON.stringify must see it: a typed
 * array (which it would write as an object) becomes a list, non-finite
 * numbers the strings "NaN" / "Infinity" / "-Infinity" as in the JSON form.
 */
export function jsonValue(v: unknown): unknown {
  if (!isNumericTypedArray(v)) return v;
  return Array.from(v, (x: number) => (Number.isFinite(x) ? x : Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity'));
}

/**
 * An output item with its typed arrays (of an assembled version-2 record) as
 * JSON lists: the input's own object when it has none.
 */
export function jsonOutputItem(item: JsonObject): JsonObject {
  let copy: Record<string, unknown> | null = null;
  for (const key of COLUMN_KEYS) {
    const v: unknown = item[key];
    if (!isNumericTypedArray(v)) continue;
    copy ??= { ...item };
    copy[key] = jsonValue(v);
  }
  return (copy ?? item) as JsonObject;
}

/**
 * `gymResult` with `edit` applied to each object item of its
 * `response.output` (an edit returns the item itself when it changes
 * nothing): copies only along the path of what changed.
 */
function mapOutputItems<T>(gymResult: T, edit: (item: Record<string, unknown>, index: number) => Record<string, unknown>): T {
  if (!isObject(gymResult)) return gymResult;
  const response = gymResult.response;
  if (!isObject(response) || !Array.isArray(response.output)) return gymResult;
  const output = response.output as unknown[];
  let edited: unknown[] | null = null;
  for (let i = 0; i < output.length; i++) {
    const item = output[i];
    if (!isObject(item)) continue;
    const kept = edit(item, i);
    if (kept !== item) (edited ??= output.slice())[i] = kept;
  }
  return edited === null ? gymResult : ({ ...gymResult, response: { ...response, output: edited } } as T);
}

/** A `gym_result` with typed arrays in its output items as JSON lists (what the JSON form prints). */
export function jsonGymResult(gymResult: JsonObject): JsonObject {
  return mapOutputItems(gymResult, (item) => jsonOutputItem(item as JsonObject));
}

/**
 * The version-2 split of a `gym_result`: the object for its JSON text (the
 * input's own parts where nothing moved; edited items are copies keeping
 * their other keys in order) and the columns, one entry per item where at
 * least one key moved, in item order. The input is not changed.
 */
export function splitGymColumns(gymResult: JsonObject): { json: JsonObject; columns: GymItemColumns[] } {
  const columns: GymItemColumns[] = [];
  const json = mapOutputItems(gymResult, (item, i) => {
    let entry: GymItemColumns | null = null;
    // Per key: undefined = unchanged, MOVED = into the column, else the JSON-safe value that stays.
    let changed: Map<string, unknown> | null = null;
    for (const key of COLUMN_KEYS) {
      if (!Object.hasOwn(item, key)) continue;
      const v = item[key];
      const column = columnOf(key, v);
      if (column !== null) {
        entry ??= { item: i, prompt_token_ids: null, generation_token_ids: null, generation_log_probs: null, routed_experts: null };
        (entry as unknown as Record<string, unknown>)[key] = column;
        (changed ??= new Map()).set(key, MOVED);
      } else if (jsonValue(v) !== v) {
        (changed ??= new Map()).set(key, jsonValue(v));
      }
    }
    if (changed === null) return item;
    if (entry !== null) columns.push(entry);
    const copy: Record<string, unknown> = {};
    for (const k of Object.keys(item)) {
      const c = changed.get(k);
      if (c === MOVED) continue;
      copy[k] = c === undefined ? item[k] : c;
    }
    return copy;
  });
  return { json, columns };
}

const at = (i: number, key: string) => `gym_result.response.output[${i}].${key}`;

/** Why `entry` cannot be put back into `output`, naming the field, or null. */
function entryProblem(entry: GymItemColumns, output: readonly unknown[]): string | null {
  const i = entry.item;
  const present = COLUMN_KEYS.filter((k) => entry[k] != null);
  const first = present[0] ?? 'columns';
  if (!Number.isSafeInteger(i) || i < 0 || i >= output.length) {
    return `${at(i, first)} is a binary column of item ${i}, but gym_result.response.output has ${output.length} items`;
  }
  const item = output[i];
  if (!isObject(item)) return `${at(i, first)} is a binary column, but gym_result.response.output[${i}] is not an object`;
  for (const key of present) {
    if (Object.hasOwn(item, key)) return `${at(i, key)} is both in the JSON text and a binary column`;
  }
  for (const key of ['prompt_token_ids', 'generation_token_ids'] as const) {
    const bytes = entry[key];
    if (bytes != null && bytes.byteLength % 4 !== 0) return `${at(i, key)} has ${bytes.byteLength} bytes, not a whole number of int32 values`;
  }
  const lp = entry.generation_log_probs;
  if (lp != null && lp.byteLength % 8 !== 0) return `${at(i, 'generation_log_probs')} has ${lp.byteLength} bytes, not a whole number of float64 values`;
  const routes = entry.routed_experts;
  if (routes != null) {
    const where = at(i, 'routed_experts');
    if (routes.form !== 'envelope' && routes.form !== 'lists') return `${where} has the unknown form ${JSON.stringify(routes.form)}`;
    const size = Object.hasOwn(ROUTE_SIZES, routes.dtype) ? ROUTE_SIZES[routes.dtype]! : undefined;
    if (size === undefined) return `${where} has dtype ${JSON.stringify(routes.dtype)}; expected int8, int16 or int32`;
    const { shape } = routes;
    if (shape.length !== 3 || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) return `${where} has shape [${shape.join(', ')}]; expected [S, L, K]`;
    const want = shape[0]! * shape[1]! * shape[2]! * size;
    if (routes.data.byteLength !== want) {
      return `${where} has ${routes.data.byteLength} bytes of data; shape [${shape.join(', ')}] of ${routes.dtype} needs ${want}`;
    }
  }
  return null;
}

/** An aligned copy of `bytes` as `T`. */
function copyAs<T extends Int32Array | Float64Array>(Ctor: { new (n: number): T; readonly BYTES_PER_ELEMENT: number }, bytes: Uint8Array): T {
  const out = new Ctor(bytes.byteLength / Ctor.BYTES_PER_ELEMENT);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

function nestedLists(routes: GymRouteColumn): JsonValue[] {
  const [s, l, k] = routes.shape as [number, number, number];
  const { data } = routes;
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const size = ROUTE_SIZES[routes.dtype]!;
  const read = size === 1 ? (o: number) => dv.getInt8(o) : size === 2 ? (o: number) => dv.getInt16(o, true) : (o: number) => dv.getInt32(o, true);
  const out: JsonValue[] = new Array(s);
  let o = 0;
  for (let i = 0; i < s; i++) {
    const row: JsonValue[] = new Array(l);
    for (let j = 0; j < l; j++) {
      const experts: number[] = new Array(k);
      for (let m = 0; m < k; m++, o += size) experts[m] = read(o);
      row[j] = experts;
    }
    out[i] = row;
  }
  return out;
}

/**
 * Puts the columns back into `gymResult` (a freshly parsed JSON text: it is
 * edited in place, each key appended to its item). Returns why it cannot,
 * naming `gym_result.response.output[i].<key>`, or null when done; on a
 * problem nothing has been changed. Token ids come back as Int32Array,
 * logprobs as Float64Array (aligned copies), routes as the envelope string
 * or nested number lists.
 */
export function assembleGymColumns(gymResult: JsonObject, columns: readonly GymItemColumns[]): string | null {
  if (columns.length === 0) return null;
  const response = gymResult.response;
  const output = isObject(response) && Array.isArray(response.output) ? (response.output as unknown[]) : [];
  for (const entry of columns) {
    const problem = entryProblem(entry, output);
    if (problem !== null) return problem;
  }
  // Two entries for one item could each pass alone yet collide.
  const seen = new Set<string>();
  for (const entry of columns) {
    for (const key of COLUMN_KEYS) {
      if (entry[key] == null) continue;
      const id = `${entry.item}/${key}`;
      if (seen.has(id)) return `${at(entry.item, key)} is in two binary column entries`;
      seen.add(id);
    }
  }
  for (const entry of columns) {
    const item = output[entry.item] as Record<string, unknown>;
    if (entry.prompt_token_ids != null) item.prompt_token_ids = copyAs(Int32Array, entry.prompt_token_ids);
    if (entry.generation_token_ids != null) item.generation_token_ids = copyAs(Int32Array, entry.generation_token_ids);
    if (entry.generation_log_probs != null) item.generation_log_probs = copyAs(Float64Array, entry.generation_log_probs);
    const routes = entry.routed_experts;
    if (routes != null) item.routed_experts = routes.form === 'envelope' ? envelopeText(routes.dtype, routes.shape, routes.data) : nestedLists(routes);
  }
  return null;
}

/**
 * `a` with its numbers by value, as the content digest takes numbers: -0 as
 * 0 and every NaN as one NaN (a copy only when it has either).
 */
function byValue(a: Float64Array): Float64Array {
  let out: Float64Array | null = null;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    if (x === 0 && 1 / x < 0) (out ??= a.slice())[i] = 0;
    else if (x !== x) (out ??= a.slice())[i] = Number.NaN;
  }
  return out ?? a;
}

/**
 * The content-identity normalisation of a `gym_result` (whatever version
 * it came in): in every object output item, token id lists passing the int32
 * rule become Int32Array and logprob lists passing the number rule
 * Float64Array, as a version-2 record assembles them, logprobs by value (-0
 * as 0, one NaN). So a version-1 record, a version-2 record and a JSON line
 * of one rollout have one content. The input is not changed.
 */
export function normalizedGymColumns(gymResult: unknown): unknown {
  return mapOutputItems(gymResult, (item) => {
    let copy: Record<string, unknown> | null = null;
    for (const key of ['prompt_token_ids', 'generation_token_ids'] as const) {
      const v = item[key];
      const typed = Array.isArray(v) ? asInt32Column(v) : null;
      if (typed === null) continue;
      copy ??= { ...item };
      copy[key] = typed;
    }
    const lp = item.generation_log_probs;
    const typed = Array.isArray(lp) ? asFloat64Column(lp) : lp instanceof Float64Array ? lp : null;
    const canonical = typed === null ? null : byValue(typed);
    if (canonical !== null && canonical !== lp) {
      copy ??= { ...item };
      copy.generation_log_probs = canonical;
    }
    return copy ?? item;
  });
}

/**
 * A record whose columns could not be put back carries why under this
 * symbol: decoding stays total (the record still decodes, with its JSON as
 * sent), and the ingest step, which owns the reasons of a GymResult, rejects
 * it as `invalid_row`. A symbol, not a field: no JSON line can spell it, it is
 * not content, and no writer writes it.
 */
export const COLUMNS_PROBLEM: unique symbol = Symbol('rollout-stream.gym-columns-problem');

export function markColumnsProblem<T extends object>(record: T, problem: string): T {
  (record as Record<symbol, unknown>)[COLUMNS_PROBLEM] = problem;
  return record;
}

/** The problem `markColumnsProblem` left on a decoded record, or null. */
export function columnsProblem(record: unknown): string | null {
  if (record === null || typeof record !== 'object') return null;
  const p = (record as Record<symbol, unknown>)[COLUMNS_PROBLEM];
  return typeof p === 'string' ? p : null;
}

/**
 * Values in the JSON form (SPEC §9): non-finite floats as the
 * strings "NaN" / "Infinity" / "-Infinity", typed arrays as flat JSON
 * arrays, multi-dimensional tensors as nested row-major arrays. float32
 * values are written with the fewest digits that read back to the same
 * float32 (so a logprob prints as -0.1, not -0.10000000149011612).
 */
import type { DType, JsonValue, Tensor, TypedArray } from '../processors/types.js';

const NON_FINITE: Record<string, number> = { NaN: Number.NaN, Infinity: Infinity, '-Infinity': -Infinity };

const INT_RANGES: Partial<Record<DType, [number, number]>> = {
  uint8: [0, 255],
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-2147483648, 2147483647],
};

/** A JS number in the JSON form: itself when finite, else its string name. */
export function numberToJson(x: number): number | string {
  if (Number.isFinite(x)) return x;
  return Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity';
}

/** The number a JSON value stands for (a number or a non-finite name), or undefined. */
export function numberFromJson(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && Object.hasOwn(NON_FINITE, v)) return NON_FINITE[v];
  return undefined;
}

/** The shortest decimal that reads back (through float32 rounding) to the same float32 value. */
export function float32ToJson(x: number): number | string {
  if (!Number.isFinite(x)) return numberToJson(x);
  for (let digits = 1; digits < 9; digits++) {
    const candidate = Number(x.toPrecision(digits));
    if (Math.fround(candidate) === x) return candidate;
  }
  return Number(x.toPrecision(9));
}

/** The flat JSON values of a typed array of `dtype` (bool → booleans, int64 → numbers). */
export function typedToJson(dtype: DType, data: TypedArray): JsonValue[] {
  switch (dtype) {
    case 'bool':
      return Array.from(data as Uint8Array, (b) => b !== 0);
    case 'int64':
      return Array.from(data as BigInt64Array, Number);
    case 'float32':
      return Array.from(data as Float32Array, float32ToJson);
    case 'float64':
      return Array.from(data as Float64Array, numberToJson);
    default:
      return Array.from(data as Exclude<TypedArray, BigInt64Array>);
  }
}

/**
 * The typed array of `dtype` holding `values`, or null when `dtype` is not a
 * known dtype or some value does not fit it (a fraction or out-of-range
 * number for an integer dtype, a non-number for a float dtype).
 */
export function buildTypedArray(dtype: string, values: readonly unknown[]): TypedArray | null {
  const n = values.length;
  switch (dtype) {
    case 'float32':
    case 'float64': {
      const out = dtype === 'float32' ? new Float32Array(n) : new Float64Array(n);
      for (let i = 0; i < n; i++) {
        const x = numberFromJson(values[i]);
        if (x === undefined) return null;
        out[i] = x;
      }
      return out;
    }
    case 'bool': {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (v === true || v === 1) out[i] = 1;
        else if (v !== false && v !== 0) return null;
      }
      return out;
    }
    case 'int64': {
      const out = new BigInt64Array(n);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (!Number.isSafeInteger(v)) return null;
        out[i] = BigInt(v as number);
      }
      return out;
    }
    case 'uint8':
    case 'int8':
    case 'int16':
    case 'int32': {
      const [lo, hi] = INT_RANGES[dtype] as [number, number];
      const ctor = { uint8: Uint8Array, int8: Int8Array, int16: Int16Array, int32: Int32Array }[dtype];
      const out = new ctor(n);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (!Number.isInteger(v) || (v as number) < lo || (v as number) > hi) return null;
        out[i] = v as number;
      }
      return out;
    }
    default:
      return null;
  }
}

/**
 * A tensor as nested arrays, or null when nesting would lose its shape
 * (rank 0, or a zero-length dim: `[]` cannot say `[0, layers, topk]`).
 */
export function tensorToNested(t: Tensor): JsonValue[] | null {
  if (t.shape.length === 0 || t.shape.some((d) => d === 0)) return null;
  const flat = typedToJson(t.dtype, t.data);
  const build = (dim: number, offset: number): JsonValue[] => {
    const size = t.shape[dim] as number;
    if (dim === t.shape.length - 1) return flat.slice(offset, offset + size);
    const stride = t.shape.slice(dim + 1).reduce((a, b) => a * b, 1);
    return Array.from({ length: size }, (_, i) => build(dim + 1, offset + i * stride));
  };
  return build(0, 0);
}

/** A tensor of `dtype` from rectangular nested arrays, or null when they are ragged or hold bad values. */
export function nestedToTensor(nested: unknown[], dtype: DType): Tensor | null {
  const shape: number[] = [];
  for (let level: unknown = nested; Array.isArray(level); level = level[0]) {
    shape.push(level.length);
    if (level.length === 0) break;
  }
  const flat: unknown[] = [];
  const walk = (v: unknown, dim: number): boolean => {
    if (dim === shape.length) {
      if (Array.isArray(v)) return false;
      flat.push(v);
      return true;
    }
    if (!Array.isArray(v) || v.length !== shape[dim]) return false;
    return v.every((item) => walk(item, dim + 1));
  };
  if (!walk(nested, 0)) return null;
  const data = buildTypedArray(dtype, flat);
  return data ? { dtype, shape, data } : null;
}

/** A JSON line that is not valid JSON or not one of the line shapes of SPEC §9. */
export class JsonFormError extends Error {
  override name = 'JsonFormError';
}

export function requireObject(v: unknown, what: string): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new JsonFormError(`${what} must be a JSON object`);
  return v as Record<string, unknown>;
}

/** A map of numbers with non-finite values as their string names. */
export function mapNumbersToJson(m: Record<string, number>): Record<string, number | string> {
  const o: Record<string, number | string> = {};
  for (const [k, x] of Object.entries(m)) o[k] = numberToJson(x);
  return o;
}

/** Map values that are numbers or non-finite names become numbers; anything else stays as given. */
export function mapNumbersFromJson(m: Record<string, unknown>): Record<string, number> {
  const o: Record<string, number> = {};
  for (const [k, x] of Object.entries(m)) o[k] = (numberFromJson(x) ?? x) as number;
  return o;
}

/**
 * Routed experts as NeMo-Gym output items carry them (SPEC §2.1 rule 4):
 * nested lists `[tokens][layers][topk]`, or the compact envelope
 *
 *   envelope := "nrlre1" ":" dtype ":" S "x" L "x" K ":" base64
 *   dtype    := "int8" | "int16" | "int32"          (wire element type)
 *   S, L, K  := decimal digits                       (row-major shape)
 *   base64   := standard alphabet, padded, of the S*L*K elements as
 *               little-endian integers of the wire dtype
 *
 * Both forms decode into one rank-3 Tensor of the *target* dtype
 * (`ingest.routed_experts_dtype`). The wire dtype of an envelope may be
 * narrower or wider than the target; **Deviation**: a value that does not
 * fit the target is refused in either form (the reference casts envelope
 * values silently, so an int32 route of 40000 would become a wrong int16
 * expert id). Failures come back as a sentence for the caller to prefix with
 * the field path, never thrown: a bad route block rejects its row.
 */
import { Buffer } from 'node:buffer';
import type { Tensor } from './types.js';

export type RouteDType = 'int8' | 'int16' | 'int32';
type RouteArray = Int8Array | Int16Array | Int32Array;

export type RouteDecoding = { ok: true; tensor: Tensor } | { ok: false; message: string };

const MAGIC = 'nrlre1';
const DIM = /^[0-9]{1,15}$/;

const ROUTE_ARRAYS: Readonly<Record<RouteDType, { new (length: number): RouteArray; readonly BYTES_PER_ELEMENT: number }>> = {
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
};

const RANGE: Readonly<Record<RouteDType, readonly [number, number]>> = {
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-2147483648, 2147483647],
};

export function isRouteDType(value: unknown): value is RouteDType {
  return value === 'int8' || value === 'int16' || value === 'int32';
}

/**
 * Decodes one `routed_experts` value (nested lists or an `nrlre1` envelope
 * string) into a `[S, L, K]` tensor of `dtype`. Refuses: another JSON type;
 * nested lists that are not rank 3, not rectangular, or hold a non-integer;
 * an envelope with the wrong magic or field count, an unknown dtype name, a
 * shape that is not three decimal dims, data that is not padded standard
 * base64, or an element count that differs from the shape; and any value
 * outside `dtype`'s range.
 */
export function decodeRoutedExperts(raw: unknown, dtype: RouteDType): RouteDecoding {
  if (typeof raw === 'string') return decodeEnvelope(raw, dtype);
  if (Array.isArray(raw)) return decodeNested(raw, dtype);
  return fail('must be nested lists [tokens][layers][topk] or an nrlre1 envelope string');
}

function fail(message: string): RouteDecoding {
  return { ok: false, message };
}

function outOfRange(value: number, flat: number, shape: readonly number[], dtype: RouteDType): RouteDecoding {
  const lk = shape[1]! * shape[2]!;
  const s = Math.floor(flat / lk);
  const l = Math.floor((flat % lk) / shape[2]!);
  const k = flat % shape[2]!;
  return fail(`value ${value} at [${s}, ${l}, ${k}] does not fit ${dtype}`);
}

// ---------------------------------------------------------------- envelope

function decodeEnvelope(text: string, dtype: RouteDType): RouteDecoding {
  // Three separators exactly as the codec writes them; the base64 part never contains ':'.
  const a = text.indexOf(':');
  const b = a < 0 ? -1 : text.indexOf(':', a + 1);
  const c = b < 0 ? -1 : text.indexOf(':', b + 1);
  if (c < 0 || text.slice(0, a) !== MAGIC) {
    return fail(`is not an ${MAGIC}:<int8|int16|int32>:<S>x<L>x<K>:<base64> envelope`);
  }
  const wire = text.slice(a + 1, b);
  if (!isRouteDType(wire)) return fail(`envelope dtype ${JSON.stringify(wire)} is not int8, int16 or int32`);
  const dims = text.slice(b + 1, c).split('x');
  if (dims.length !== 3 || !dims.every((d) => DIM.test(d))) {
    return fail(`envelope shape ${JSON.stringify(text.slice(b + 1, c))} is not <S>x<L>x<K>`);
  }
  const shape = dims.map(Number);
  const count = shape[0]! * shape[1]! * shape[2]!;
  const Wire = ROUTE_ARRAYS[wire];
  const data = text.slice(c + 1);
  // Buffer.byteLength counts what padded base64 of this length holds; a
  // count mismatch is reported like the reference (elements, not bytes).
  const bytes = data.length % 4 === 0 ? Buffer.byteLength(data, 'base64') : -1;
  if (bytes < 0) return fail('envelope data is not padded base64');
  if (bytes !== count * Wire.BYTES_PER_ELEMENT) {
    return fail(`envelope has ${Math.floor(bytes / Wire.BYTES_PER_ELEMENT)} elements, expected ${count} for shape [${shape.join(', ')}]`);
  }
  // Decode straight into an aligned array of the wire dtype: one copy, no
  // intermediate Buffer. Node's decoder skips characters outside the
  // alphabet (and stops at a '=' inside the data), so with the length and
  // padding already checked, any such character leaves fewer bytes written
  // than expected: that is the alphabet check, without a regex pass over
  // megabytes of text. Node also reads the URL-safe '-' and '_', which the
  // envelope's standard alphabet does not have: refused separately.
  if (data.includes('-') || data.includes('_')) return fail('envelope data is not standard base64');
  const wireData = new Wire(count);
  const written = count === 0 ? 0 : Buffer.from(wireData.buffer, 0, bytes).write(data, 'base64');
  if (written !== bytes) return fail('envelope data is not valid base64');
  return narrowTo(wireData, wire, dtype, shape);
}

/** The wire array in the target dtype, refusing values the target cannot hold. */
function narrowTo(src: RouteArray, wire: RouteDType, dtype: RouteDType, shape: number[]): RouteDecoding {
  if (wire === dtype) return { ok: true, tensor: { dtype, shape, data: src } };
  const out = new ROUTE_ARRAYS[dtype](src.length);
  if (RANGE[wire][1] > RANGE[dtype][1]) {
    const [lo, hi] = RANGE[dtype];
    for (let i = 0; i < src.length; i++) {
      const v = src[i]!;
      if (v < lo || v > hi) return outOfRange(v, i, shape, dtype);
      out[i] = v;
    }
  } else {
    out.set(src);
  }
  return { ok: true, tensor: { dtype, shape, data: out } };
}

// ---------------------------------------------------------------- nested lists

function decodeNested(list: unknown[], dtype: RouteDType): RouteDecoding {
  // The shape is read down the first elements, as an array library infers
  // it; every other element is then checked against it while filling.
  const shape: number[] = [];
  let probe: unknown = list;
  while (Array.isArray(probe)) {
    shape.push(probe.length);
    if (probe.length === 0) break;
    probe = probe[0];
  }
  if (shape.length !== 3) return fail(`has rank ${shape.length}; expected [tokens, layers, topk]`);
  const [rows, layers, topk] = shape as [number, number, number];
  const out = new ROUTE_ARRAYS[dtype](rows * layers * topk);
  const [lo, hi] = RANGE[dtype];
  let at = 0;
  for (let s = 0; s < rows; s++) {
    const row = list[s];
    if (!Array.isArray(row) || row.length !== layers) return fail(`is not rectangular: row ${s} is not a list of ${layers} layers`);
    for (let l = 0; l < layers; l++) {
      const experts: unknown = row[l];
      if (!Array.isArray(experts) || experts.length !== topk) {
        return fail(`is not rectangular: [${s}][${l}] is not a list of ${topk} expert ids`);
      }
      for (let k = 0; k < topk; k++) {
        const v: unknown = experts[k];
        if (typeof v !== 'number' || !Number.isInteger(v)) {
          return fail(`holds ${JSON.stringify(v) ?? String(v)} at [${s}, ${l}, ${k}]; expert ids must be integers`);
        }
        if (v < lo || v > hi) return outOfRange(v, at, shape, dtype);
        out[at++] = v;
      }
    }
  }
  return { ok: true, tensor: { dtype, shape, data: out } };
}

/**
 * Encodes a route tensor as an `nrlre1` envelope in its own dtype (the
 * inverse of `decodeRoutedExperts`; used by publishers, tests and the worked
 * example).
 */
export function encodeRoutedExperts(tensor: { dtype: RouteDType; shape: readonly number[]; data: RouteArray }): string {
  const { data, shape } = tensor;
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64');
  return `${MAGIC}:${tensor.dtype}:${shape.join('x')}:${bytes}`;
}

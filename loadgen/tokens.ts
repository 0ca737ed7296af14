/**
 * Token-level fills for synthetic messages: token ids, generation logprobs
 * and routed-expert blocks, written straight into typed arrays in one loop
 * each (no per-token objects), so a 64k-token row with routes costs tens of
 * milliseconds, not seconds.
 *
 * The special ids follow the Qwen2.5/Qwen3 tokenizer layout (regular tokens
 * below 151643, `<|im_end|>` 151645, `<think>` 151667, `</think>` 151668), so
 * penalty configs in tests can name the same ids a real run would use.
 */
import { Rng } from './random.js';

/** `<think>`: ends every user turn of a thinking-mode conversation (the chat template opens the reasoning block). */
export const THINK_OPEN_TOKEN_ID = 151_667;
/** `</think>`: occurs exactly once in a well-formed thinking-mode assistant turn. */
export const THINK_CLOSE_TOKEN_ID = 151_668;
/** `<|im_end|>`: terminates every assistant turn that was not cut by a length limit. */
export const EOS_TOKEN_ID = 151_645;
/**
 * `<|endoftext|>`: never part of a well-formed turn; a stray one inside an
 * assistant message is what `token_ids.unwanted` is usually set to catch
 * (reference rule 18), and the generator injects it at `flags.strayTokenRate`.
 */
export const UNWANTED_TOKEN_ID = 151_643;
/** Text form of the think tags, as they appear in `generation_str` (SPEC §4.2 `thinking_tags` default). */
export const THINK_OPEN_TAG = '<think>';
export const THINK_CLOSE_TAG = '</think>';

/** Regular token ids are drawn from `[min, max)`; the default range stops below the special ids. */
export interface VocabRange {
  min: number;
  max: number;
}

export const DEFAULT_VOCAB: VocabRange = { min: 100, max: 151_643 };

/**
 * Fills `out[from, to)` with regular token ids from `vocab`. The draw is
 * skewed towards low ids (`u^3`), a cheap stand-in for the Zipf shape of
 * real text, so compression measurements on synthetic payloads are not
 * wildly pessimistic.
 */
export function fillTokenIds(rng: Rng, out: Int32Array, from: number, to: number, vocab: VocabRange): void {
  const span = vocab.max - vocab.min;
  for (let i = from; i < to; i++) {
    const u = rng.float();
    out[i] = vocab.min + Math.floor(span * u * u * u);
  }
}

/**
 * Fills `out` with generation logprobs (all ≤ 0): most tokens are sampled
 * with high confidence (logprob near 0), about one in five from a flatter
 * distribution (mean −1.5), as in sampled reasoning traces.
 */
export function fillLogprobs(rng: Rng, out: Float32Array): void {
  for (let i = 0; i < out.length; i++) {
    const mean = rng.float() < 0.8 ? 0.02 : 1.5;
    out[i] = -(-Math.log(1 - rng.float()) * mean);
  }
}

/** Routed-experts shape knobs of a profile (SPEC §2 `routed_experts: int[tokens, layers, topk]`). */
export interface RoutesSpec {
  layers: number;
  topk: number;
  /** Experts per layer; ids are in `[0, numExperts)`. int8 holds at most 128. */
  numExperts: number;
  dtype: 'int8' | 'int16';
}

/** Steps coprime to `n`, so `start + j*step (mod n)` visits `topk ≤ n` distinct experts. */
function coprimeSteps(n: number): number[] {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  const steps: number[] = [];
  for (let s = 1; s < n; s++) if (gcd(s, n) === 1) steps.push(s);
  return steps.length > 0 ? steps : [1];
}

/** Top-k tuples per route table: 2^13, so a draw picks one with a mask and one u32 serves two picks. */
const TABLE_TUPLES = 8192;
const tableCache = new Map<string, Int8Array | Int16Array>();

/**
 * A fixed table of `TABLE_TUPLES` top-k tuples of distinct experts, built
 * once per (experts, topk, dtype) from a fixed seed. Routes are then one
 * draw and one tuple copy per (token, layer) instead of `topk` modular
 * steps: a 64k-token row of 48×8 routes costs milliseconds.
 */
function routeTable(rng: Rng, spec: RoutesSpec): Int8Array | Int16Array {
  const key = `${spec.numExperts}:${spec.topk}:${spec.dtype}`;
  let table = tableCache.get(key);
  if (table === undefined) {
    const { numExperts, topk } = spec;
    const steps = coprimeSteps(numExperts);
    table = spec.dtype === 'int8' ? new Int8Array(TABLE_TUPLES * topk) : new Int16Array(TABLE_TUPLES * topk);
    let k = 0;
    for (let i = 0; i < TABLE_TUPLES; i++) {
      let e = rng.int(0, numExperts);
      const step = steps[rng.int(0, steps.length)] as number;
      for (let j = 0; j < topk; j++) {
        table[k++] = e;
        e = (e + step) % numExperts;
      }
    }
    tableCache.set(key, table);
  }
  return table;
}

/**
 * A `[tokens, layers, topk]` block of expert ids, row-major, in the spec's
 * dtype. The `topk` experts of one (token, layer) are distinct, as a real
 * router's top-k are. One random draw per (token, layer).
 */
export function makeRoutes(rng: Rng, tokens: number, spec: RoutesSpec): Int8Array | Int16Array {
  const { layers, topk } = spec;
  const table = routeTable(new Rng(0x5eed_40e5), spec);
  const data = spec.dtype === 'int8' ? new Int8Array(tokens * layers * topk) : new Int16Array(tokens * layers * topk);
  const rows = tokens * layers;
  const mask = TABLE_TUPLES - 1;
  const tupleBytes = topk * data.BYTES_PER_ELEMENT;
  if (tupleBytes % 4 === 0) {
    // Copy whole tuples as 32-bit words (byte copies, so endianness does not matter).
    const words = tupleBytes / 4;
    const src = new Uint32Array(table.buffer, table.byteOffset, table.byteLength / 4);
    const dst = new Uint32Array(data.buffer, data.byteOffset, data.byteLength / 4);
    let k = 0;
    let x = 0;
    for (let r = 0; r < rows; r++) {
      // One 32-bit draw serves two (token, layer) pairs: 13 bits each.
      if ((r & 1) === 0) x = rng.u32();
      else x >>>= 13;
      let from = (x & mask) * words;
      for (let w = 0; w < words; w++) dst[k++] = src[from++] as number;
    }
  } else {
    let k = 0;
    for (let r = 0; r < rows; r++) {
      let from = (rng.u32() & mask) * topk;
      for (let j = 0; j < topk; j++) data[k++] = table[from++] as number;
    }
  }
  return data;
}

/** Throws `RangeError` when routes cannot be represented: topk above the expert count, or ids that overflow the dtype. */
export function validateRoutesSpec(spec: RoutesSpec): void {
  const { layers, topk, numExperts, dtype } = spec;
  for (const [k, v] of Object.entries({ layers, topk, numExperts })) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`routes.${k} must be an integer ≥ 1, got ${v}`);
  }
  if (topk > numExperts) throw new RangeError(`routes.topk ${topk} exceeds routes.numExperts ${numExperts}`);
  const limit = dtype === 'int8' ? 128 : 32768;
  if (numExperts > limit) throw new RangeError(`routes.numExperts ${numExperts} does not fit ${dtype} (at most ${limit})`);
}

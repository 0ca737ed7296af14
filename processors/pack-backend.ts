/**
 * The per-token copy/concat work of packing behind one small interface
 * (`pack.backend` in the config): every per-token column of a packed group is
 * a concatenation of per-message runs — a message's own values, or one value
 * repeated over its tokens — written row-major into a slab view.
 *
 * `typedPackBackend` does this with `TypedArray.set`/`fill` and the int32 →
 * int64 word loop; it is the same set of operations `recordToTrainBatch`
 * performs inline (which stays the default path, see `pack.ts`). The tfjs
 * backend (`tfjs-pack.ts`) does the concatenation with tfjs-core ops. Every
 * backend must leave identical bytes in `out`: that is the whole contract.
 */
import { copyElements, int64Words, writeInt32AsInt64 } from './typed-arrays.js';
import type { TypedArray } from './types.js';

/** `value` repeated `length` times: a message without its own values for a column. */
export interface Fill {
  readonly value: number;
  readonly length: number;
}

/** One message's part of a column: its own array or a fill. */
export type Run<A extends TypedArray> = A | Fill;

/** Integer arrays a routed-experts block may come in (see `backfillMissingRoutedExperts`). */
export type IntegerArray = Uint8Array | Int8Array | Int16Array | Int32Array | BigInt64Array;

/** Output arrays of `integers`: the routed-experts dtypes. */
export type NarrowIntegerArray = Int8Array | Int16Array | Int32Array;

export function isFill<A extends TypedArray>(run: Run<A>): run is Fill {
  return !ArrayBuffer.isView(run);
}

/**
 * In every operation the runs' lengths add up to `out.length`, the runs are
 * written back to back from element 0, and every element of `out` is written
 * (a recycled slab is never cleared).
 */
export interface PackBackend {
  readonly name: 'typed' | 'tfjs';
  /** int32 runs sign-extended into int64 (`input_ids`, `token_mask`, `prompt_ids_for_adv`); fills are any safe integer. */
  int64(out: BigInt64Array, runs: readonly Run<Int32Array>[]): void;
  /** float32 runs, bits preserved (`generation_logprobs`). */
  float32(out: Float32Array, runs: readonly Run<Float32Array>[]): void;
  /** Integer runs converted as `TypedArray.set` converts (wrapping to the output width; int64 via `Number`): `routed_experts`. */
  integers(out: NarrowIntegerArray, runs: readonly Run<IntegerArray>[]): void;
  /** bool 0/1 from constant runs, any non-zero value is 1 (violation masks). */
  bools(out: Uint8Array, runs: readonly Fill[]): void;
  /** Same-dtype arrays back to back, bits preserved (media fields, any dtype). */
  concat(out: TypedArray, parts: readonly TypedArray[]): void;
}

/** The TypedArray path: `set`/`fill` and the word loop of `writeInt32AsInt64`. */
export const typedPackBackend: PackBackend = {
  name: 'typed',
  int64(out, runs) {
    const words = int64Words(out);
    let at = 0;
    for (const run of runs) {
      if (isFill(run)) out.fill(BigInt(run.value), at, at + run.length);
      else writeInt32AsInt64(words, at, run);
      at += run.length;
    }
  },
  float32(out, runs) {
    let at = 0;
    for (const run of runs) {
      if (isFill(run)) out.fill(run.value, at, at + run.length);
      else out.set(run, at);
      at += run.length;
    }
  },
  integers(out, runs) {
    let at = 0;
    for (const run of runs) {
      if (isFill(run)) out.fill(run.value, at, at + run.length);
      else copyElements(out, at, run);
      at += run.length;
    }
  },
  bools(out, runs) {
    let at = 0;
    for (const run of runs) {
      out.fill(run.value !== 0 ? 1 : 0, at, at + run.length);
      at += run.length;
    }
  },
  concat(out, parts) {
    let at = 0;
    for (const p of parts) {
      copyElements(out, at, p);
      at += p.length;
    }
  },
};

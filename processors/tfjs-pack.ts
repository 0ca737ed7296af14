/**
 * The `tfjs` pack backend: each per-token column is one `tf.concat` of
 * per-message tensors (`tf.fill` for the constant runs, `tf.cast` for the bool
 * masks), read back with `dataSync` and copied into the group's output view (a slab, or the framed value).
 *
 * tfjs tensors are float32, int32 or bool only, so everything narrower or
 * wider goes through int32 and `TypedArray.set`/the word loop finish the job
 * exactly as the typed path does: int64 columns are concatenated as int32 and
 * widened by `writeInt32AsInt64`; int8/int16 routes are concatenated as int32
 * and narrowed by `set` (wrapping, as `set` does on the typed path); int64 and
 * float64 media are concatenated as their int32 word pairs (bit copies). The
 * output bytes are therefore the typed backend's, whichever tfjs backend runs.
 *
 * tfjs-core and the CPU backend (`@tensorflow/tfjs-backend-cpu`) are loaded on
 * first use, synchronously (`packGroup` is synchronous) through `require`:
 * importing them costs ~0.6 s, which every process importing `pack.ts` would
 * otherwise pay with the default `typed` backend. The CPU backend is what runs unless a caller awaited `selectTfjsBackend()` and
 * `@tensorflow/tfjs-node-gpu` could be loaded. Measured far slower than the
 * typed path for these copies (bench/README.md, pack): it exists to compare
 * and as the seam for a device backend, not as the default.
 */
import { createRequire } from 'node:module';
import type * as Tf from '@tensorflow/tfjs-core';
import { type Fill, type IntegerArray, type PackBackend, type Run, isFill } from './pack-backend.js';
import { writeInt32AsInt64, int64Words } from './typed-arrays.js';
import type { TypedArray } from './types.js';

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

let loaded: typeof Tf | null = null;

/**
 * tfjs-core with the CPU backend registered. Prod mode silences tfjs's
 * "install the node backend" console notice and skips its debug checks.
 */
function tfjs(): typeof Tf {
  if (loaded === null) {
    const require = createRequire(import.meta.url);
    const tf = require('@tensorflow/tfjs-core') as typeof Tf;
    require('@tensorflow/tfjs-backend-cpu');
    tf.enableProdMode();
    loaded = tf;
  }
  return loaded;
}

function int32Tensor(run: Run<IntegerArray>): Tf.Tensor {
  const tf = tfjs();
  if (isFill(run)) return tf.fill([run.length], run.value, 'int32');
  if (run instanceof Int32Array) return tf.tensor1d(run, 'int32');
  // Int32Array.from(BigInt64Array) would throw; Number then ToInt32 wraps
  // exactly like copyElements' Number() store into the narrow output.
  if (run instanceof BigInt64Array) return tf.tensor1d(Int32Array.from(run, Number), 'int32');
  return tf.tensor1d(Int32Array.from(run), 'int32');
}

/**
 * Concatenates the runs as one int32 tensor and hands its values to `use`
 * (read them, never keep them). Inside `tidy` so the tensors are freed; the
 * callback returns nothing because `tidy` walks its result element by element
 * looking for tensors (returning the typed array cost seconds per group).
 */
function concatInt32(runs: readonly Run<IntegerArray>[], use: (values: Int32Array) => void): void {
  const tf = tfjs();
  tf.tidy(() => {
    use(tf.concat(runs.filter((r) => r.length > 0).map(int32Tensor)).dataSync() as Int32Array);
  });
}

function fitsInt32(v: number): boolean {
  return v >= INT32_MIN && v <= INT32_MAX;
}

/** The tfjs-core implementation of `PackBackend`; identical output bytes to `typedPackBackend`. */
export const tfjsPackBackend: PackBackend = {
  name: 'tfjs',
  int64(out, runs) {
    if (out.length === 0) return;
    // A pad value outside int32 cannot travel in an int32 tensor: it goes in
    // as 0 and its run is rewritten in int64 afterwards.
    const wide: { at: number; fill: Fill }[] = [];
    let at = 0;
    const narrow = runs.map((run) => {
      const start = at;
      at += run.length;
      if (!isFill(run) || fitsInt32(run.value)) return run;
      wide.push({ at: start, fill: run });
      return { value: 0, length: run.length };
    });
    concatInt32(narrow, (values) => writeInt32AsInt64(int64Words(out), 0, values));
    for (const w of wide) out.fill(BigInt(w.fill.value), w.at, w.at + w.fill.length);
  },
  float32(out, runs) {
    if (out.length === 0) return;
    const tf = tfjs();
    tf.tidy(() => {
      const parts = runs.filter((r) => r.length > 0).map((r) => (isFill(r) ? tf.fill([r.length], r.value, 'float32') : tf.tensor1d(r, 'float32')));
      out.set(tf.concat(parts).dataSync() as Float32Array);
    });
  },
  integers(out, runs) {
    if (out.length === 0) return;
    concatInt32(runs, (values) => out.set(values));
  },
  bools(out, runs) {
    if (out.length === 0) return;
    const tf = tfjs();
    tf.tidy(() => {
      out.set(tf.cast(tf.concat(runs.filter((r) => r.length > 0).map(int32Tensor)), 'bool').dataSync() as Uint8Array);
    });
  },
  concat(out, parts) {
    if (out.length === 0) return;
    const tf = tfjs();
    if (out instanceof Float32Array) {
      tf.tidy(() => {
        out.set(tf.concat(parts.filter((p) => p.length > 0).map((p) => tf.tensor1d(p as Float32Array, 'float32'))).dataSync() as Float32Array);
      });
    } else if (out instanceof BigInt64Array || out instanceof Float64Array) {
      // 8-byte elements as their two int32 words: a bit copy.
      concatInt32(parts.map(words), (values) => words(out).set(values));
    } else {
      // int32 as is; uint8/bool/int8/int16 widen to int32 exactly and `set` narrows them back.
      concatInt32(parts as readonly IntegerArray[], (values) => out.set(values));
    }
  },
};

function words(a: TypedArray): Int32Array {
  return new Int32Array(a.buffer, a.byteOffset, a.length * 2);
}

/**
 * Makes tfjs run on `@tensorflow/tfjs-node-gpu` when that package can be
 * imported and its backend initialises, else (silently) on the CPU backend.
 * Optional: without it the CPU backend runs. Call once at start-up, before
 * packing; the package is never imported statically because its install
 * needs a native binary that is often unavailable.
 *
 * @returns the active tfjs backend name (`tensorflow` or `cpu`).
 */
export async function selectTfjsBackend(): Promise<string> {
  // Held in a variable so neither tsc nor a bundler tries to resolve it.
  const tf = tfjs();
  const gpuPackage = '@tensorflow/tfjs-node-gpu';
  try {
    await import(gpuPackage);
    if (await tf.setBackend('tensorflow')) return tf.getBackend();
  } catch {
    // Not installed, native library missing, or registered in another
    // tfjs-core instance: the CPU backend stays.
  }
  await tf.setBackend('cpu');
  return tf.getBackend();
}

/** The tfjs backend in use now (initialising the default one if none is yet). */
export function activeTfjsBackend(): string {
  const tf = tfjs();
  tf.backend();
  return tf.getBackend();
}

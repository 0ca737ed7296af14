import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { int64WidenKernelAvailable, widenRunsToInt64 } from '../../../processors/int64-widen.js';

const expected = (runs: Int32Array[]) => runs.flatMap((r) => Array.from(r, (v) => BigInt(v)));

describe('int32 → int64 widening of runs', () => {
  test('the SIMD kernel runs on this Node', () => {
    expect(int64WidenKernelAvailable()).toBe(true);
  });

  test('runs are sign-extended back to back from `at`, across chunk boundaries, leaving the rest of the output alone', () => {
    const int32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
    fc.assert(
      fc.property(
        fc.array(fc.array(int32, { maxLength: 300, size: 'medium' }), { maxLength: 12 }),
        fc.constantFrom(4, 8, 12, 64, 1 << 15),
        fc.nat(5),
        fc.constantFrom(0, 256),
        (lists, chunk, at, minKernel) => {
          const runs = lists.map((l) => Int32Array.from(l));
          const total = runs.reduce((n, r) => n + r.length, 0);
          const out = new BigInt64Array(at + total + 3).fill(-5n);
          widenRunsToInt64(out, at, runs, chunk, minKernel);
          expect(Array.from(out.subarray(at, at + total))).toEqual(expected(runs));
          expect(Array.from(out.subarray(0, at))).toEqual(new Array(at).fill(-5n));
          expect(Array.from(out.subarray(at + total))).toEqual([-5n, -5n, -5n]);
        },
      ),
      { numRuns: 300 },
    );
  });

  test('a long run of extremes through the kernel', () => {
    const run = new Int32Array(10_001);
    for (let i = 0; i < run.length; i++) run[i] = i % 3 === 0 ? -(2 ** 31) : i % 3 === 1 ? 2 ** 31 - 1 : i - 5000;
    const out = new BigInt64Array(run.length + 1);
    widenRunsToInt64(out, 1, [run.subarray(0, 3), run.subarray(3)]);
    expect(Array.from(out.subarray(1))).toEqual(expected([run]));
  });
});

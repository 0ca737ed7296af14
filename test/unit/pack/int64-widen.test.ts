import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { int64WidenKernelAvailable, isWidenable, widenRunsToInt64, widenableBuffer } from '../../../processors/int64-widen.js';
import { SlabPool } from '../../../processors/slab.js';
import { fillZeroOrOne } from '../../../processors/typed-arrays.js';

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

  test('into a widenable buffer (widened in place, no copy-out): the same elements, nothing else of the buffer written', () => {
    const int32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
    const buffer = widenableBuffer(8 * 8192);
    expect(isWidenable(buffer)).toBe(true);
    const all = new BigInt64Array(buffer);
    fc.assert(
      fc.property(
        fc.array(fc.array(int32, { maxLength: 700, size: 'medium' }), { maxLength: 12 }),
        fc.constantFrom(4, 8, 12, 64, 1 << 15),
        fc.nat(all.length),
        fc.nat(7),
        (lists, chunk, start, at) => {
          const runs = lists.map((l) => Int32Array.from(l));
          const total = runs.reduce((n, r) => n + r.length, 0);
          const first = Math.min(start, all.length - (at + total));
          all.fill(-5n);
          widenRunsToInt64(all.subarray(first, first + at + total), at, runs, chunk, 0);
          expect(Array.from(all.subarray(first + at, first + at + total))).toEqual(expected(runs));
          expect(all.subarray(0, first + at).every((v) => v === -5n)).toBe(true);
          expect(all.subarray(first + at + total).every((v) => v === -5n)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  test("the pack stage's pool hands out widenable buffers", () => {
    const pool = new SlabPool(64 << 20);
    const b = pool.take(6 << 20);
    expect(isWidenable(b)).toBe(true);
    expect(b.byteLength).toBeGreaterThanOrEqual(6 << 20);
    pool.give(b);
    expect(pool.take(6 << 20)).toBe(b);
  });
});

describe('0/1 int64 runs (token mask)', () => {
  test('fillZeroOrOne writes exactly [at, end) with 0 or 1, runs longer than its constant source included', () => {
    fc.assert(
      fc.property(fc.nat(40_000), fc.nat(40_000), fc.boolean(), (a, b, one) => {
        const [at, end] = a <= b ? [a, b] : [b, a];
        const out = new BigInt64Array(40_002).fill(-3n);
        fillZeroOrOne(out, at, end, one);
        for (let i = 0; i < out.length; i++) if (out[i] !== (i >= at && i < end ? (one ? 1n : 0n) : -3n)) return false;
        return true;
      }),
      { numRuns: 60 },
    );
  });
});

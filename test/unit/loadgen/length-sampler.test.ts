import { describe, expect, test } from 'vitest';
import { createLengthSampler, expectedLength, Rng, sampleLength } from '../../../loadgen/index.js';

function draw(spec: Parameters<typeof createLengthSampler>[0], count: number, seed: number): number[] {
  const sample = createLengthSampler(spec);
  const rng = new Rng(seed);
  return Array.from({ length: count }, () => sample(rng)).sort((a, b) => a - b);
}

describe('long-tailed length sampler', () => {
  test('the sample median matches the configured median of the log-normal', () => {
    for (const seed of [1, 2, 3]) {
      const xs = draw({ median: 1000, sigma: 1.2, min: 1, max: 65_536 }, 4000, seed);
      const median = xs[2000] as number;
      expect(median).toBeGreaterThan(1000 * 0.92);
      expect(median).toBeLessThan(1000 * 1.08);
    }
  });

  test('the tail piles up exactly at the configured max and never beyond it', () => {
    // P(X > 16000) = P(Z > ln(16)/1.2 ≈ 2.31) ≈ 1%: about 40 of 4000 draws land on the cap.
    const xs = draw({ median: 1000, sigma: 1.2, min: 1, max: 16_000 }, 4000, 7);
    expect(xs[xs.length - 1]).toBe(16_000);
    const atCap = xs.filter((x) => x === 16_000).length;
    expect(atCap).toBeGreaterThan(20);
    expect(atCap).toBeLessThan(70);
  });

  test('the spread follows sigma: the 84th percentile sits one sigma above the median', () => {
    const xs = draw({ median: 500, sigma: 0.8, min: 1, max: 1e6 }, 4000, 11);
    const p84 = xs[Math.floor(0.8413 * xs.length)] as number;
    expect(Math.log(p84 / 500)).toBeGreaterThan(0.8 * 0.9);
    expect(Math.log(p84 / 500)).toBeLessThan(0.8 * 1.1);
  });

  test('lengths are integers within [min, max]', () => {
    const xs = draw({ median: 20, sigma: 2, min: 4, max: 64 }, 2000, 5);
    expect(xs.every((x) => Number.isInteger(x) && x >= 4 && x <= 64)).toBe(true);
    expect(xs[0]).toBe(4);
  });

  test('the numeric mean of the clamped distribution agrees with sampling', () => {
    const spec = { median: 1800, sigma: 1.0, min: 16, max: 61_440 };
    const xs = draw(spec, 20_000, 3);
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    expect(mean / expectedLength(spec)).toBeGreaterThan(0.96);
    expect(mean / expectedLength(spec)).toBeLessThan(1.04);
    // Unclamped log-normal mean is median·e^(σ²/2).
    expect(expectedLength({ ...spec, max: 1e12, min: 0 })).toBeCloseTo(1800 * Math.exp(0.5), -1);
  });

  test('a spec whose median lies outside [min, max] is refused', () => {
    expect(() => createLengthSampler({ median: 100, sigma: 1, min: 200, max: 300 })).toThrow(RangeError);
    expect(() => createLengthSampler({ median: 100, sigma: -1, min: 1, max: 300 })).toThrow(/sigma/);
  });

  test('the same seed draws the same lengths', () => {
    const spec = { median: 100, sigma: 1, min: 1, max: 10_000 };
    const a = new Rng(9);
    const b = new Rng(9);
    const c = new Rng(10);
    const xa = Array.from({ length: 50 }, () => sampleLength(a, spec));
    expect(Array.from({ length: 50 }, () => sampleLength(b, spec))).toEqual(xa);
    expect(Array.from({ length: 50 }, () => sampleLength(c, spec))).not.toEqual(xa);
  });
});

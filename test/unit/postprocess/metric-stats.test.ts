import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import {
  meanOver,
  median,
  pct,
  populationStddev,
  sampleStddev,
  summaryStats,
} from '../../../processors/metric-stats.js';

describe('metric stats', () => {
  test('the mean divides by the given denominator, not by the number of values', () => {
    expect(meanOver([2, 4], 4)).toBe(1.5);
    expect(meanOver([2, 4], 2)).toBe(3);
  });

  test('the median is the middle value for an odd count and the middle pair mean for an even count', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(median([7])).toBe(7);
  });

  test('the sample standard deviation uses n-1 and is NaN for one value', () => {
    expect(sampleStddev([5])).toBeNaN();
    expect(sampleStddev([])).toBeNaN();
    // mean 2.5, squared deviations 2.25+0.25+0.25+2.25 = 5, /3
    expect(sampleStddev([1, 2, 3, 4])).toBeCloseTo(Math.sqrt(5 / 3), 12);
    expect(sampleStddev([0, 2])).toBeCloseTo(Math.SQRT2, 12);
  });

  test('equal values have a standard deviation of exactly zero', () => {
    expect(sampleStddev([0.1, 0.1, 0.1])).toBe(0);
    expect(sampleStddev([3, 3])).toBe(0);
    expect(populationStddev([0.1, 0.1, 0.1])).toBe(0);
  });

  test('the population standard deviation divides by n and is 0 for one value', () => {
    expect(populationStddev([1, 0])).toBe(0.5);
    expect(populationStddev([4])).toBe(0);
  });

  test('a percentile takes the sorted value at min(floor(n*p/100), n-1) without interpolation', () => {
    const oneToHundred = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(pct(oneToHundred, 95)).toBe(96);
    expect(pct(oneToHundred, 99)).toBe(100);
    expect(pct([4, 1, 3, 2], 50)).toBe(3);
    expect(pct([9, 1, 5], 95)).toBe(9); // floor(2.85) = 2
    expect(pct([10, 20], 99)).toBe(20); // floor(1.98) = 1
    expect(pct([7], 95)).toBe(7); // index clamps to n-1
    expect(pct([], 95)).toBe(0);
  });

  test('a percentile never reads past the last value and never changes its input', () => {
    fc.assert(
      fc.property(fc.array(fc.integer(), { minLength: 1, maxLength: 30 }), fc.integer({ min: 0, max: 100 }), (xs, p) => {
        const before = [...xs];
        const sorted = [...xs].sort((a, b) => a - b);
        expect(pct(xs, p)).toBe(sorted[Math.min(Math.floor((xs.length * p) / 100), xs.length - 1)]);
        expect(xs).toEqual(before);
      }),
      { numRuns: 50 },
    );
  });

  test('summary stats emit mean, max, min, median and stddev under the prefix and nothing for no values', () => {
    expect(summaryStats([1, 3], 4, 'x')).toEqual({
      'x/mean': 1,
      'x/max': 3,
      'x/min': 1,
      'x/median': 2,
      'x/stddev': Math.SQRT2,
    });
    expect(summaryStats([], 3, 'x')).toEqual({});
  });
});

/**
 * Summary statistics for rollout metrics (SPEC §4.8, REFERENCE-NOTES 1–4).
 *
 * The reference computes these with Python's `statistics` module; the rules
 * that matter are kept exactly: the mean divides by a caller-given count (not
 * the number of values), the standard deviation is the sample one and NaN
 * below two values, the median averages the middle pair, and percentiles
 * pick one sorted value without interpolation.
 */

/**
 * Sum of `values` divided by `denominator`. The denominator is the row count
 * of the scope being summarised (group, batch, or one agent's results), which
 * can exceed `values.length` when some rows contributed nothing.
 */
export function meanOver(values: readonly number[], denominator: number): number {
  let sum = 0;
  for (const v of values) sum += v;
  return sum / denominator;
}

/**
 * Equal values have exactly zero spread; Python's exact-fraction stdev says
 * so, while a float mean like 0.1+0.1+0.1 = 0.30000000000000004 would not.
 */
function allEqual(values: readonly number[]): boolean {
  return values.every((v) => v === values[0]);
}

/** Ascending numeric copy; never sorts the caller's array. */
function sortedCopy(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/**
 * Median of a non-empty list: the middle value for an odd count, the mean of
 * the two middle values for an even count (so it may be fractional). Returns
 * NaN for an empty list, where Python would raise.
 */
export function median(values: readonly number[]): number {
  const n = values.length;
  if (n === 0) return Number.NaN;
  const s = sortedCopy(values);
  const mid = Math.floor(n / 2);
  return n % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * Sample standard deviation (divisor n-1). NaN for fewer than two values, so a
 * group of one generation reports NaN rather than a misleading 0. Equal
 * values give exactly 0.
 */
export function sampleStddev(values: readonly number[]): number {
  const n = values.length;
  if (n < 2) return Number.NaN;
  if (allEqual(values)) return 0;
  const mean = meanOver(values, n);
  let squares = 0;
  let drift = 0;
  for (const v of values) {
    const d = v - mean;
    squares += d * d;
    drift += d;
  }
  const variance = (squares - (drift * drift) / n) / (n - 1);
  return Math.sqrt(Math.max(variance, 0));
}

/**
 * Population standard deviation (divisor n); 0 for a single value, NaN for
 * none. Used where a spread must be defined for every group size.
 */
export function populationStddev(values: readonly number[]): number {
  const n = values.length;
  if (n === 0) return Number.NaN;
  if (allEqual(values)) return 0;
  const mean = meanOver(values, n);
  let squares = 0;
  let drift = 0;
  for (const v of values) {
    const d = v - mean;
    squares += d * d;
    drift += d;
  }
  return Math.sqrt(Math.max((squares - (drift * drift) / n) / n, 0));
}

/**
 * Percentile without interpolation: the sorted value at index
 * `min(floor(n*p/100), n-1)`; 0 for an empty list. p50 of four values is
 * therefore the upper middle one and p95 of 1..100 is 96.
 */
export function pct(values: readonly number[], p: number): number {
  const n = values.length;
  if (n === 0) return 0;
  const index = Math.min(Math.trunc((n * p) / 100), n - 1);
  return sortedCopy(values)[index]!;
}

/**
 * The five summary keys the reference emits for one metric:
 * `<prefix>/mean` (sum over `denominator`), `/max`, `/min`, `/median` and
 * `/stddev` over `values`. Returns no keys for an empty list (the reference
 * would raise; callers only summarise lists they know are non-empty). The
 * reference's `/histogram` key is deliberately absent (not a number).
 */
export function summaryStats(
  values: readonly number[],
  denominator: number,
  prefix: string,
): Record<string, number> {
  if (values.length === 0) return {};
  let max = -Infinity;
  let min = Infinity;
  for (const v of values) {
    if (v > max) max = v;
    if (v < min) min = v;
  }
  return {
    [`${prefix}/mean`]: meanOver(values, denominator),
    [`${prefix}/max`]: max,
    [`${prefix}/min`]: min,
    [`${prefix}/median`]: median(values),
    [`${prefix}/stddev`]: sampleStddev(values),
  };
}

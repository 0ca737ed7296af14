/** Order statistics shared by `cli/` and `bench/`. */
/** Value at index `min(floor(len*p/100), len-1)` of the sorted values (the SPEC §4.8 rule); NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(Math.floor((sorted.length * p) / 100), sorted.length - 1)]!;
}

/**
 * Long-tailed token lengths. Generation lengths of reasoning models are
 * close to log-normal: most answers are a few hundred to a few thousand
 * tokens, a thin tail runs into the tens of thousands and piles up at the
 * output cap. A log-normal clamped to `[min, max]` reproduces both the body
 * and the pile-up at the cap (the rows a real run reports as truncated).
 */
import type { Rng } from './random.js';

/** A clamped log-normal length distribution. */
export interface LengthSpec {
  /** Median length in tokens (= exp(mu) of the underlying normal). */
  median: number;
  /** Standard deviation of log(length); 0 gives the median every time. */
  sigma: number;
  /** Smallest length returned (≥ 0). */
  min: number;
  /** Largest length returned; draws above it are clamped to it. */
  max: number;
}

/**
 * Draws one length: `clamp(round(median * exp(sigma * Z)), min, max)` with
 * `Z ~ N(0, 1)`. Clamping keeps the median (as long as `min ≤ median ≤ max`)
 * and puts the tail mass `P(X > max)` exactly on `max`.
 */
export function sampleLength(rng: Rng, spec: LengthSpec): number {
  const x = Math.round(spec.median * Math.exp(spec.sigma * rng.normal()));
  return x < spec.min ? spec.min : x > spec.max ? spec.max : x;
}

/**
 * A sampler bound to one spec, for callers that draw many lengths (tests,
 * planners). Throws `RangeError` when the spec is not a distribution:
 * negative or non-finite numbers, `min > max`, or a median outside `[min, max]`.
 */
export function createLengthSampler(spec: LengthSpec): (rng: Rng) => number {
  validateLengthSpec(spec, 'length');
  return (rng) => sampleLength(rng, spec);
}

/** Throws `RangeError` naming `label` when `spec` is not a usable length distribution. */
export function validateLengthSpec(spec: LengthSpec, label: string): void {
  const { median, sigma, min, max } = spec;
  for (const [k, v] of Object.entries({ median, sigma, min, max })) {
    if (!Number.isFinite(v) || v < 0) throw new RangeError(`${label}.${k} must be a finite number ≥ 0, got ${v}`);
  }
  if (min > max) throw new RangeError(`${label}: min ${min} is above max ${max}`);
  if (median < min || median > max) {
    throw new RangeError(`${label}: median ${median} must lie within [min ${min}, max ${max}]`);
  }
}

/**
 * The mean of the clamped distribution, computed numerically (midpoint rule
 * over the normal quantile range ±8σ). Used to size profiles: a profile
 * states a target tokens-per-row and the tests compare against it.
 */
export function expectedLength(spec: LengthSpec): number {
  if (spec.sigma === 0) return Math.min(spec.max, Math.max(spec.min, spec.median));
  const steps = 4000;
  const lo = -8;
  const hi = 8;
  const dz = (hi - lo) / steps;
  let sum = 0;
  for (let i = 0; i < steps; i++) {
    const z = lo + (i + 0.5) * dz;
    const pdf = Math.exp(-0.5 * z * z) / Math.sqrt(2 * Math.PI);
    const x = Math.min(spec.max, Math.max(spec.min, spec.median * Math.exp(spec.sigma * z)));
    sum += x * pdf * dz;
  }
  return sum;
}

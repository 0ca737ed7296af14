/**
 * Seeded pseudo-random numbers for the load generator.
 *
 * Every random choice in `loadgen/` comes from an `Rng` derived from the run
 * seed plus a path of labels (batch, group, row, purpose). Deriving instead
 * of sharing one stream is what keeps the output stable under unrelated
 * changes: turning faults on draws from the `faults` stream only, so the
 * clean rows of a run are byte-for-byte the rows of the same seed without
 * faults, and any row can be rebuilt on its own (an identical duplicate is
 * simply built twice).
 *
 * The generator is sfc32 (small fast counter, 128-bit state), seeded through
 * a murmur3-style mixer; it passes PractRand to terabytes, which is far more
 * than synthetic rollouts need, and costs a few integer ops per draw so a
 * 64k-token row stays cheap.
 */

/** Mixes one 32-bit word into a running hash (murmur3 finalizer on top of a multiply-rotate). */
function mix32(h: number, k: number): number {
  k = Math.imul(k, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

function finalize32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A label in a derivation path: numbers are mixed as integers (two words, so seeds above 2^32 stay distinct), strings by their UTF-16 code units. */
export type SeedPart = number | string;

/**
 * Hashes a derivation path to a 32-bit seed. Pure and stable across runs and
 * platforms; `hashSeed(1, 'a') !== hashSeed(1, 'b')` and order matters.
 */
export function hashSeed(...parts: SeedPart[]): number {
  let h = 0x9e3779b9 | 0;
  for (const part of parts) {
    if (typeof part === 'number') {
      const lo = part | 0;
      const hi = Math.floor(part / 4294967296) | 0;
      h = mix32(mix32(mix32(h, 0x6e756d), lo), hi);
    } else {
      h = mix32(h, 0x737472 ^ part.length);
      for (let i = 0; i < part.length; i++) h = mix32(h, part.charCodeAt(i));
    }
  }
  return finalize32(h);
}

/** A deterministic random stream (sfc32). Not cryptographic. */
export class Rng {
  // State in a typed array, not four number fields: 32-bit values above
  // 2^30 are not small integers in V8, and boxed fields made each draw ~10× slower.
  private readonly s = new Int32Array(4);

  /** Seeds the four state words from one 32-bit seed, then discards a few outputs to decorrelate nearby seeds. */
  constructor(seed: number) {
    this.s[0] = finalize32(seed ^ 0xdeadbeef);
    this.s[1] = finalize32(seed + 0x9e3779b9);
    this.s[2] = finalize32(seed ^ 0x85ebca6b);
    this.s[3] = 1;
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** A uniform unsigned 32-bit integer. */
  u32(): number {
    const s = this.s;
    const a = s[0] as number;
    const b = s[1] as number;
    const c = s[2] as number;
    const d = s[3] as number;
    const t = (((a + b) | 0) + d) | 0;
    s[3] = d + 1;
    s[0] = b ^ (b >>> 9);
    s[1] = c + (c << 3);
    s[2] = ((c << 21) | (c >>> 11)) + t;
    return t >>> 0;
  }

  /** A uniform float in [0, 1). */
  float(): number {
    return this.u32() / 4294967296;
  }

  /** A uniform integer in [lo, hi); `hi - lo` must be in (0, 2^32]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.float() * (hi - lo));
  }

  /** True with probability `p` (p ≤ 0 never, p ≥ 1 always, without drawing a different number of values). */
  chance(p: number): boolean {
    return this.float() < p;
  }

  /** A standard normal deviate (Box–Muller; two uniforms per call, no cached spare so a call's cost never depends on history). */
  normal(): number {
    const u = 1 - this.float(); // (0, 1]: log(0) would be -Infinity
    const v = this.float();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** An exponential deviate with the given mean. */
  exponential(mean: number): number {
    return -Math.log(1 - this.float()) * mean;
  }

  /** One element of a non-empty array, uniformly. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick from an empty array');
    return items[this.int(0, items.length)] as T;
  }

  /** Shuffles `items` in place (Fisher–Yates) and returns it. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(0, i + 1);
      const tmp = items[i] as T;
      items[i] = items[j] as T;
      items[j] = tmp;
    }
    return items;
  }
}

/** An `Rng` for a derivation path, e.g. `deriveRng(seed, 'row', batch, group, i)`. */
export function deriveRng(...parts: SeedPart[]): Rng {
  return new Rng(hashSeed(...parts));
}

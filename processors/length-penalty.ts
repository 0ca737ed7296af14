/**
 * Group-relative length penalty (SPEC §4.3).
 *
 * Within each identity group (`identity_group_size` consecutive rows, by
 * default the whole prompt group) the shortest generation earns +0.5 and the
 * longest -0.5, linearly in between. A correct row (reward above
 * `correct_threshold`) gets the full term; an incorrect one only its negative
 * part, so a wrong answer is never rewarded for being short.
 */
import type { LengthPenaltyConfig } from '../config/schema.js';
import { meanOver } from './metric-stats.js';
import type { Message } from './types.js';

/**
 * Generated tokens of a row: tokens of its generated messages, i.e.
 * assistant messages that carry `generation_logprobs` (SPEC §2's meaning of
 * "generated"; assistant history without logprobs is prompt).
 */
export function generatedTokens(messageLog: readonly Message[]): number {
  let n = 0;
  for (const m of messageLog) {
    if (m.role === 'assistant' && m.generation_logprobs != null) n += m.token_ids.length;
  }
  return n;
}

/**
 * Splits `count` rows into consecutive identity groups of `size` rows (the
 * last one shorter when `size` does not divide `count`); returns each
 * group's [start, end) row range.
 */
export function identityGroupRanges(count: number, size: number): [number, number][] {
  const step = Math.max(1, Math.floor(size));
  const ranges: [number, number][] = [];
  for (let start = 0; start < count; start += step) ranges.push([start, Math.min(start + step, count)]);
  return ranges;
}

/**
 * λ for each length of one identity group: `0.5 - (len - lo)/(hi - lo)` with
 * `lo`/`hi` the group's min/max, and 0 for every row when `hi == lo`.
 */
export function lengthLambdas(lengths: readonly number[]): number[] {
  if (lengths.length === 0) return [];
  const lo = Math.min(...lengths);
  const hi = Math.max(...lengths);
  if (hi === lo) return lengths.map(() => 0);
  return lengths.map((len) => 0.5 - (len - lo) / (hi - lo));
}

/**
 * Applies the length penalty to a group's rewards (row order, input
 * untouched): per identity group of `identityGroupSize` rows,
 * `reward_i += coef * (λ_i if reward_i > correct_threshold else min(0, λ_i))`.
 * Returns the new rewards and the adjustment added to each row; when the
 * penalty is disabled the rewards are copied and `adjustments` is null.
 */
export function applyLengthPenalty(
  rewards: readonly number[],
  lengths: readonly number[],
  identityGroupSize: number,
  cfg: LengthPenaltyConfig,
): { rewards: number[]; adjustments: number[] | null } {
  if (!cfg.enabled) return { rewards: [...rewards], adjustments: null };
  const adjustments: number[] = new Array<number>(rewards.length).fill(0);
  for (const [start, end] of identityGroupRanges(rewards.length, identityGroupSize)) {
    const lambdas = lengthLambdas(lengths.slice(start, end));
    lambdas.forEach((lambda, k) => {
      const i = start + k;
      const term = rewards[i]! > cfg.correct_threshold ? lambda : Math.min(0, lambda);
      adjustments[i] = cfg.coef * term;
    });
  }
  return { rewards: rewards.map((r, i) => r + adjustments[i]!), adjustments };
}

/**
 * `length_penalty/mean` (over the row count), `/min` and `/max` of the
 * adjustments actually added to rewards, over the rows that had the penalty
 * applied; nothing when no row did (penalty disabled).
 */
export function lengthPenaltyMetrics(adjustments: readonly (number | null)[]): Record<string, number> {
  const values = adjustments.filter((a): a is number => a !== null);
  if (values.length === 0) return {};
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return {
    'length_penalty/mean': meanOver(values, adjustments.length),
    'length_penalty/min': min,
    'length_penalty/max': max,
  };
}

/**
 * Reward diagnostics per identity group (SPEC §4.8).
 *
 * Group-relative advantages only carry signal when the generations of one
 * prompt disagree. These metrics say how much of a group or batch is dead
 * weight: the share of identity groups whose rewards are all equal, and the
 * typical within-group spread.
 */
import { populationStddev } from './metric-stats.js';

/** The two facts a row contributes: its identity group and its final reward. */
export interface DiagnosticRow {
  identity_group: string;
  reward: number;
}

/** Rewards per identity group, groups in order of first appearance. */
export function rewardsByIdentityGroup(rows: readonly DiagnosticRow[]): number[][] {
  const groups = new Map<string, number[]>();
  for (const row of rows) {
    let rewards = groups.get(row.identity_group);
    if (rewards === undefined) {
      rewards = [];
      groups.set(row.identity_group, rewards);
    }
    rewards.push(row.reward);
  }
  return [...groups.values()];
}

/**
 * `reward_diagnostics/zero_std_group_fraction` (identity groups whose rewards
 * are all equal, over the number of identity groups),
 * `reward_diagnostics/mean_group_std` (mean over groups of the population
 * standard deviation of their rewards, so a single-row group counts as 0
 * rather than NaN) and `reward_diagnostics/mean_group_range` (mean over
 * groups of max - min). No keys for no rows.
 */
export function rewardDiagnostics(rows: readonly DiagnosticRow[]): Record<string, number> {
  const groups = rewardsByIdentityGroup(rows);
  if (groups.length === 0) return {};
  let zeroStd = 0;
  let stdSum = 0;
  let rangeSum = 0;
  for (const rewards of groups) {
    let min = Infinity;
    let max = -Infinity;
    for (const r of rewards) {
      if (r < min) min = r;
      if (r > max) max = r;
    }
    if (rewards.every((r) => r === rewards[0])) zeroStd += 1;
    stdSum += populationStddev(rewards);
    rangeSum += max - min;
  }
  return {
    'reward_diagnostics/zero_std_group_fraction': zeroStd / groups.length,
    'reward_diagnostics/mean_group_std': stdSum / groups.length,
    'reward_diagnostics/mean_group_range': rangeSum / groups.length,
  };
}

/**
 * Rollout metrics over any set of rows (SPEC §4.8, REFERENCE-NOTES 1–8).
 *
 * Group metrics and batch metrics share one definition: postprocess turns
 * each row into a compact `MetricRow`, and the same function summarises the
 * rows of one group or of every emitted group of a batch. MetricRows are
 * plain JSON so the runtime can carry them between processes (in its
 * changelog) until a batch closes.
 */
import { effortMetrics, type EffortSample } from './effort-shaping.js';
import { lengthPenaltyMetrics } from './length-penalty.js';
import { pct, summaryStats } from './metric-stats.js';
import { perAgentMetrics } from './per-agent-metrics.js';
import type { ResolvedPostprocessConfig } from './postprocess-config.js';
import { rewardDiagnostics } from './reward-diagnostics.js';
import { penaltyRateMetrics } from './reward-penalties.js';
import type { PenaltyKind } from './reward-penalty-config.js';
import type { Message } from './types.js';

/**
 * Everything the metrics need from one postprocessed row. JSON-serialisable
 * (no typed arrays); non-finite numbers need the JSON form's NaN encoding.
 */
export interface MetricRow {
  /** Identity group for reward diagnostics: `<group_id>/<k>`, k-th block of `identity_group_size` rows. */
  identity_group: string;
  /** `agent_ref.name`. */
  agent: string;
  /** User messages in `message_log`. */
  turns: number;
  /** Tokens of every message. */
  total_tokens: number;
  /** Tokens of every assistant message (with or without logprobs). */
  gen_tokens: number;
  /** Longest assistant message, 0 without one. */
  max_gen_tokens_per_turn: number;
  /** Final reward, after effort shaping, penalties and length penalty. */
  reward: number;
  truncated: boolean;
  /** Effort-shaping record; null when shaping is off. */
  effort: EffortSample | null;
  /** Penalty kinds this row triggered. */
  penalties: PenaltyKind[];
  /** Length-penalty adjustment added to the reward; null when the penalty is off. */
  length_penalty: number | null;
  /** The row's `full_result` fields after steps 1–3 (`reward` final), numbers/bools as numbers, others null. */
  result_fields: Record<string, number | null>;
}

/**
 * Per-sample token facts of one message log: turns are user messages, gen
 * tokens every assistant message's tokens, and the longest assistant turn.
 */
export function messageLogShape(messageLog: readonly Message[]): {
  turns: number;
  total_tokens: number;
  gen_tokens: number;
  max_gen_tokens_per_turn: number;
} {
  let turns = 0;
  let total = 0;
  let gen = 0;
  let longest = 0;
  for (const m of messageLog) {
    const n = m.token_ids.length;
    total += n;
    if (m.role === 'user') turns += 1;
    if (m.role === 'assistant') {
      gen += n;
      if (n > longest) longest = n;
    }
  }
  return { turns, total_tokens: total, gen_tokens: gen, max_gen_tokens_per_turn: longest };
}

/**
 * All metrics of §4.8 over `rows` (a group's rows, or every row of a batch's
 * emitted groups in batch order); every mean divides by `rows.length`.
 * `turns_per_sample/{mean,max,min,median,stddev,p95,p99}`,
 * `total_tokens_per_sample/*`, `gen_tokens_per_sample/*`,
 * `max_gen_tokens_per_turn/*` and `/p95`, `total_reward/*`,
 * `natural_termination_rate`, `truncation_rate`, per-agent
 * `<agent>/<key>/*`, `mean_gen_tokens_per_sample`, the effort metrics, the
 * rates of the penalties `cfg` enables, `length_penalty/*` when it is on,
 * and the `reward_diagnostics/*` per identity group. No keys for no rows.
 */
export function computeRolloutMetrics(
  rows: readonly MetricRow[],
  cfg: Pick<ResolvedPostprocessConfig, 'reward_penalties'>,
): Record<string, number> {
  const n = rows.length;
  if (n === 0) return {};
  const turns = rows.map((r) => r.turns);
  const maxGenPerTurn = rows.map((r) => r.max_gen_tokens_per_turn);
  const truncated = rows.filter((r) => r.truncated).length;
  const metrics: Record<string, number> = {
    ...summaryStats(turns, n, 'turns_per_sample'),
    'turns_per_sample/p95': pct(turns, 95),
    'turns_per_sample/p99': pct(turns, 99),
    ...summaryStats(
      rows.map((r) => r.total_tokens),
      n,
      'total_tokens_per_sample',
    ),
    ...summaryStats(
      rows.map((r) => r.gen_tokens),
      n,
      'gen_tokens_per_sample',
    ),
    ...summaryStats(maxGenPerTurn, n, 'max_gen_tokens_per_turn'),
    'max_gen_tokens_per_turn/p95': pct(maxGenPerTurn, 95),
    ...summaryStats(
      rows.map((r) => r.reward),
      n,
      'total_reward',
    ),
    natural_termination_rate: (n - truncated) / n,
    truncation_rate: truncated / n,
  };
  Object.assign(metrics, perAgentMetrics(rows));
  metrics['mean_gen_tokens_per_sample'] = metrics['gen_tokens_per_sample/mean']!;
  Object.assign(
    metrics,
    effortMetrics(rows.map((r) => r.effort)),
    penaltyRateMetrics(
      rows.map((r) => r.penalties),
      cfg.reward_penalties,
    ),
    lengthPenaltyMetrics(rows.map((r) => r.length_penalty)),
    rewardDiagnostics(rows),
  );
  return metrics;
}

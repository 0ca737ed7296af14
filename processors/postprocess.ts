/**
 * The postprocess stage (SPEC §4): one complete prompt group in, one
 * penalised group plus its metrics out, or a whole-group dead letter.
 *
 * Steps run in the SPEC's order on the group's rows in row order: effort
 * shaping, reward penalties, length penalty (these three change the reward),
 * then truncation, mask flags, reward components, violation counts and
 * metrics. Pure: no clocks, no I/O, and never throws on bad data.
 */
import { applyEffortShaping } from './effort-shaping.js';
import { applyLengthPenalty, generatedTokens } from './length-penalty.js';
import { maskSampleField } from './mask-flags.js';
import { numericResultFields } from './per-agent-metrics.js';
import type { ResolvedPostprocessConfig } from './postprocess-config.js';
import {
  extractRewardComponents,
  fillRewardComponents,
  findRewardComponentMismatch,
  rewardComponentNames,
} from './reward-components.js';
import { applyRewardPenalties, findUnsupportedRole } from './reward-penalties.js';
import { computeRolloutMetrics, messageLogShape, type MetricRow } from './rollout-metrics.js';
import { isTruncated } from './truncation.js';
import type { DeadLetterDecision, DeadLetterReason, PenalizedGroup, PenalizedRow, PromptGroup } from './types.js';
import { countViolations, groupHasRoutedExperts } from './violation-counts.js';

export { resolvePostprocessConfig, type ResolvedPostprocessConfig } from './postprocess-config.js';
export type { MetricRow } from './rollout-metrics.js';

export type PostprocessResult =
  | { ok: true; penalized: PenalizedGroup; metrics: Record<string, number>; metricRows: MetricRow[] }
  | { ok: false; deadLetter: DeadLetterDecision };

function groupDeadLetter(group: PromptGroup, reason: DeadLetterReason, message: string): PostprocessResult {
  return {
    ok: false,
    deadLetter: {
      reason,
      message,
      group_id: group.group_id,
      batch_id: group.batch_id,
      row_indices: group.rows.map((r) => r.row_index),
      missing_row_indices: [],
      payloads: [],
    },
  };
}

/** The verifier's reward as a number (Python treats a bool reward as 0/1), or null. */
function verifierReward(value: unknown): number | null {
  if (typeof value === 'number') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  return null;
}

/** `agent_ref.name` as a string (accumulate guarantees one; be lenient anyway). */
function agentName(agentRef: Record<string, unknown>): string {
  const name = agentRef['name'];
  return typeof name === 'string' ? name : JSON.stringify(name ?? null);
}

/**
 * Postprocesses one complete group (rows in row order). On success returns
 * the PenalizedGroup (per row: final and original reward, truncated,
 * mask_sample, filled reward components, violation counts; weight_version
 * and prompt from the first row; sorted component names; the group's
 * metrics), the same metrics, and one MetricRow per row for batch metrics.
 * Whole-group dead letters (payloads empty, row_indices = every row):
 * `unsupported_roles` when a penalty is on and a message role is neither
 * user nor assistant; `reward_components_mismatch` when components are
 * unusable or do not sum to the ORIGINAL reward; `invalid_row` for a
 * non-numeric `full_result.reward`; `processing_error` for an empty group.
 */
export function postprocessGroup(group: PromptGroup, cfg: ResolvedPostprocessConfig): PostprocessResult {
  const rows = group.rows;
  const first = rows[0];
  if (first === undefined) return groupDeadLetter(group, 'processing_error', 'group has no rows');

  const original: number[] = [];
  for (const row of rows) {
    const reward = verifierReward(row.full_result['reward']);
    if (reward === null) {
      return groupDeadLetter(group, 'invalid_row', `row ${row.row_index}: full_result.reward is not a number`);
    }
    original.push(reward);
  }

  const badRole = findUnsupportedRole(rows, cfg.reward_penalties);
  if (badRole !== null) {
    return groupDeadLetter(
      group,
      'unsupported_roles',
      `row ${badRole.row_index}: message role '${badRole.role}' is not supported by reward penalties (only user and assistant)`,
    );
  }

  const extracted = rows.map((row) => extractRewardComponents(row.full_result));
  const components: (Record<string, number> | null)[] = [];
  for (let i = 0; i < rows.length; i++) {
    const e = extracted[i]!;
    if (!e.ok) return groupDeadLetter(group, 'reward_components_mismatch', `row ${rows[i]!.row_index}: ${e.message}`);
    components.push(e.components);
  }
  const mismatch = findRewardComponentMismatch(original, components);
  if (mismatch !== null) {
    return groupDeadLetter(
      group,
      'reward_components_mismatch',
      `row ${rows[mismatch.index]!.row_index}: ${mismatch.message}`,
    );
  }
  const componentNames = rewardComponentNames(components);

  const effort = applyEffortShaping(rows, original, cfg.effort);
  const penalties = applyRewardPenalties(rows, effort.rewards, cfg.reward_penalties);
  const identitySize = cfg.identity_group_size ?? group.num_generations;
  const lengthPenalty = applyLengthPenalty(
    penalties.rewards,
    rows.map((r) => generatedTokens(r.message_log)),
    identitySize,
    cfg.length_penalty,
  );
  const finalRewards = lengthPenalty.rewards;
  const hasRoutes = groupHasRoutedExperts(rows.map((r) => r.message_log));

  const penalizedRows: PenalizedRow[] = [];
  const metricRows: MetricRow[] = [];
  rows.forEach((row, i) => {
    const reward = finalRewards[i]!;
    const truncated = isTruncated(row.full_result, row.message_log, cfg.max_total_tokens_per_sample);
    penalizedRows.push({
      row_index: row.row_index,
      total_reward: reward,
      original_reward: original[i]!,
      truncated,
      mask_sample: maskSampleField(row.full_result, cfg.mask_env_flagged_samples),
      reward_components: fillRewardComponents(components[i]!, componentNames),
      violation_counts: countViolations(row.message_log, hasRoutes),
      agent_ref: row.agent_ref,
      weight_version: row.weight_version,
      message_log: row.message_log,
    });
    metricRows.push({
      identity_group: `${group.group_id}/${Math.floor(i / Math.max(1, identitySize))}`,
      agent: agentName(row.agent_ref),
      ...messageLogShape(row.message_log),
      reward,
      truncated,
      effort: effort.samples[i] ?? null,
      penalties: penalties.fired[i] ?? [],
      length_penalty: lengthPenalty.adjustments?.[i] ?? null,
      // Per-agent metrics read the result after steps 1–3: its reward is the final one.
      result_fields: numericResultFields({ ...row.full_result, reward }),
    });
  });

  const metrics = computeBatchMetrics(metricRows, cfg);
  return {
    ok: true,
    penalized: {
      group_id: group.group_id,
      batch_id: group.batch_id,
      group_index: group.group_index,
      num_generations: group.num_generations,
      prompt_idx: group.prompt_idx,
      weight_version: first.weight_version,
      task_index: group.task_index,
      prompt: first.input_message_log,
      reward_component_names: componentNames,
      rows: penalizedRows,
      metrics,
    },
    metrics,
    metricRows,
  };
}

/**
 * Metrics of §4.8 over any MetricRows: a group's own rows give its group
 * metrics; the rows of every emitted group of a batch, in batch order, give
 * the batch metrics with the same names and definitions (effort, penalty
 * and reward-diagnostic metrics included). Empty input gives no keys.
 */
export function computeBatchMetrics(rows: readonly MetricRow[], cfg: ResolvedPostprocessConfig): Record<string, number> {
  return computeRolloutMetrics(rows, cfg);
}

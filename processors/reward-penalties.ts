/**
 * Applying the reward penalties to a group (SPEC §4.2, REFERENCE-NOTES 8,
 * 14, 15). A triggered penalty sets the reward to exactly 0.0 (not a
 * subtraction), so it also lifts a negatively shaped reward back to 0.0.
 * Counters are independent: one row can add 1 to several kinds, at most 1
 * to each.
 */
import {
  hasDuplicatedReasoning,
  hasEmptyFinalAnswer,
  hasMalformedThinkTag,
  hasUnwantedToken,
} from './reward-penalty-checks.js';
import {
  PENALTY_KINDS,
  anyPenaltyEnabled,
  isPenaltyEnabled,
  type PenaltyKind,
  type ResolvedRewardPenaltyConfig,
} from './reward-penalty-config.js';
import type { RolloutRow } from './types.js';

/** Rate metric name of each penalty kind (the legacy NeMo-Gym names). */
export const PENALTY_RATE_METRIC: Readonly<Record<PenaltyKind, string>> = {
  duplicated_reasoning: 'reasoning_equal_to_final_answer_rate',
  empty_final_answer: 'empty_final_answer_rate',
  unwanted_token: 'unwanted_token_rate',
  malformed_think_tag: 'malformed_think_tag_rate',
};

const SUPPORTED_ROLES: ReadonlySet<string> = new Set(['user', 'assistant']);

/**
 * The first message (in row order) whose role is neither `user` nor
 * `assistant`, when any penalty is on; null otherwise. Such a group cannot be
 * judged by the checks and becomes an `unsupported_roles` dead letter.
 */
export function findUnsupportedRole(
  rows: readonly RolloutRow[],
  cfg: ResolvedRewardPenaltyConfig | null,
): { row_index: number; role: string } | null {
  if (!anyPenaltyEnabled(cfg)) return null;
  for (const row of rows) {
    const bad = row.message_log.find((m) => !SUPPORTED_ROLES.has(m.role));
    if (bad !== undefined) return { row_index: row.row_index, role: bad.role };
  }
  return null;
}

/** Which enabled penalty kinds one row triggers, in application order. */
export function rowPenalties(row: RolloutRow, cfg: ResolvedRewardPenaltyConfig | null): PenaltyKind[] {
  if (cfg === null) return [];
  const fired: PenaltyKind[] = [];
  if (cfg.penalize_duplicated_reasoning && hasDuplicatedReasoning(row.full_result)) {
    fired.push('duplicated_reasoning');
  }
  if (cfg.penalize_empty_final_answer && hasEmptyFinalAnswer(row.full_result)) {
    fired.push('empty_final_answer');
  }
  if (cfg.penalize_unwanted_tokens && hasUnwantedToken(row.message_log, cfg.unwanted_token_ids)) {
    fired.push('unwanted_token');
  }
  if (
    cfg.penalize_malformed_think_tag &&
    hasMalformedThinkTag(row.message_log, row.full_result, {
      thinkOpen: cfg.think_open,
      thinkClose: cfg.think_close,
      thinkingTags: cfg.thinking_tags,
    })
  ) {
    fired.push('malformed_think_tag');
  }
  return fired;
}

/**
 * Applies the enabled penalties to a group's rewards (row order, input
 * untouched). Returns the new rewards (0.0 for every row that triggered any
 * penalty), the kinds each row triggered, and the count per kind (all four
 * kinds always present; all zero when `cfg` is null). Role validation is the
 * caller's job (`findUnsupportedRole`).
 */
export function applyRewardPenalties(
  rows: readonly RolloutRow[],
  rewards: readonly number[],
  cfg: ResolvedRewardPenaltyConfig | null,
): { rewards: number[]; fired: PenaltyKind[][]; counts: Record<PenaltyKind, number> } {
  const counts = Object.fromEntries(PENALTY_KINDS.map((k) => [k, 0])) as Record<PenaltyKind, number>;
  const fired = rows.map((row) => rowPenalties(row, cfg));
  const penalized = rewards.map((r, i) => ((fired[i] ?? []).length > 0 ? 0.0 : r));
  for (const kinds of fired) for (const k of kinds) counts[k] += 1;
  return { rewards: penalized, fired, counts };
}

/**
 * Penalty rate metrics over any set of rows: for each ENABLED kind,
 * `<rate name> = rows that triggered it / numRows`. Disabled kinds (and a
 * null config, or no rows) emit nothing.
 */
export function penaltyRateMetrics(
  firedPerRow: readonly (readonly PenaltyKind[])[],
  cfg: ResolvedRewardPenaltyConfig | null,
): Record<string, number> {
  const out: Record<string, number> = {};
  const numRows = firedPerRow.length;
  if (numRows === 0) return out;
  for (const kind of PENALTY_KINDS) {
    if (!isPenaltyEnabled(cfg, kind)) continue;
    const hits = firedPerRow.filter((kinds) => kinds.includes(kind)).length;
    out[PENALTY_RATE_METRIC[kind]] = hits / numRows;
  }
  return out;
}

/**
 * Length-based reward shaping for low-effort prompts (SPEC §4.1,
 * REFERENCE-NOTES 7 and 13).
 *
 * A prompt whose last user turn contains `low_string` asks for a short
 * answer; its reward is reshaped by how long the final assistant message
 * was. The positive term scales with the verifier's reward and the penalty
 * term does not, so a zero reward can become negative.
 */
import type { EffortConfig } from '../config/schema.js';
import { asObject, hasKey } from './json-access.js';
import { meanOver, median } from './metric-stats.js';
import type { JsonValue, Message, RolloutRow } from './types.js';

/** What effort shaping recorded for one row; null when shaping is off. */
export type EffortSample =
  | { bucket: 'low'; length: number; length_reward: number; reward: number }
  | { bucket: 'high'; length: number };

/** Shaping runs only with a positive weight and a non-empty trigger string. */
export function isEffortShapingEnabled(cfg: EffortConfig): boolean {
  return cfg.low_weight > 0 && cfg.low_string.length > 0;
}

/**
 * Token count of the last message of the log when it is an assistant
 * message, else 0. Deliberately the last message only, not the sum of
 * assistant turns.
 */
export function terminalCompletionLength(messageLog: readonly Message[]): number {
  const last = messageLog[messageLog.length - 1];
  return last !== undefined && last.role === 'assistant' ? last.token_ids.length : 0;
}

/**
 * The content of the last `user` message in `request.input` that has a
 * `content` key, or "" when there is none (or `input` is not a list).
 */
export function lastUserPromptContent(request: Record<string, JsonValue>): JsonValue {
  const input = request['input'];
  if (!Array.isArray(input)) return '';
  for (let i = input.length - 1; i >= 0; i--) {
    const msg = asObject(input[i]);
    if (msg !== null && msg['role'] === 'user' && hasKey(msg, 'content')) return msg['content']!;
  }
  return '';
}

/**
 * Python's `low_string in prompt`: a substring test on string content, an
 * element test on list content (so structured content parts never match),
 * and false for anything else.
 */
function promptContains(prompt: JsonValue, lowString: string): boolean {
  if (typeof prompt === 'string') return prompt.includes(lowString);
  if (Array.isArray(prompt)) return prompt.some((part) => part === lowString);
  return false;
}

/**
 * Applies effort shaping to one group. For a row whose last user prompt in
 * `request.input` contains `low_string`, with `len` its terminal assistant
 * length: `lr = min(1, low_weight * (1 - len/low_ub))` and
 * `reward = r + r*max(lr, 0) + low_penalty*min(lr, 0)`. Other rows keep their
 * reward and are recorded in the high bucket. Returns the new rewards (input
 * untouched) and one sample per row; when shaping is disabled the rewards are
 * copied unchanged and every sample is null.
 */
export function applyEffortShaping(
  rows: readonly RolloutRow[],
  rewards: readonly number[],
  cfg: EffortConfig,
): { rewards: number[]; samples: (EffortSample | null)[] } {
  if (!isEffortShapingEnabled(cfg)) {
    return { rewards: [...rewards], samples: rows.map(() => null) };
  }
  const shaped: number[] = [];
  const samples: EffortSample[] = [];
  rows.forEach((row, i) => {
    const r = rewards[i]!;
    const length = terminalCompletionLength(row.message_log);
    if (promptContains(lastUserPromptContent(row.request), cfg.low_string)) {
      const lengthReward = Math.min(1, cfg.low_weight * (1 - length / cfg.low_ub));
      const reward = r + r * Math.max(lengthReward, 0) + cfg.low_penalty * Math.min(lengthReward, 0);
      shaped.push(reward);
      samples.push({ bucket: 'low', length, length_reward: lengthReward, reward });
    } else {
      shaped.push(r);
      samples.push({ bucket: 'high', length });
    }
  });
  return { rewards: shaped, samples };
}

/**
 * The effort metrics over any set of rows' samples: `mean_length_reward_low`,
 * `mean_reward_low` (the reward right after shaping), `mean_length_low`,
 * `median_length_low`, `mean_length_high`, `median_length_high`. Each mean
 * divides by its bucket's size, and a key is present only when its bucket is
 * non-empty; null samples (shaping off) contribute nothing.
 */
export function effortMetrics(samples: readonly (EffortSample | null)[]): Record<string, number> {
  const lengthRewardsLow: number[] = [];
  const rewardsLow: number[] = [];
  const lowLengths: number[] = [];
  const highLengths: number[] = [];
  for (const s of samples) {
    if (s === null) continue;
    if (s.bucket === 'low') {
      lengthRewardsLow.push(s.length_reward);
      rewardsLow.push(s.reward);
      lowLengths.push(s.length);
    } else {
      highLengths.push(s.length);
    }
  }
  const out: Record<string, number> = {};
  if (lowLengths.length > 0) {
    out['mean_length_reward_low'] = meanOver(lengthRewardsLow, lengthRewardsLow.length);
    out['mean_reward_low'] = meanOver(rewardsLow, rewardsLow.length);
    out['mean_length_low'] = meanOver(lowLengths, lowLengths.length);
    out['median_length_low'] = median(lowLengths);
  }
  if (highLengths.length > 0) {
    out['mean_length_high'] = meanOver(highLengths, highLengths.length);
    out['median_length_high'] = median(highLengths);
  }
  return out;
}

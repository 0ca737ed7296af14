/**
 * Truncation (SPEC §4.4; REFERENCE-NOTES 10–11 as amended by the SPEC).
 *
 * An exact `total == limit` test almost never fires on multi-turn rollouts:
 * when the next prompt no longer fits, the engine returns an empty
 * length-stopped completion that adds no tokens, so the chain stops short of
 * the limit. A row therefore counts as truncated when it reached the budget
 * (`>=`) or when its final response says it was cut for a length reason,
 * which also covers a per-turn `max_output_tokens` cap below the budget.
 */
import { asObject } from './json-access.js';
import type { JsonObject, Message } from './types.js';

/** `incomplete_details.reason` values that mean "stopped by a token limit". */
export const LENGTH_LIMIT_REASONS: ReadonlySet<string> = new Set(['max_output_tokens', 'length', 'max_tokens']);

/** Token count of every message of a message log, whatever the role. */
export function totalTokens(messageLog: readonly Message[]): number {
  let total = 0;
  for (const m of messageLog) total += m.token_ids.length;
  return total;
}

/**
 * `full_result.response.incomplete_details.reason` when it is a string, else
 * null (absent response, a response without incomplete details, or any
 * malformed shape).
 */
export function incompleteReason(fullResult: JsonObject): string | null {
  const response = asObject(fullResult['response']);
  const details = response === null ? null : asObject(response['incomplete_details']);
  const reason = details?.['reason'];
  return typeof reason === 'string' ? reason : null;
}

/**
 * Whether a rollout was cut off by a token limit: its total token count is at
 * least `maxTotalTokensPerSample`, or its final response is incomplete for a
 * length reason. Other reasons (e.g. `content_filter`) and absent or
 * malformed metadata fall back to the token-count test alone.
 */
export function isTruncated(
  fullResult: JsonObject,
  messageLog: readonly Message[],
  maxTotalTokensPerSample: number,
): boolean {
  if (totalTokens(messageLog) >= maxTotalTokensPerSample) return true;
  const reason = incompleteReason(fullResult);
  return reason !== null && LENGTH_LIMIT_REASONS.has(reason);
}

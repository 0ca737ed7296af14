/**
 * Per-row violation counts (SPEC §4.7). They travel in the packed tags so the
 * trainer can see, per sample, how many generated turns were flagged and how
 * many messages had their expert routes filled with the missing-route
 * sentinel.
 */
import type { Message, ViolationCounts } from './types.js';

/** A generated message: role `assistant` with `generation_logprobs`. */
export function isGeneratedMessage(m: Message): boolean {
  return m.role === 'assistant' && m.generation_logprobs != null;
}

/** Whether any message of any row's message log carries routed experts. */
export function groupHasRoutedExperts(messageLogs: readonly (readonly Message[])[]): boolean {
  return messageLogs.some((log) => log.some((m) => m.routed_experts != null));
}

/**
 * Messages of one log (any role) that pack's backfill (SPEC §5.1) gives a
 * sentinel block: those with tokens but no routes, counted only when the
 * group carries routes at all; 0 otherwise.
 */
export function countRoutedExpertsBackfilled(messageLog: readonly Message[], groupHasRoutes: boolean): number {
  if (!groupHasRoutes) return 0;
  return messageLog.filter((m) => m.token_ids.length > 0 && m.routed_experts == null).length;
}

/**
 * The violation counts of one row: over its generated assistant messages,
 * how many are flagged `is_invalid_tool_call`, how many
 * `has_malformed_thinking`, and how many there are; plus the backfill count
 * above. `groupHasRoutes` comes from `groupHasRoutedExperts` over the group.
 */
export function countViolations(messageLog: readonly Message[], groupHasRoutes: boolean): ViolationCounts {
  let invalid = 0;
  let malformed = 0;
  let assistant = 0;
  for (const m of messageLog) {
    if (!isGeneratedMessage(m)) continue;
    assistant += 1;
    if (m.is_invalid_tool_call === true) invalid += 1;
    if (m.has_malformed_thinking === true) malformed += 1;
  }
  return {
    num_invalid_tool_calls: invalid,
    num_malformed_thinking: malformed,
    num_assistant_messages: assistant,
    num_routed_experts_backfilled: countRoutedExpertsBackfilled(messageLog, groupHasRoutes),
  };
}

/**
 * The two per-turn flags NeMo-RL's NeMo-Gym actor puts on each generated
 * assistant message (SPEC §2.1 rule 3, REFERENCE-NOTES 36), read off the
 * output item that turn produced.
 *
 * A tool call the model wrote as text instead of through the structured
 * API was never executed, so a tool-call pattern in the item's text marks
 * it invalid. A thinking tag in a final *content* message means thinking
 * leaked into the answer; in a *reasoning* summary one pair of tags is
 * expected, so only a tag that occurs more than once is malformed.
 */
import { countOccurrences } from './json-access.js';
import { isPlainObject } from './message-validation.js';

export interface OutputItemFlags {
  is_invalid_tool_call: boolean;
  has_malformed_thinking: boolean;
}

/** `list[0].text` when `list` is a non-empty list whose first element is an object with a string `text`. */
function firstText(list: unknown): string | null {
  if (!Array.isArray(list) || list.length === 0) return null;
  const first: unknown = list[0];
  return isPlainObject(first) && typeof first.text === 'string' ? first.text : null;
}

/**
 * Flags of one output item. Content branch: `content[0].text` (content a
 * non-empty list, first part an object with string text): any pattern →
 * invalid tool call, any tag → malformed. Otherwise, reasoning branch
 * (`type` "reasoning", `summary[0].text` likewise): any pattern → invalid,
 * some tag occurring more than once → malformed. The content branch wins
 * when both apply; only the first part is read; string content, null text
 * and empty lists give both false. `patterns` and `thinkingTags` are the
 * resolved lists (defaults already applied, see `resolveIngestConfig`).
 */
export function detectOutputItemFlags(
  item: Readonly<Record<string, unknown>>,
  patterns: readonly string[],
  thinkingTags: readonly string[],
): OutputItemFlags {
  const content = firstText(item.content);
  if (content !== null) {
    return {
      is_invalid_tool_call: patterns.some((p) => content.includes(p)),
      has_malformed_thinking: thinkingTags.some((t) => content.includes(t)),
    };
  }
  const summary = item.type === 'reasoning' ? firstText(item.summary) : null;
  if (summary !== null) {
    return {
      is_invalid_tool_call: patterns.some((p) => summary.includes(p)),
      has_malformed_thinking: thinkingTags.some((t) => countOccurrences(summary, t) > 1),
    };
  }
  return { is_invalid_tool_call: false, has_malformed_thinking: false };
}

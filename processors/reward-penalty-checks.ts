/**
 * The four reward-penalty checks on one row (SPEC §4.2, REFERENCE-NOTES
 * 16–19). Each returns whether the row violates; applying the penalty and
 * counting lives in `reward-penalties.ts`.
 *
 * They assume the Gym message-log shape, where roles strictly alternate user
 * → assistant and tool output is folded into the next user message; the
 * caller rejects any other role before running them.
 */
import { asObject, countOccurrences, hasKey, pyStrip, responseOutputItems } from './json-access.js';
import type { JsonObject, JsonValue, Message } from './types.js';

/**
 * Text of an output item's content, read the reference's way: the first
 * part's `text` for a non-empty list whose first part has one, the string
 * itself for string content, otherwise undefined (null, `[]`, parts without
 * text, non-string text).
 */
function contentText(content: JsonValue | undefined): string | undefined {
  if (typeof content === 'string') return content;
  if (Array.isArray(content) && content.length > 0) {
    const first = asObject(content[0]);
    if (first !== null && hasKey(first, 'text') && typeof first['text'] === 'string') return first['text'];
  }
  return undefined;
}

/**
 * Duplicated reasoning: some `reasoning` output item's stripped
 * `summary[0].text` equals the stripped content text of the NEXT output item
 * (whatever its type), both non-empty. An item without content reads as
 * empty and so never matches.
 */
export function hasDuplicatedReasoning(fullResult: JsonObject): boolean {
  const items = responseOutputItems(fullResult);
  for (let i = 0; i + 1 < items.length; i++) {
    const item = asObject(items[i]);
    if (item === null || item['type'] !== 'reasoning') continue;
    const summary = item['summary'];
    if (!Array.isArray(summary) || summary.length === 0) continue;
    const first = asObject(summary[0]);
    if (first === null || typeof first['text'] !== 'string') continue;
    const reasoning = pyStrip(first['text']);
    const next = asObject(items[i + 1]);
    const text = next === null ? undefined : contentText(hasKey(next, 'content') ? next['content'] : '');
    if (text === undefined) continue;
    const answer = pyStrip(text);
    if (reasoning !== '' && answer !== '' && reasoning === answer) return true;
  }
  return false;
}

/**
 * Empty final answer: unless the LAST output item is a `function_call` (the
 * model is mid tool loop, not answering), walk the items backwards over those
 * with a `content` key and take the first whose content yields text (items
 * with null or `[]` content are skipped, not counted as empty). No such item,
 * or stripped text that is empty, is a violation.
 */
export function hasEmptyFinalAnswer(fullResult: JsonObject): boolean {
  const items = responseOutputItems(fullResult);
  const last = asObject(items[items.length - 1]);
  if (last !== null && last['type'] === 'function_call') return false;
  for (let i = items.length - 1; i >= 0; i--) {
    const item = asObject(items[i]);
    if (item === null || !hasKey(item, 'content')) continue;
    const text = contentText(item['content']);
    if (text !== undefined) return pyStrip(text) === '';
  }
  return true;
}

/**
 * Unwanted tokens: any of `unwantedIds` anywhere in an assistant message's
 * token ids, the terminal position included (a turn may carry several).
 * User messages are ignored; assistant turns count with or without logprobs.
 */
export function hasUnwantedToken(messageLog: readonly Message[], unwantedIds: readonly number[]): boolean {
  if (unwantedIds.length === 0) return false;
  const unwanted = new Set(unwantedIds);
  return messageLog.some((m) => m.role === 'assistant' && m.token_ids.some((id) => unwanted.has(id)));
}

function countId(ids: Int32Array, id: number): number {
  let n = 0;
  for (const t of ids) if (t === id) n += 1;
  return n;
}

/**
 * Token-id check (b) on every adjacent (user, assistant) pair. The user
 * message is that turn's new prompt tokens: balanced open/close ids mean
 * thinking is off (the reply must hold neither id); one more open than close
 * means the prompt ends inside `<think>` (the reply must hold 0 open and
 * exactly 1 close). Any other prompt pattern is a violation.
 */
export function hasThinkTokenMismatch(messageLog: readonly Message[], openId: number, closeId: number): boolean {
  for (let i = 0; i + 1 < messageLog.length; i++) {
    const user = messageLog[i]!;
    const reply = messageLog[i + 1]!;
    if (user.role !== 'user' || reply.role !== 'assistant') continue;
    const promptOpen = countId(user.token_ids, openId);
    const promptClose = countId(user.token_ids, closeId);
    let expectedClose: number;
    if (promptOpen === promptClose) expectedClose = 0;
    else if (promptOpen === promptClose + 1) expectedClose = 1;
    else return true;
    if (countId(reply.token_ids, openId) !== 0 || countId(reply.token_ids, closeId) !== expectedClose) return true;
  }
  return false;
}

/**
 * String check (c): the model can spell a tag out of ordinary tokens that
 * bypass the special ids, so each output item's non-empty `generation_str` is
 * searched: any open tag, or more than one close tag, is a violation.
 */
export function hasThinkTagText(fullResult: JsonObject, openTag: string, closeTag: string): boolean {
  for (const raw of responseOutputItems(fullResult)) {
    const item = asObject(raw);
    const gen = item?.['generation_str'];
    if (typeof gen !== 'string' || gen === '') continue;
    if (countOccurrences(gen, openTag) > 0 || countOccurrences(gen, closeTag) > 1) return true;
  }
  return false;
}

/**
 * Malformed think tags: three checks in order, the first hit wins — (a) an
 * assistant message flagged `has_malformed_thinking`; (b) the token-id check,
 * only when both ids are known; (c) the `generation_str` check with
 * `[openTag, closeTag]`.
 */
export function hasMalformedThinkTag(
  messageLog: readonly Message[],
  fullResult: JsonObject,
  opts: { thinkOpen: number | null; thinkClose: number | null; thinkingTags: readonly [string, string] },
): boolean {
  if (messageLog.some((m) => m.role === 'assistant' && m.has_malformed_thinking === true)) return true;
  if (
    opts.thinkOpen !== null &&
    opts.thinkClose !== null &&
    hasThinkTokenMismatch(messageLog, opts.thinkOpen, opts.thinkClose)
  ) {
    return true;
  }
  return hasThinkTagText(fullResult, opts.thinkingTags[0], opts.thinkingTags[1]);
}

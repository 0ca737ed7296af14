/**
 * The prompt cut (SPEC §5.2, §5.4; REFERENCE-NOTES 29–30, 32).
 *
 * The advantage stage needs each row's prompt tokens to group rows by
 * prompt. The cut is by token count against the group's prompt length, not
 * by role: whole messages are taken while the running count is below P, so
 * assistant history inside the prompt is kept and a message straddling P is
 * taken whole (the cut can overshoot P).
 */
import { int64Words, writeInt32AsInt64 } from './typed-arrays.js';
import type { Message } from './types.js';

/** P: total token count of the prompt messages. */
export function promptTokenCount(prompt: readonly Message[]): number {
  let p = 0;
  for (const m of prompt) p += m.token_ids.length;
  return p;
}

export interface PromptCut {
  /** Number of leading messages that form the row's prompt part. */
  messages: number;
  /** Their total token count (≥ P unless the row is shorter than P). */
  tokens: number;
}

/** The prefix of `messageLog` taken while the running token count is below `promptLength`. */
export function cutPromptPrefix(messageLog: readonly Message[], promptLength: number): PromptCut {
  let tokens = 0;
  let messages = 0;
  while (messages < messageLog.length && tokens < promptLength) {
    tokens += messageLog[messages]!.token_ids.length;
    messages++;
  }
  return { messages, tokens };
}

export interface PromptIdsForAdv {
  /** Row-major `[N, width]` int64. */
  values: BigInt64Array;
  /** P': the longest cut of the group. */
  width: number;
}

/** P': the number of columns of prompt_ids_for_adv, the longest cut. */
export function promptIdsWidth(cuts: readonly PromptCut[]): number {
  let width = 0;
  for (const c of cuts) width = Math.max(width, c.tokens);
  return width;
}

/**
 * Writes each row's cut prefix, flattened, into the dense `[N, width]` int64
 * matrix `out`, right-padding rows shorter than `width` with `padValue`
 * (`pad_values.token_ids`). Every element of `out` is written.
 */
export function writePromptIdsForAdv(
  messageLogs: readonly (readonly Message[])[],
  cuts: readonly PromptCut[],
  padValue: number,
  out: BigInt64Array,
  width: number,
): PromptIdsForAdv {
  const words = int64Words(out);
  const pad = BigInt(padValue);
  messageLogs.forEach((log, row) => {
    let at = row * width;
    const cut = cuts[row]!;
    for (let i = 0; i < cut.messages; i++) {
      const ids = log[i]!.token_ids;
      writeInt32AsInt64(words, at, ids);
      at += ids.length;
    }
    out.fill(pad, at, (row + 1) * width);
  });
  return { values: out, width };
}

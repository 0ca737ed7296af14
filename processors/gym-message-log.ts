/**
 * The walk over `gym_result.response.output` that turns NeMo-Gym's
 * generated items into a NeMo-RL message log (SPEC §2.1 rules 1–5,
 * REFERENCE-NOTES 37).
 *
 * Each trainable item (non-empty `generation_token_ids`) carries the whole
 * prompt it was generated from, earlier turns included, so the prompt must
 * extend the tokens seen so far; only its new tail becomes a user message,
 * followed by the generated tokens as an assistant message. Items are
 * edited in copies: the input record is never changed.
 */
import { detectOutputItemFlags } from './gym-output-flags.js';
import { isTokenList, jsonOutputItem } from './gym-columns.js';
import { float32Logprobs, int32Tail } from './gym-token-lists.js';
import type { ResolvedIngestConfig } from './ingest-config.js';
import { isPlainObject } from './message-validation.js';
import { decodeRoutedExperts } from './routed-experts-envelope.js';
import type { JsonObject, JsonValue, Message, Tensor } from './types.js';

export type MessageLogBuild =
  | { ok: true; messages: Message[]; output: JsonValue[] }
  | { ok: false; reason: 'invalid_row' | 'non_contiguous_tokens'; message: string };

/** Internal early exit; caught in `buildMessageLog`, never escapes. */
class Refusal {
  constructor(
    readonly reason: 'invalid_row' | 'non_contiguous_tokens',
    readonly message: string,
  ) {}
}

const refuse = (message: string): never => {
  throw new Refusal('invalid_row', message);
};

function orRefuse<T>(value: T | string): T {
  return typeof value === 'string' ? refuse(value) : value;
}

/** Token ids of all earlier turns, in a buffer that doubles as it grows. */
class SeenTokens {
  ids = new Int32Array(256);
  length = 0;

  append(tail: Int32Array): void {
    if (this.length + tail.length > this.ids.length) {
      const grown = new Int32Array(Math.max(this.ids.length * 2, this.length + tail.length));
      grown.set(this.ids.subarray(0, this.length));
      this.ids = grown;
    }
    this.ids.set(tail, this.length);
    this.length += tail.length;
  }

  /**
   * The first position where `prompt` departs from the seen tokens, or -1
   * when it begins with them (a shorter prompt departs where it ends).
   */
  firstDifference(prompt: ArrayLike<unknown>): number {
    const ids = this.ids;
    for (let i = 0; i < this.length; i++) if (prompt[i] !== ids[i]) return i;
    return -1;
  }
}

/** Rows `[from, to)` of a `[S, L, K]` tensor, copied so the message owns them. */
function routeRows(t: Tensor, from: number, to: number): Tensor {
  const lk = t.shape[1]! * t.shape[2]!;
  return { dtype: t.dtype, shape: [to - from, t.shape[1]!, t.shape[2]!], data: t.data.slice(from * lk, to * lk) };
}

/** The item's generated ids when it is trainable (present and non-empty), else null. */
function trainableIds(item: Record<string, unknown>, at: string): ArrayLike<unknown> | null {
  const gen = item.generation_token_ids;
  if (gen === undefined || gen === null || (isTokenList(gen) && gen.length === 0)) return null;
  return isTokenList(gen) ? gen : refuse(`${at}.generation_token_ids must be a list of token ids`);
}

/**
 * Builds the message log from the output items. Returns the messages (two
 * per trainable item) and the output list for `full_result`, in which each
 * trainable item has lost `prompt_token_ids`, `generation_token_ids`,
 * `generation_log_probs` and `routed_experts` and, with a decoder, gained
 * `prompt_str` and `generation_str`; other items are the input's own
 * (a version-2 record's typed arrays in them become lists). No
 * trainable item gives an empty list (the caller's `no_generation_data`).
 * Refusals: `non_contiguous_tokens` when a prompt does not begin with the
 * seen tokens; `invalid_row` for a missing or malformed column, a first
 * trainable item that adds no prompt token, logprobs of the wrong length,
 * a bad or too short route block (or one whose `[layers, topk]` differs from
 * an earlier item's), a missing one when routes are required, or a
 * decoder failure.
 */
export function buildMessageLog(output: readonly JsonValue[], cfg: ResolvedIngestConfig): MessageLogBuild {
  const messages: Message[] = [];
  let edited: JsonValue[] | null = null;
  try {
    const seen = new SeenTokens();
    let geometry: readonly number[] | null = null;
    for (let i = 0; i < output.length; i++) {
      const item = output[i];
      if (!isPlainObject(item)) continue;
      const at = `gym_result.response.output[${i}]`;
      const gen = trainableIds(item, at);
      if (gen === null) {
        // full_result keeps it as version 1 had it (a version-2 record may give an empty generation typed arrays).
        const kept = jsonOutputItem(item as JsonObject);
        if (kept !== item) (edited ??= output.slice())[i] = kept;
        continue;
      }

      const prompt = item.prompt_token_ids;
      if (prompt === undefined || prompt === null) refuse(`${at} has generation_token_ids but no prompt_token_ids`);
      if (!isTokenList(prompt)) refuse(`${at}.prompt_token_ids must be a list of token ids`);
      const promptIds = prompt as ArrayLike<unknown>;
      const diff = seen.firstDifference(promptIds);
      if (diff >= 0) {
        throw new Refusal(
          'non_contiguous_tokens',
          `${at}.prompt_token_ids does not begin with the ${seen.length} tokens of the earlier turns (first difference at position ${diff})`,
        );
      }
      const newPrompt = orRefuse(int32Tail(promptIds, seen.length, `${at}.prompt_token_ids`));
      if (messages.length === 0 && newPrompt.length === 0) refuse(`${at} is the first trainable item and adds no prompt token`);
      const genIds = orRefuse(int32Tail(gen, 0, `${at}.generation_token_ids`));
      const logprobs = orRefuse(float32Logprobs(item.generation_log_probs, genIds.length, `${at}.generation_log_probs`));

      const routes = readRoutes(item.routed_experts, promptIds.length + genIds.length, geometry, cfg, at);
      if (routes !== null) {
        geometry = routes.shape;
        // The previous turn's last generated token never went through the
        // model during that turn, so the route captured for it is filler;
        // this item's prefill did run it, so its route replaces the filler.
        const previous = messages[messages.length - 1]?.routed_experts;
        if (previous != null && seen.length > 0) {
          const lk = routes.shape[1]! * routes.shape[2]!;
          const row = routes.data.subarray((seen.length - 1) * lk, seen.length * lk);
          (previous.data as Int32Array).set(row as Int32Array, (previous.shape[0]! - 1) * lk);
        }
      }

      const flags = detectOutputItemFlags(item, cfg.invalid_tool_call_patterns, cfg.thinking_tags);
      const user: Message = { role: 'user', content: '', token_ids: newPrompt };
      const assistant: Message = {
        role: 'assistant',
        content: '',
        token_ids: genIds,
        generation_logprobs: logprobs,
        is_invalid_tool_call: flags.is_invalid_tool_call,
        has_malformed_thinking: flags.has_malformed_thinking,
      };
      if (routes !== null) {
        user.routed_experts = routeRows(routes, seen.length, promptIds.length);
        assistant.routed_experts = routeRows(routes, promptIds.length, promptIds.length + genIds.length);
      }
      messages.push(user, assistant);
      seen.append(newPrompt);
      seen.append(genIds);

      edited ??= output.slice();
      edited[i] = editedItem(item as JsonObject, promptIds as ArrayLike<number>, genIds, cfg, at);
    }
  } catch (e) {
    if (!(e instanceof Refusal)) throw e;
    return { ok: false, reason: e.reason, message: e.message };
  }
  return { ok: true, messages, output: edited ?? output.slice() };
}

/**
 * The item's routes decoded to `[S, L, K]` in the configured dtype, or null
 * when it has none (`null` counts as none). `needed` = prompt + generated
 * tokens; `geometry` = the shape of an earlier item's routes, if any.
 */
function readRoutes(
  raw: unknown,
  needed: number,
  geometry: readonly number[] | null,
  cfg: ResolvedIngestConfig,
  at: string,
): Tensor | null {
  if (raw === undefined || raw === null) {
    if (cfg.require_routed_experts) refuse(`${at} has no routed_experts and ingest.require_routed_experts is true`);
    return null;
  }
  const decoded = decodeRoutedExperts(raw, cfg.routed_experts_dtype);
  if (!decoded.ok) return refuse(`${at}.routed_experts ${decoded.message}`);
  const { shape } = decoded.tensor;
  if (shape[0]! < needed) {
    refuse(`${at}.routed_experts has ${shape[0]} rows; the item's prompt and generated tokens need at least ${needed}`);
  }
  if (geometry !== null && (geometry[1] !== shape[1] || geometry[2] !== shape[2])) {
    refuse(
      `${at}.routed_experts is [${shape.join(', ')}] but an earlier item's is [${geometry.join(', ')}]: layers and topk must agree`,
    );
  }
  return decoded.tensor;
}

/** The item as `full_result` keeps it: token columns and routes dropped, decoded text added when configured. */
function editedItem(item: JsonObject, promptIds: ArrayLike<number>, genIds: Int32Array, cfg: ResolvedIngestConfig, at: string): JsonObject {
  const {
    prompt_token_ids: _prompt,
    generation_token_ids: _gen,
    generation_log_probs: _logprobs,
    routed_experts: _routes,
    ...kept
  } = item;
  if (cfg.decoder === null) return kept;
  let prompt_str: string;
  let generation_str: string;
  try {
    prompt_str = cfg.decoder.decode(promptIds);
    generation_str = cfg.decoder.decode(genIds);
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause);
    return refuse(`${at} token ids cannot be decoded by the ingest tokenizer: ${why}`);
  }
  return { ...kept, prompt_str, generation_str };
}

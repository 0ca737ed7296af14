/**
 * record_to_train_batch (SPEC §5.1–5.4; REFERENCE-NOTES 29–34): one
 * penalized group → the columns the trainer consumes, already in the jagged
 * layout.
 *
 * The reference flattens into padded [N, S] tensors and strips the padding
 * again when packing. Here a planning pass sizes every column from the row
 * lengths, all large columns are carved from one slab (see `slab.ts`), and
 * each message is written once into its place (`TypedArray.set`/`fill`, or a
 * word loop for int32 → int64), so no padded or intermediate copy exists.
 * Every element is written explicitly, zeros included, so a recycled slab
 * needs no clearing.
 */
import type { PackConfig } from '../config/schema.js';
import { isGeneratedAssistant, messageViolationFlags } from './message-violation-masks.js';
import { type MediaPack, writeMediaFields } from './media-fields.js';
import { type PromptIdsForAdv, writePromptIdsForAdv } from './prompt-prefix.js';
import { MISSING_ROUTE_SENTINEL } from './routed-experts-backfill.js';
import { type RowFields, buildRowFields } from './row-fields.js';
import { type SlabSource, freshSlab } from './slab.js';
import { planTrainBatch } from './train-batch-plan.js';
import { copyElements, int64Words, writeInt32AsInt64 } from './typed-arrays.js';
import type { Message, PenalizedGroup, ViolationCounts } from './types.js';

export type RoutedExpertsDType = PackConfig['routed_experts_dtype'];

export interface RoutedExpertsColumn {
  dtype: RoutedExpertsDType;
  layers: number;
  topk: number;
  /** `[total tokens, layers, topk]` row-major, −1 where a message had no routes. */
  values: Int8Array | Int16Array | Int32Array;
}

export interface TrainBatch extends RowFields {
  n: number;
  /** int32 [N]: tokens per row, all messages. */
  inputLengths: Int32Array;
  /** int64 [N+1]: shared by every per-token column. */
  offsets: BigInt64Array;
  inputIds: BigInt64Array;
  /** float32, zeros over messages without logprobs. */
  generationLogprobs: Float32Array;
  /** int64 (the token ids' dtype), 1 over generated assistant messages. */
  tokenMask: BigInt64Array;
  /** Absent when no message of the group has routes. */
  routedExperts: RoutedExpertsColumn | null;
  /** bool 0/1, only with `include_message_violation_fields`. */
  invalidToolCallMask: Uint8Array | null;
  malformedThinkingMask: Uint8Array | null;
  promptIdsForAdv: PromptIdsForAdv;
  /** Per row, from postprocess, with `num_routed_experts_backfilled` computed here. */
  violationCounts: ViolationCounts[];
  media: MediaPack;
}

/**
 * Converts one penalized group into its train batch: backfill routes, cut
 * each row's prompt prefix against the group's prompt length, then flatten
 * every per-token column over each row's messages. Pure: inputs are not
 * modified and share no memory with the result. Large columns are views into
 * one slab taken from `slabs` (fresh memory by default, or a `SlabPool`).
 *
 * @throws PackError `pack_empty_group` when the group has no rows,
 *   `pack_misaligned_logprobs` when a message's logprobs are not one per
 *   token, `pack_bad_routed_experts` / `pack_bad_media` as described by
 *   `backfillMissingRoutedExperts` / `planMediaFields`.
 */
export function recordToTrainBatch(group: PenalizedGroup, cfg: PackConfig, slabs: SlabSource = freshSlab): TrainBatch {
  const p = planTrainBatch(group, cfg, slabs);
  const columns: Columns = {
    inputIdWords: int64Words(p.inputIds),
    generationLogprobs: p.generationLogprobs,
    tokenMask: p.tokenMask,
    routedExperts: p.routedExperts,
    invalidToolCallMask: p.invalidToolCallMask,
    malformedThinkingMask: p.malformedThinkingMask,
  };
  let cursor = 0;
  for (const log of p.logs) {
    for (const m of log) {
      writeMessage(columns, cursor, m);
      cursor += m.token_ids.length;
    }
  }
  return {
    n: p.n,
    inputLengths: p.inputLengths,
    offsets: p.offsets,
    inputIds: p.inputIds,
    generationLogprobs: p.generationLogprobs,
    tokenMask: p.tokenMask,
    routedExperts: p.routedExperts,
    invalidToolCallMask: p.invalidToolCallMask,
    malformedThinkingMask: p.malformedThinkingMask,
    promptIdsForAdv: writePromptIdsForAdv(p.logs, p.cuts, cfg.pad_values['token_ids'] ?? 0, p.promptIds, p.width),
    ...buildRowFields(group),
    violationCounts: p.violationCounts,
    media: writeMediaFields(p.logs, p.media, p.mediaValues),
  };
}

interface Columns {
  inputIdWords: Int32Array;
  generationLogprobs: Float32Array;
  tokenMask: BigInt64Array;
  routedExperts: RoutedExpertsColumn | null;
  invalidToolCallMask: Uint8Array | null;
  malformedThinkingMask: Uint8Array | null;
}

/** Writes one message's tokens at `[at, at + tokens)` of every column, zeros included. */
function writeMessage(c: Columns, at: number, m: Message): void {
  const ids = m.token_ids;
  const end = at + ids.length;
  writeInt32AsInt64(c.inputIdWords, at, ids);
  const lp = m.generation_logprobs;
  if (lp != null) c.generationLogprobs.set(lp, at);
  else c.generationLogprobs.fill(0, at, end);
  const generated = isGeneratedAssistant(m);
  c.tokenMask.fill(generated ? 1n : 0n, at, end);
  if (c.invalidToolCallMask !== null && c.malformedThinkingMask !== null) {
    const flags = messageViolationFlags(m);
    c.invalidToolCallMask.fill(flags.invalidToolCall ? 1 : 0, at, end);
    c.malformedThinkingMask.fill(flags.malformedThinking ? 1 : 0, at, end);
  }
  const re = c.routedExperts;
  if (re !== null) {
    const stride = re.layers * re.topk;
    const block = m.routed_experts;
    if (block != null) copyElements(re.values, at * stride, block.data);
    else re.values.fill(MISSING_ROUTE_SENTINEL, at * stride, end * stride);
  }
}

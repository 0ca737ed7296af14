/**
 * record_to_train_batch (SPEC §5.1–5.4; REFERENCE-NOTES 29–34): one
 * penalized group → the columns the trainer consumes, already in the jagged
 * layout.
 *
 * The reference flattens into padded [N, S] tensors and strips the padding
 * again when packing. Here a planning pass sizes every column from the row
 * lengths, every column gets its view from the output target (see `slab.ts`), and
 * each message is written once into its place (`TypedArray.set`/`fill`; the
 * int32 → int64 token ids by a SIMD kernel, `int64-widen.ts`, through its
 * scratch memory), so no padded or intermediate copy of a column exists.
 * Every element is written explicitly, zeros included, so a recycled slab
 * needs no clearing. The place of each column is the output target's
 * (`PackTarget`): a slab, or the framed Kafka value being built.
 */
import type { PackConfig } from '../config/schema.js';
import { isGeneratedAssistant, messageViolationFlags } from './message-violation-masks.js';
import { widenRunsToInt64 } from './int64-widen.js';
import { type MediaPack, writeMediaFields } from './media-fields.js';
import { assemblePacked } from './pack-layout.js';
import type { PromptCut, PromptIdsForAdv } from './prompt-prefix.js';
import { MISSING_ROUTE_SENTINEL } from './routed-experts-backfill.js';
import type { RowFields } from './row-fields.js';
import { type PackMemory, freshSlab } from './slab.js';
import { type TrainBatchPlan, planTrainBatch, writeRowFields } from './train-batch-plan.js';
import { copyElements, fillZeroOrOne } from './typed-arrays.js';
import type { Message, PackedGroup, PenalizedGroup, ViolationCounts } from './types.js';

/** The dtypes a packed routed-experts field can have (`pack.routed_experts_dtype` other than `auto`). */
export type RoutedExpertsDType = Exclude<PackConfig['routed_experts_dtype'], 'auto'>;

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
  /** pack_payload's view of the same columns (no copy): sample ids, tags, fields in their fixed order (`pack-layout.ts`). */
  packed: PackedGroup;
}

/**
 * Converts one penalized group into its train batch: backfill routes, cut
 * each row's prompt prefix against the group's prompt length, then flatten
 * every per-token column over each row's messages. Pure: inputs are not
 * modified and share no memory with the result. Every column is a view from
 * `memory`: one slab (fresh by default, or a `SlabPool`'s source), or the
 * views a `PackTarget` hands out.
 *
 * @throws PackError `pack_empty_group` when the group has no rows,
 *   `pack_misaligned_logprobs` when a message's logprobs are not one per
 *   token, `pack_bad_routed_experts` / `pack_bad_media` as described by
 *   `backfillMissingRoutedExperts` / `planMediaFields`.
 */
export function recordToTrainBatch(group: PenalizedGroup, cfg: PackConfig, memory: PackMemory = freshSlab): TrainBatch {
  const p = planTrainBatch(group, cfg, memory);
  const columns: Columns = {
    generationLogprobs: p.generationLogprobs,
    tokenMask: p.tokenMask,
    routedExperts: p.routedExperts,
    invalidToolCallMask: p.invalidToolCallMask,
    malformedThinkingMask: p.malformedThinkingMask,
  };
  // input_ids in one pass over all messages (the SIMD widening, int64-widen.ts); the other columns message by message.
  const ids: Int32Array[] = [];
  let cursor = 0;
  for (const log of p.logs) {
    for (const m of log) {
      ids.push(m.token_ids);
      writeMessage(columns, cursor, m);
      cursor += m.token_ids.length;
    }
  }
  widenRunsToInt64(p.inputIds, 0, ids);
  const promptIdsForAdv = writePromptIds(p.logs, p.cuts, cfg.pad_values['token_ids'] ?? 0, p.promptIds, p.width);
  writeMediaFields(p.logs, p.media, p.mediaValues);
  return trainBatchOf(p, group, promptIdsForAdv);
}

/** The batch of a plan whose per-token columns, prompt ids and media values are written; writes the per-row fields. */
export function trainBatchOf(p: TrainBatchPlan, group: PenalizedGroup, promptIdsForAdv: PromptIdsForAdv): TrainBatch {
  const { inputLengths, ...rowFields }: RowFields & { inputLengths: Int32Array } = writeRowFields(p, group);
  const packed = assemblePacked(p.layout, p.views);
  return {
    n: p.n,
    inputLengths,
    offsets: p.offsets,
    inputIds: p.inputIds,
    generationLogprobs: p.generationLogprobs,
    tokenMask: p.tokenMask,
    routedExperts: p.routedExperts,
    invalidToolCallMask: p.invalidToolCallMask,
    malformedThinkingMask: p.malformedThinkingMask,
    promptIdsForAdv,
    ...rowFields,
    violationCounts: p.violationCounts,
    media: { fields: p.index.media.map((k) => packed.fields[k]!), rowShapes: p.layout.tags.map((t) => t.row_shapes) },
    packed,
  };
}

/** `writePromptIdsForAdv` (prompt-prefix.ts) with each row's cut prefix widened by the SIMD kernel: the same elements. */
function writePromptIds(logs: readonly (readonly Message[])[], cuts: readonly PromptCut[], pad: number, out: BigInt64Array, width: number): PromptIdsForAdv {
  const padValue = BigInt(pad);
  logs.forEach((log, row) => {
    const cut = cuts[row]!;
    const runs: Int32Array[] = [];
    for (let i = 0; i < cut.messages; i++) runs.push(log[i]!.token_ids);
    widenRunsToInt64(out, row * width, runs);
    out.fill(padValue, row * width + cut.tokens, (row + 1) * width);
  });
  return { values: out, width };
}

interface Columns {
  generationLogprobs: Float32Array;
  tokenMask: BigInt64Array;
  routedExperts: RoutedExpertsColumn | null;
  invalidToolCallMask: Uint8Array | null;
  malformedThinkingMask: Uint8Array | null;
}

/** Writes one message's tokens at `[at, at + tokens)` of every column but input_ids, zeros included. */
function writeMessage(c: Columns, at: number, m: Message): void {
  const end = at + m.token_ids.length;
  const lp = m.generation_logprobs;
  if (lp != null) c.generationLogprobs.set(lp, at);
  else c.generationLogprobs.fill(0, at, end);
  const generated = isGeneratedAssistant(m);
  fillZeroOrOne(c.tokenMask, at, end, generated);
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

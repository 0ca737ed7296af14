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
import { jaggedOffsets } from './jagged-pack.js';
import { isGeneratedAssistant, messageViolationFlags } from './message-violation-masks.js';
import { type MediaPack, planMediaFields, writeMediaFields } from './media-fields.js';
import { PackError } from './pack-error.js';
import { type PromptIdsForAdv, cutPromptPrefix, promptIdsWidth, promptTokenCount, writePromptIdsForAdv } from './prompt-prefix.js';
import { MISSING_ROUTE_SENTINEL, backfillMissingRoutedExperts } from './routed-experts-backfill.js';
import { type RowFields, buildRowFields } from './row-fields.js';
import { type SlabSource, SlabPlan, freshSlab } from './slab.js';
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
  const n = group.rows.length;
  if (n === 0) throw new PackError('pack_empty_group', `group ${group.group_id} has no rows`);
  const logs = group.rows.map((r) => r.message_log);

  // Kept ahead of the prompt cut as in the reference, whose prompt flatten
  // reuses the backfilled message objects; here the cut only reads token counts.
  const backfill = backfillMissingRoutedExperts(logs);
  const promptLength = promptTokenCount(group.prompt);
  const cuts = logs.map((log) => cutPromptPrefix(log, promptLength));
  const width = promptIdsWidth(cuts);

  const inputLengths = new Int32Array(n);
  logs.forEach((log, row) => {
    let len = 0;
    for (const m of log) {
      const lp = m.generation_logprobs;
      if (lp != null && lp.length !== m.token_ids.length) {
        throw new PackError('pack_misaligned_logprobs', `${m.role} message has ${m.token_ids.length} tokens but ${lp.length} logprobs`, row);
      }
      len += m.token_ids.length;
    }
    inputLengths[row] = len;
  });
  const offsets = jaggedOffsets(inputLengths);
  const total = Number(offsets[n]!);
  const media = planMediaFields(logs);

  const plan = new SlabPlan();
  const ids = plan.add('int64', total);
  const lp = plan.add('float32', total);
  const mask = plan.add('int64', total);
  const routes = backfill === null ? -1 : plan.add(cfg.routed_experts_dtype, total * backfill.layers * backfill.topk);
  const withMasks = cfg.include_message_violation_fields;
  const invalid = withMasks ? plan.add('bool', total) : -1;
  const malformed = withMasks ? plan.add('bool', total) : -1;
  const prompt = plan.add('int64', n * width);
  const mediaViews = media.map((m) => plan.add(m.dtype, m.elements));
  const views = plan.carve(slabs);

  const inputIds = views[ids] as BigInt64Array;
  const columns: Columns = {
    inputIdWords: int64Words(inputIds),
    generationLogprobs: views[lp] as Float32Array,
    tokenMask: views[mask] as BigInt64Array,
    routedExperts:
      backfill === null
        ? null
        : {
            dtype: cfg.routed_experts_dtype,
            layers: backfill.layers,
            topk: backfill.topk,
            values: views[routes] as RoutedExpertsColumn['values'],
          },
    invalidToolCallMask: withMasks ? (views[invalid] as Uint8Array) : null,
    malformedThinkingMask: withMasks ? (views[malformed] as Uint8Array) : null,
  };
  let cursor = 0;
  for (const log of logs) {
    for (const m of log) {
      writeMessage(columns, cursor, m);
      cursor += m.token_ids.length;
    }
  }

  const violationCounts = group.rows.map((r, row) => ({
    ...r.violation_counts,
    num_routed_experts_backfilled: backfill === null ? 0 : backfill.backfilled[row]!,
  }));

  return {
    n,
    inputLengths,
    offsets,
    inputIds,
    generationLogprobs: columns.generationLogprobs,
    tokenMask: columns.tokenMask,
    routedExperts: columns.routedExperts,
    invalidToolCallMask: columns.invalidToolCallMask,
    malformedThinkingMask: columns.malformedThinkingMask,
    promptIdsForAdv: writePromptIdsForAdv(logs, cuts, cfg.pad_values['token_ids'] ?? 0, views[prompt] as BigInt64Array, width),
    ...buildRowFields(group),
    violationCounts,
    media: writeMediaFields(
      logs,
      media,
      mediaViews.map((k) => views[k]!),
    ),
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

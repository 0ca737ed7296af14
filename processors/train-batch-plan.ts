/**
 * The planning pass of record_to_train_batch, shared by the inline `typed`
 * builder (`train-batch.ts`) and the backend builder (`backend-train-batch.ts`):
 * backfill plan, prompt cut, row lengths (refusing misaligned logprobs), media
 * plan, and every large column carved from one slab. Nothing is written yet.
 */
import type { PackConfig } from '../config/schema.js';
import { jaggedOffsets } from './jagged-pack.js';
import { type MediaFieldPlan, planMediaFields } from './media-fields.js';
import { PackError } from './pack-error.js';
import { type PromptCut, cutPromptPrefix, promptIdsWidth, promptTokenCount } from './prompt-prefix.js';
import { type RoutedExpertsBackfill, backfillMissingRoutedExperts } from './routed-experts-backfill.js';
import { type SlabSource, SlabPlan } from './slab.js';
import type { RoutedExpertsColumn } from './train-batch.js';
import type { Message, PenalizedGroup, TypedArray, ViolationCounts } from './types.js';

export interface TrainBatchPlan {
  n: number;
  logs: Message[][];
  backfill: RoutedExpertsBackfill | null;
  cuts: PromptCut[];
  /** Width of `prompt_ids_for_adv`. */
  width: number;
  inputLengths: Int32Array;
  offsets: BigInt64Array;
  media: MediaFieldPlan[];
  /** Slab views, each the final size of its column. */
  inputIds: BigInt64Array;
  generationLogprobs: Float32Array;
  tokenMask: BigInt64Array;
  /** Absent when no message has routes. */
  routedExperts: RoutedExpertsColumn | null;
  /** Only with `include_message_violation_fields`. */
  invalidToolCallMask: Uint8Array | null;
  malformedThinkingMask: Uint8Array | null;
  promptIds: BigInt64Array;
  mediaValues: TypedArray[];
  /** Per row, from postprocess, with `num_routed_experts_backfilled` computed here. */
  violationCounts: ViolationCounts[];
}

/**
 * Plans one group's train batch.
 *
 * @throws PackError `pack_empty_group` when the group has no rows,
 *   `pack_misaligned_logprobs` when a message's logprobs are not one per
 *   token, `pack_bad_routed_experts` / `pack_bad_media` as described by
 *   `backfillMissingRoutedExperts` / `planMediaFields`.
 */
export function planTrainBatch(group: PenalizedGroup, cfg: PackConfig, slabs: SlabSource): TrainBatchPlan {
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

  return {
    n,
    logs,
    backfill,
    cuts,
    width,
    inputLengths,
    offsets,
    media,
    inputIds: views[ids] as BigInt64Array,
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
    promptIds: views[prompt] as BigInt64Array,
    mediaValues: mediaViews.map((k) => views[k]!),
    violationCounts: group.rows.map((r, row) => ({
      ...r.violation_counts,
      num_routed_experts_backfilled: backfill === null ? 0 : backfill.backfilled[row]!,
    })),
  };
}

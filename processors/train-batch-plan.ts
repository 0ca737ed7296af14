/**
 * The planning pass of record_to_train_batch, shared by the inline `typed`
 * builder (`train-batch.ts`) and the backend builder (`backend-train-batch.ts`):
 * backfill plan, prompt cut, row lengths (refusing misaligned logprobs), media
 * plan, the packed group's layout (`pack-layout.ts`), and one view per field
 * from the output target. Nothing is written yet.
 */
import type { PackConfig } from '../config/schema.js';
import { jaggedOffsets } from './jagged-pack.js';
import { type MediaFieldPlan, planMediaFields } from './media-fields.js';
import { PackError } from './pack-error.js';
import { type FieldIndex, planPackedLayout } from './pack-layout.js';
import { type PromptCut, cutPromptPrefix, promptIdsWidth, promptTokenCount } from './prompt-prefix.js';
import { type RoutedExpertsBackfill, backfillMissingRoutedExperts, checkRoutesFit } from './routed-experts-backfill.js';
import { type PackMemory, type PackedLayout, packTarget } from './slab.js';
import { type RowFields, buildRowFields } from './row-fields.js';
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
  /** The packed group planned; `views[i]` is where field i's values go. */
  layout: PackedLayout;
  views: TypedArray[];
  index: FieldIndex;
  /** Views from the target, each the final size of its column. */
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
export function planTrainBatch(group: PenalizedGroup, cfg: PackConfig, memory: PackMemory): TrainBatchPlan {
  const n = group.rows.length;
  if (n === 0) throw new PackError('pack_empty_group', `group ${group.group_id} has no rows`);
  const logs = group.rows.map((r) => r.message_log);

  // Kept ahead of the prompt cut as in the reference, whose prompt flatten
  // reuses the backfilled message objects; here the cut only reads token counts.
  const backfill = backfillMissingRoutedExperts(logs);
  // The packed dtype: the producer's (auto), or the one the config forces; ids that do not fit are refused, never wrapped.
  const routesDtype = backfill === null ? null : cfg.routed_experts_dtype === 'auto' ? backfill.dtype : cfg.routed_experts_dtype;
  if (backfill !== null && routesDtype !== null) checkRoutesFit(logs, routesDtype);
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
  const media = planMediaFields(logs);

  const violationCounts = group.rows.map((r, row) => ({
    ...r.violation_counts,
    num_routed_experts_backfilled: backfill === null ? 0 : backfill.backfilled[row]!,
  }));
  const { layout, index } = planPackedLayout({
    group,
    logs,
    offsets,
    width,
    routes: backfill === null ? null : { dtype: routesDtype!, layers: backfill.layers, topk: backfill.topk },
    violationFields: cfg.include_message_violation_fields,
    media,
    violationCounts,
  });
  const views = packTarget(memory).place(layout);
  if (views.length !== layout.fields.length) throw new Error(`pack target gave ${views.length} views for ${layout.fields.length} fields`);
  const view = <T extends TypedArray>(k: number) => (k < 0 ? null : (views[k] as T));

  return {
    n,
    logs,
    backfill,
    cuts,
    width,
    inputLengths,
    offsets,
    media,
    layout,
    views,
    index,
    inputIds: view<BigInt64Array>(index.inputIds)!,
    generationLogprobs: view<Float32Array>(index.generationLogprobs)!,
    tokenMask: view<BigInt64Array>(index.tokenMask)!,
    routedExperts:
      backfill === null
        ? null
        : {
            dtype: routesDtype!,
            layers: backfill.layers,
            topk: backfill.topk,
            values: view<RoutedExpertsColumn['values']>(index.routedExperts)!,
          },
    invalidToolCallMask: view<Uint8Array>(index.invalidToolCallMask),
    malformedThinkingMask: view<Uint8Array>(index.malformedThinkingMask),
    promptIds: view<BigInt64Array>(index.promptIds)!,
    mediaValues: index.media.map((k) => views[k]!),
    violationCounts,
  };
}

/**
 * Writes the dense per-row fields and `input_lengths` into their views (they
 * are built small, then copied: N elements each) and returns those views.
 */
export function writeRowFields(p: TrainBatchPlan, group: PenalizedGroup): RowFields & { inputLengths: Int32Array } {
  const view = <T extends TypedArray>(k: number) => p.views[k] as T;
  const built = buildRowFields(group);
  const inputLengths = view<Int32Array>(p.index.inputLengths);
  inputLengths.set(p.inputLengths);
  const sampleMask = view<Float32Array>(p.index.sampleMask);
  sampleMask.set(built.sampleMask);
  const totalReward = view<Float32Array>(p.index.totalReward);
  totalReward.set(built.totalReward);
  const truncated = view<Uint8Array>(p.index.truncated);
  truncated.set(built.truncated);
  let maskSample: Uint8Array | null = null;
  if (built.maskSample !== null) {
    maskSample = view<Uint8Array>(p.index.maskSample);
    maskSample.set(built.maskSample);
  }
  const rewardColumns = built.rewardColumns.map((col, k) => {
    const values = view<Float32Array>(p.index.rewards[k]!);
    values.set(col.values);
    return { name: col.name, values };
  });
  return { inputLengths, sampleMask, totalReward, maskSample, truncated, rewardColumns };
}

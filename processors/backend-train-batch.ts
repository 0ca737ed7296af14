/**
 * record_to_train_batch with the per-token work done by a `PackBackend`
 * (SPEC §5.1–5.5): the same planning as `recordToTrainBatch` (backfill plan,
 * prompt cut, row lengths, media plan, one slab), then each per-token column
 * is handed to the backend as one list of per-message runs instead of being
 * written message by message inline.
 *
 * `recordToTrainBatch` stays the `typed` path (it interleaves all columns in
 * one pass over the messages and allocates no run lists); this builder exists
 * for the other backends, and with `typedPackBackend` it must produce the
 * same bytes — the backend tests hold both to that.
 */
import type { PackConfig } from '../config/schema.js';
import { jaggedField, jaggedOffsets } from './jagged-pack.js';
import { isGeneratedAssistant, messageViolationFlags } from './message-violation-masks.js';
import { type MediaFieldPlan, type MediaPack, planMediaFields } from './media-fields.js';
import type { Fill, IntegerArray, PackBackend, Run } from './pack-backend.js';
import { PackError } from './pack-error.js';
import { type PromptCut, cutPromptPrefix, promptIdsWidth, promptTokenCount } from './prompt-prefix.js';
import { MISSING_ROUTE_SENTINEL, backfillMissingRoutedExperts } from './routed-experts-backfill.js';
import { buildRowFields } from './row-fields.js';
import { type SlabSource, SlabPlan, freshSlab } from './slab.js';
import type { RoutedExpertsColumn, TrainBatch } from './train-batch.js';
import type { Message, PenalizedGroup, TypedArray } from './types.js';

const fill = (value: number, length: number): Fill => ({ value, length });

/**
 * The train batch of `group` with every per-token column, `prompt_ids_for_adv`
 * and the media fields written by `backend`. Same contract, errors and
 * result as `recordToTrainBatch`.
 *
 * @throws PackError as `recordToTrainBatch`.
 */
export function recordToTrainBatchWith(
  group: PenalizedGroup,
  cfg: PackConfig,
  backend: PackBackend,
  slabs: SlabSource = freshSlab,
): TrainBatch {
  const n = group.rows.length;
  if (n === 0) throw new PackError('pack_empty_group', `group ${group.group_id} has no rows`);
  const logs = group.rows.map((r) => r.message_log);

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

  const messages = logs.flat();
  const inputIds = views[ids] as BigInt64Array;
  backend.int64(
    inputIds,
    messages.map((m) => m.token_ids),
  );
  const generationLogprobs = views[lp] as Float32Array;
  backend.float32(
    generationLogprobs,
    messages.map((m) => m.generation_logprobs ?? fill(0, m.token_ids.length)),
  );
  const tokenMask = views[mask] as BigInt64Array;
  backend.int64(
    tokenMask,
    messages.map((m) => fill(isGeneratedAssistant(m) ? 1 : 0, m.token_ids.length)),
  );

  let routedExperts: RoutedExpertsColumn | null = null;
  if (backfill !== null) {
    const stride = backfill.layers * backfill.topk;
    const values = views[routes] as RoutedExpertsColumn['values'];
    backend.integers(
      values,
      messages.map((m): Run<IntegerArray> => (m.routed_experts != null ? (m.routed_experts.data as IntegerArray) : fill(MISSING_ROUTE_SENTINEL, m.token_ids.length * stride))),
    );
    routedExperts = { dtype: cfg.routed_experts_dtype, layers: backfill.layers, topk: backfill.topk, values };
  }

  let invalidToolCallMask: Uint8Array | null = null;
  let malformedThinkingMask: Uint8Array | null = null;
  if (withMasks) {
    const flags = messages.map(messageViolationFlags);
    invalidToolCallMask = views[invalid] as Uint8Array;
    malformedThinkingMask = views[malformed] as Uint8Array;
    backend.bools(
      invalidToolCallMask,
      messages.map((m, k) => fill(flags[k]!.invalidToolCall ? 1 : 0, m.token_ids.length)),
    );
    backend.bools(
      malformedThinkingMask,
      messages.map((m, k) => fill(flags[k]!.malformedThinking ? 1 : 0, m.token_ids.length)),
    );
  }

  const promptValues = views[prompt] as BigInt64Array;
  backend.int64(promptValues, promptRuns(logs, cuts, cfg.pad_values['token_ids'] ?? 0, width));

  const violationCounts = group.rows.map((r, row) => ({
    ...r.violation_counts,
    num_routed_experts_backfilled: backfill === null ? 0 : backfill.backfilled[row]!,
  }));

  return {
    n,
    inputLengths,
    offsets,
    inputIds,
    generationLogprobs,
    tokenMask,
    routedExperts,
    invalidToolCallMask,
    malformedThinkingMask,
    promptIdsForAdv: { values: promptValues, width },
    ...buildRowFields(group),
    violationCounts,
    media: mediaWith(
      backend,
      logs,
      media,
      mediaViews.map((k) => views[k]!),
    ),
  };
}

/** Row-major `[N, width]`: each row's cut prefix, then `pad` up to `width` (as `writePromptIdsForAdv`). */
function promptRuns(logs: readonly (readonly Message[])[], cuts: readonly PromptCut[], pad: number, width: number): Run<Int32Array>[] {
  const runs: Run<Int32Array>[] = [];
  logs.forEach((log, row) => {
    const cut = cuts[row]!;
    for (let i = 0; i < cut.messages; i++) runs.push(log[i]!.token_ids);
    if (cut.tokens < width) runs.push(fill(pad, width - cut.tokens));
  });
  return runs;
}

/** `writeMediaFields` with the copy done by `backend`: same fields, offsets and row shapes. */
function mediaWith(
  backend: PackBackend,
  logs: readonly (readonly Message[])[],
  plans: readonly MediaFieldPlan[],
  values: readonly TypedArray[],
): MediaPack {
  const rowShapes = logs.map(() => {
    const shapes: Record<string, number[][]> = {};
    for (const p of plans) shapes[p.name] = [];
    return shapes;
  });
  const fields = plans.map((plan, k) => {
    const out = values[k]!;
    const parts: TypedArray[] = [];
    const lengths = new Array<number>(logs.length).fill(0);
    logs.forEach((log, row) => {
      for (const m of log) {
        const t = m.media?.[plan.name];
        if (t == null) continue;
        parts.push(t.data);
        lengths[row]! += plan.trailing === null ? t.data.length : t.shape[0]!;
        rowShapes[row]![plan.name]!.push([...t.shape]);
      }
    });
    backend.concat(out, parts);
    return jaggedField(plan.name, plan.dtype, out, jaggedOffsets(lengths), plan.trailing ?? []);
  });
  return { fields, rowShapes };
}

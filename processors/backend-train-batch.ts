/**
 * record_to_train_batch with the per-token work done by a `PackBackend`
 * (SPEC §5.1–5.5): the same planning as `recordToTrainBatch`
 * (`planTrainBatch`), then each per-token column
 * is handed to the backend as one list of per-message runs instead of being
 * written message by message inline.
 *
 * `recordToTrainBatch` stays the `typed` path (it interleaves all columns in
 * one pass over the messages and allocates no run lists); this builder exists
 * for the other backends, and with `typedPackBackend` it must produce the
 * same bytes — the backend tests hold both to that.
 */
import type { PackConfig } from '../config/schema.js';
import { isGeneratedAssistant, messageViolationFlags } from './message-violation-masks.js';
import type { MediaFieldPlan } from './media-fields.js';
import type { Fill, IntegerArray, PackBackend, Run } from './pack-backend.js';
import type { PromptCut } from './prompt-prefix.js';
import { MISSING_ROUTE_SENTINEL } from './routed-experts-backfill.js';
import { type PackMemory, freshSlab } from './slab.js';
import { planTrainBatch } from './train-batch-plan.js';
import { type TrainBatch, trainBatchOf } from './train-batch.js';
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
  memory: PackMemory = freshSlab,
): TrainBatch {
  const p = planTrainBatch(group, cfg, memory);
  const messages = p.logs.flat();
  backend.int64(
    p.inputIds,
    messages.map((m) => m.token_ids),
  );
  backend.float32(
    p.generationLogprobs,
    messages.map((m) => m.generation_logprobs ?? fill(0, m.token_ids.length)),
  );
  backend.int64(
    p.tokenMask,
    messages.map((m) => fill(isGeneratedAssistant(m) ? 1 : 0, m.token_ids.length)),
  );
  const re = p.routedExperts;
  if (re !== null) {
    const stride = re.layers * re.topk;
    backend.integers(
      re.values,
      messages.map((m): Run<IntegerArray> => (m.routed_experts != null ? (m.routed_experts.data as IntegerArray) : fill(MISSING_ROUTE_SENTINEL, m.token_ids.length * stride))),
    );
  }
  if (p.invalidToolCallMask !== null && p.malformedThinkingMask !== null) {
    const flags = messages.map(messageViolationFlags);
    backend.bools(
      p.invalidToolCallMask,
      messages.map((m, k) => fill(flags[k]!.invalidToolCall ? 1 : 0, m.token_ids.length)),
    );
    backend.bools(
      p.malformedThinkingMask,
      messages.map((m, k) => fill(flags[k]!.malformedThinking ? 1 : 0, m.token_ids.length)),
    );
  }
  backend.int64(p.promptIds, promptRuns(p.logs, p.cuts, cfg.pad_values['token_ids'] ?? 0, p.width));
  mediaWith(backend, p.logs, p.media, p.mediaValues);
  return trainBatchOf(p, group, { values: p.promptIds, width: p.width });
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

/** `writeMediaFields`' values with the copy done by `backend` (offsets and row shapes are the layout's). */
function mediaWith(
  backend: PackBackend,
  logs: readonly (readonly Message[])[],
  plans: readonly MediaFieldPlan[],
  values: readonly TypedArray[],
): void {
  plans.forEach((plan, k) => {
    const parts: TypedArray[] = [];
    for (const log of logs) {
      for (const m of log) {
        const t = m.media?.[plan.name];
        if (t != null) parts.push(t.data);
      }
    }
    backend.concat(values[k]!, parts);
  });
}

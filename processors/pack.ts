/**
 * The pack stage's entry point (SPEC §5): record_to_train_batch then
 * pack_payload, penalized group → packed group.
 *
 * Layouts follow the reference's rule (REFERENCE-NOTES 35): token-aligned
 * columns are jagged over the shared offsets, per-row columns are dense —
 * including `sample_mask`, which is 1-D, and `prompt_ids_for_adv`, which stays
 * padded to [N, P']. Every `PackedField` holds its values in the trainer
 * dtype; narrowing for the wire is the codec's business.
 */
import type { PackConfig } from '../config/schema.js';
import { recordToTrainBatchWith } from './backend-train-batch.js';
import { denseField, jaggedField } from './jagged-pack.js';
import { INVALID_TOOL_CALL_MASK, MALFORMED_THINKING_MASK } from './message-violation-masks.js';
import { type SlabSource, freshSlab } from './slab.js';
import { tfjsPackBackend } from './tfjs-pack.js';
import { type TrainBatch, recordToTrainBatch } from './train-batch.js';
import type { PackedField, PackedGroup, PackedRowTags, PenalizedGroup } from './types.js';

/** What pack_payload stamps on the samples besides the batch itself. */
export interface PayloadIdentity {
  group_id: string;
  batch_id: string;
  weight_version: number;
  prompt_idx: number;
}

/**
 * Packs one penalized group for the trainer's `put_samples`.
 *
 * `cfg.backend` picks who does the per-token copies: `typed` (default, the
 * fastest measured) writes them inline with TypedArray copies
 * (`recordToTrainBatch`); `tfjs` hands them to tfjs-core ops
 * (`tfjs-pack.ts`, CPU backend unless `selectTfjsBackend()` found a GPU one).
 * Both give identical fields, dtypes, shapes and offsets. The large columns share one
 * slab from `slabs`: fresh memory by default; pass a `SlabPool`'s `source`
 * (and `release` the packed group once encoded) to recycle memory between
 * groups. Field values may therefore be views with a non-zero `byteOffset`.
 *
 * @returns sample ids `"{group_id}_g{i}"`, one tag object per row, and the
 *   fields in a fixed order: input_ids, input_lengths, generation_logprobs,
 *   token_mask, sample_mask, prompt_ids_for_adv, [mask_sample], truncated,
 *   total_reward, reward/<name>…, [routed_experts],
 *   [invalid_tool_call_mask, malformed_thinking_mask], media fields (sorted).
 * @throws PackError for a group that cannot be packed (see `recordToTrainBatch`).
 */
export function packGroup(group: PenalizedGroup, cfg: PackConfig, slabs: SlabSource = freshSlab): PackedGroup {
  const batch = cfg.backend === 'tfjs' ? recordToTrainBatchWith(group, cfg, tfjsPackBackend, slabs) : recordToTrainBatch(group, cfg, slabs);
  return packPayload(batch, group);
}

/**
 * pack_payload: wraps a train batch's columns as PackedFields (no copy) and
 * builds sample ids and per-row tags. Violation counts travel in the tags,
 * not as a tensor; media row shapes too.
 */
export function packPayload(batch: TrainBatch, id: PayloadIdentity): PackedGroup {
  const { n, offsets } = batch;
  const fields: PackedField[] = [
    jaggedField('input_ids', 'int64', batch.inputIds, offsets),
    denseField('input_lengths', 'int32', batch.inputLengths, [n]),
    jaggedField('generation_logprobs', 'float32', batch.generationLogprobs, offsets),
    jaggedField('token_mask', 'int64', batch.tokenMask, offsets),
    denseField('sample_mask', 'float32', batch.sampleMask, [n]),
    denseField('prompt_ids_for_adv', 'int64', batch.promptIdsForAdv.values, [n, batch.promptIdsForAdv.width]),
  ];
  if (batch.maskSample !== null) fields.push(denseField('mask_sample', 'bool', batch.maskSample, [n]));
  fields.push(denseField('truncated', 'bool', batch.truncated, [n]));
  fields.push(denseField('total_reward', 'float32', batch.totalReward, [n]));
  for (const col of batch.rewardColumns) fields.push(denseField(col.name, 'float32', col.values, [n]));
  const re = batch.routedExperts;
  if (re !== null) fields.push(jaggedField('routed_experts', re.dtype, re.values, offsets, [re.layers, re.topk]));
  if (batch.invalidToolCallMask !== null) {
    fields.push(jaggedField(INVALID_TOOL_CALL_MASK, 'bool', batch.invalidToolCallMask, offsets));
  }
  if (batch.malformedThinkingMask !== null) {
    fields.push(jaggedField(MALFORMED_THINKING_MASK, 'bool', batch.malformedThinkingMask, offsets));
  }
  fields.push(...batch.media.fields);

  const sample_ids: string[] = [];
  const tags: PackedRowTags[] = [];
  for (let i = 0; i < n; i++) {
    sample_ids.push(`${id.group_id}_g${i}`);
    const counts = batch.violationCounts[i]!;
    tags.push({
      weight_version: id.weight_version,
      prompt_idx: id.prompt_idx,
      group_id: id.group_id,
      num_invalid_tool_calls: counts.num_invalid_tool_calls,
      num_malformed_thinking: counts.num_malformed_thinking,
      num_assistant_messages: counts.num_assistant_messages,
      num_routed_experts_backfilled: counts.num_routed_experts_backfilled,
      row_shapes: batch.media.rowShapes[i]!,
    });
  }
  return { group_id: id.group_id, batch_id: id.batch_id, sample_ids, tags, fields };
}

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
import { type PackMemory, freshSlab } from './slab.js';
import { tfjsPackBackend } from './tfjs-pack.js';
import { recordToTrainBatch } from './train-batch.js';
import type { PackedGroup, PenalizedGroup } from './types.js';

/**
 * Packs one penalized group for the trainer's `put_samples`.
 *
 * `cfg.backend` picks who does the per-token copies: `typed` (default, the
 * fastest measured) writes them inline with TypedArray copies
 * (`recordToTrainBatch`); `tfjs` hands them to tfjs-core ops
 * (`tfjs-pack.ts`, CPU backend unless `selectTfjsBackend()` found a GPU one).
 * Both give identical fields, dtypes, shapes and offsets.
 *
 * Output memory: the whole group is planned first (`pack-layout.ts`), then
 * every field is written once into the view `memory` gives it — one slab
 * (fresh by default; a `SlabPool`'s `source` recycles them: `release` the
 * packed group once encoded) or a `PackTarget`, e.g. the framed Kafka value
 * itself (streams/codecs/framed-pack-target.ts). Field values are therefore
 * views with a non-zero `byteOffset`.
 *
 * @returns sample ids `"{group_id}_g{i}"`, one tag object per row, and the
 *   fields in a fixed order: input_ids, input_lengths, generation_logprobs,
 *   token_mask, sample_mask, prompt_ids_for_adv, [mask_sample], truncated,
 *   total_reward, reward/<name>…, [routed_experts],
 *   [invalid_tool_call_mask, malformed_thinking_mask], media fields (sorted).
 *   Violation counts and media row shapes travel in the tags.
 * @throws PackError for a group that cannot be packed (see `recordToTrainBatch`).
 */
export function packGroup(group: PenalizedGroup, cfg: PackConfig, memory: PackMemory = freshSlab): PackedGroup {
  const batch = cfg.backend === 'tfjs' ? recordToTrainBatchWith(group, cfg, tfjsPackBackend, memory) : recordToTrainBatch(group, cfg, memory);
  return batch.packed;
}

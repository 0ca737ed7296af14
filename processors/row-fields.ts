/**
 * Dense per-row fields of a packed group (SPEC §5.4; REFERENCE-NOTES 23, 28, 33):
 * one value per row, never jagged.
 */
import type { PenalizedGroup } from './types.js';

export interface RewardColumn {
  /** Full field name, `reward/<component>`. */
  name: string;
  values: Float32Array;
}

export interface RowFields {
  /** float32 ones: the stage never masks a sample itself (the trainer applies mask_sample). */
  sampleMask: Float32Array;
  /** float32 final reward (after shaping and penalties), never the sum of components. */
  totalReward: Float32Array;
  /** bool 0/1, or null when postprocess did not compute it (`mask_env_flagged_samples` off). */
  maskSample: Uint8Array | null;
  truncated: Uint8Array;
  /** One float32 column per name of `reward_component_names`, in that order, 0.0 where a row lacks it. */
  rewardColumns: RewardColumn[];
}

/**
 * Builds the dense per-row fields from the penalized rows. `mask_sample` is
 * present when any row carries a non-null value (postprocess sets all or
 * none); a null among them reads as false.
 */
export function buildRowFields(group: PenalizedGroup): RowFields {
  const rows = group.rows;
  const n = rows.length;
  const sampleMask = new Float32Array(n).fill(1);
  const totalReward = new Float32Array(n);
  const truncated = new Uint8Array(n);
  const hasMask = rows.some((r) => r.mask_sample != null);
  const maskSample = hasMask ? new Uint8Array(n) : null;
  const rewardColumns = group.reward_component_names.map((c) => ({ name: `reward/${c}`, values: new Float32Array(n) }));
  rows.forEach((r, i) => {
    totalReward[i] = r.total_reward;
    truncated[i] = r.truncated ? 1 : 0;
    if (maskSample !== null) maskSample[i] = r.mask_sample === true ? 1 : 0;
    const components = r.reward_components;
    if (components == null) return;
    group.reward_component_names.forEach((c, k) => {
      const v = components[c];
      if (v !== undefined) rewardColumns[k]!.values[i] = v;
    });
  });
  return { sampleMask, totalReward, maskSample, truncated, rewardColumns };
}

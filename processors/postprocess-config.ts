/**
 * The postprocess block of the config, resolved once at start-up (SPEC §4,
 * §9) into the plain values `postprocessGroup` and `computeBatchMetrics`
 * read. The result is JSON-serialisable, so a runtime can log it or hand it
 * to another process.
 */
import type { EffortConfig, LengthPenaltyConfig, PostprocessConfig } from '../config/schema.js';
import { ConfigError } from '../errors/index.js';
import {
  resolveRewardPenaltyConfig,
  type ResolvedRewardPenaltyConfig,
  type TagEncoder,
} from './reward-penalty-config.js';

export interface ResolvedPostprocessConfig {
  /** Token budget of one sample; reaching it means truncated. */
  max_total_tokens_per_sample: number;
  /** Gate of the `mask_sample` column (off: the column is null). */
  mask_env_flagged_samples: boolean;
  /** Rows per identity group; null means the group's `num_generations`. */
  identity_group_size: number | null;
  effort: EffortConfig;
  /** Null when the config has no `reward_penalties` block. */
  reward_penalties: ResolvedRewardPenaltyConfig | null;
  length_penalty: LengthPenaltyConfig;
}

function requirePositive(value: number, path: string): number {
  if (!Number.isFinite(value) || value <= 0) throw new ConfigError(path, `must be a positive number, got ${value}`);
  return value;
}

/**
 * Resolves a schema-validated `postprocess` block. `configDir` is the folder
 * of the config file, against which a relative `tokenizer_path` resolves;
 * `tokenizer` may supply an already loaded encoder instead. Throws
 * ConfigError naming the key (e.g.
 * `postprocess.reward_penalties.token_ids.unwanted`) for: unwanted-token
 * penalty without ids, exactly one think id after inference, fewer than two
 * thinking tags while the malformed-think check is on, an unreadable
 * tokenizer, and non-positive budgets or group sizes.
 */
export function resolvePostprocessConfig(
  cfg: PostprocessConfig,
  opts: { configDir: string; tokenizer?: TagEncoder | null },
): ResolvedPostprocessConfig {
  const identity = cfg.identity_group_size ?? null;
  if (identity !== null && (!Number.isInteger(identity) || identity < 1)) {
    throw new ConfigError('postprocess.identity_group_size', `must be a positive integer or null, got ${identity}`);
  }
  const effort: EffortConfig = {
    low_weight: cfg.effort?.low_weight ?? 0.0,
    low_penalty: cfg.effort?.low_penalty ?? 1.0,
    low_ub: requirePositive(cfg.effort?.low_ub ?? 64000, 'postprocess.effort.low_ub'),
    low_string: cfg.effort?.low_string ?? '',
  };
  const lengthPenalty: LengthPenaltyConfig = {
    enabled: cfg.length_penalty?.enabled ?? false,
    coef: cfg.length_penalty?.coef ?? 1.0,
    correct_threshold: cfg.length_penalty?.correct_threshold ?? 0.0,
  };
  return {
    max_total_tokens_per_sample: requirePositive(
      cfg.max_total_tokens_per_sample ?? 65536,
      'postprocess.max_total_tokens_per_sample',
    ),
    mask_env_flagged_samples: cfg.mask_env_flagged_samples ?? true,
    identity_group_size: identity,
    effort,
    reward_penalties: resolveRewardPenaltyConfig(cfg.reward_penalties ?? null, opts),
    length_penalty: lengthPenalty,
  };
}

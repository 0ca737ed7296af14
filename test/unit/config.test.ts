import { describe, expect, test } from 'vitest';
import { configSchema } from '../../config/schema.js';

describe('config schema', () => {
  test('an empty config takes every default of SPEC §9', () => {
    const c = configSchema.parse({});
    expect(c.accumulate.group_timeout_ms).toBe(1_800_000);
    expect(c.postprocess.mask_env_flagged_samples).toBe(true);
    expect(c.postprocess.reward_penalties).toBeNull();
    expect(c.pack.pad_values).toEqual({ token_ids: 0 });
  });
});

import { describe, expect, test } from 'vitest';
import { packGroup } from '../../../processors/pack.js';
import { cfg, field, group, msg, nums } from './builders.js';

const rows = [[msg('user', [1])], [msg('user', [2])], [msg('user', [3])]];

describe('dense per-row fields', () => {
  test('total_reward is the final reward as float32, truncated is bool, sample_mask is float32 ones', () => {
    const packed = packGroup(group(rows, { rewards: [0.5, -1.25, 0.1], truncated: [false, true, false] }), cfg());
    const reward = field(packed, 'total_reward');
    expect(reward.values).toBeInstanceOf(Float32Array);
    expect(reward.shape).toEqual([3]);
    expect(nums(reward.values)).toEqual([0.5, -1.25, Math.fround(0.1)]);
    expect(nums(field(packed, 'truncated').values)).toEqual([0, 1, 0]);
    expect(field(packed, 'truncated').values).toBeInstanceOf(Uint8Array);
    expect(nums(field(packed, 'sample_mask').values)).toEqual([1, 1, 1]);
  });

  test('mask_sample is a bool column when the penalized rows carry it', () => {
    const mask = field(packGroup(group(rows, { maskSample: [true, false, true] }), cfg()), 'mask_sample');
    expect(mask.dtype).toBe('bool');
    expect(mask.layout).toBe('dense');
    expect(nums(mask.values)).toEqual([1, 0, 1]);
  });

  test('mask_sample is absent, not all-false, when postprocess left it null', () => {
    const names = packGroup(group(rows), cfg()).fields.map((f) => f.name);
    expect(names).not.toContain('mask_sample');
  });

  test('reward/<name> columns follow reward_component_names, 0.0 where a row lacks the component or has none', () => {
    const g = group(rows, {
      componentNames: ['accuracy', 'format'],
      components: [{ accuracy: 0.75, format: 0.25 }, { format: 1 }, null],
    });
    const packed = packGroup(g, cfg());
    const names = packed.fields.map((f) => f.name);
    expect(names.slice(names.indexOf('total_reward'))).toEqual(['total_reward', 'reward/accuracy', 'reward/format']);
    expect(field(packed, 'reward/accuracy').dtype).toBe('float32');
    expect(nums(field(packed, 'reward/accuracy').values)).toEqual([0.75, 0, 0]);
    expect(nums(field(packed, 'reward/format').values)).toEqual([0.25, 1, 0]);
  });
});

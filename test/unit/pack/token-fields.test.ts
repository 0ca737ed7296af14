import { describe, expect, test } from 'vitest';
import { packGroup } from '../../../processors/pack.js';
import { PackError } from '../../../processors/pack-error.js';
import { cfg, field, group, msg, nums, thrownBy } from './builders.js';

// user prompt, assistant history (no logprobs), a user turn that carries
// logprobs, then a generated assistant turn.
const log = [
  msg('user', [5, 6]),
  msg('assistant', [7]),
  msg('user', [8], { lp: [-0.5] }),
  msg('assistant', [9, 10], { lp: [-1, -2] }),
];

describe('per-token fields', () => {
  test('input_ids concatenate every message of the row as int64', () => {
    const ids = field(packGroup(group([log]), cfg()), 'input_ids');
    expect(ids.dtype).toBe('int64');
    expect(ids.values).toBeInstanceOf(BigInt64Array);
    expect(nums(ids.values)).toEqual([5, 6, 7, 8, 9, 10]);
  });

  test('widening to int64 sign-extends and keeps the int32 extremes', () => {
    const ids = field(packGroup(group([[msg('user', [-3, 2147483647, -2147483648])]]), cfg()), 'input_ids');
    expect(Array.from(ids.values as BigInt64Array)).toEqual([-3n, 2147483647n, -2147483648n]);
  });

  test('generation_logprobs are zero over messages without logprobs and copied elsewhere', () => {
    const lp = field(packGroup(group([log]), cfg()), 'generation_logprobs');
    expect(lp.dtype).toBe('float32');
    expect(lp.values).toBeInstanceOf(Float32Array);
    expect(nums(lp.values)).toEqual([0, 0, 0, -0.5, -1, -2]);
  });

  test('token_mask is 1 only on generated assistant turns, not on prompt-history assistant turns or user turns with logprobs', () => {
    const mask = field(packGroup(group([log]), cfg()), 'token_mask');
    expect(mask.dtype).toBe('int64');
    expect(mask.values).toBeInstanceOf(BigInt64Array);
    expect(nums(mask.values)).toEqual([0, 0, 0, 0, 1, 1]);
  });

  test('a message whose logprobs are not one per token is refused with a coded error', () => {
    const bad = [msg('assistant', [1, 2], { lp: [-1] })];
    const e = thrownBy(() => packGroup(group([bad]), cfg()));
    expect(e).toBeInstanceOf(PackError);
    expect((e as PackError).code).toBe('pack_misaligned_logprobs');
    expect((e as PackError).row).toBe(0);
  });

  test('a group without rows is refused', () => {
    expect(() => packGroup(group([]), cfg())).toThrow(/no rows/);
  });
});

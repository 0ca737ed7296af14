import { describe, expect, test } from 'vitest';
import { isPythonTruthy, maskSampleField, maskSampleFlag } from '../../../processors/mask-flags.js';
import type { JsonValue } from '../../../processors/types.js';

describe('mask flags', () => {
  test('the first-class mask_sample masks the row', () => {
    expect(maskSampleFlag({ reward: 1, mask_sample: true })).toBe(true);
  });

  test('instance_config.mask_sample masks the row even beside a false first-class field', () => {
    expect(maskSampleFlag({ reward: 1, mask_sample: false, instance_config: { mask_sample: true } })).toBe(true);
  });

  test('a row with neither flag set is not masked, whatever instance_config looks like', () => {
    expect(maskSampleFlag({ reward: 1 })).toBe(false);
    expect(maskSampleFlag({ reward: 1, mask_sample: false, instance_config: { mask_sample: false } })).toBe(false);
    expect(maskSampleFlag({ reward: 1, instance_config: null })).toBe(false);
    expect(maskSampleFlag({ reward: 1, instance_config: 'mask_sample' })).toBe(false);
    expect(maskSampleFlag({ reward: 1, instance_config: { other: true } })).toBe(false);
  });

  test('flags follow Python truthiness', () => {
    const cases: [JsonValue, boolean][] = [
      [true, true],
      [false, false],
      [1, true],
      [-0.5, true],
      [0, false],
      ['false', true],
      ['', false],
      [null, false],
      [[], false],
      [[0], true],
      [{}, false],
      [{ a: 1 }, true],
    ];
    for (const [value, expected] of cases) {
      expect(isPythonTruthy(value)).toBe(expected);
      expect(maskSampleFlag({ reward: 1, instance_config: { mask_sample: value } })).toBe(expected);
      expect(maskSampleFlag({ reward: 1, mask_sample: value })).toBe(expected);
    }
    expect(isPythonTruthy(Number.NaN)).toBe(true);
  });

  test('with the gate off the field is null rather than false', () => {
    expect(maskSampleField({ reward: 1, mask_sample: true }, false)).toBeNull();
    expect(maskSampleField({ reward: 1, mask_sample: true }, true)).toBe(true);
    expect(maskSampleField({ reward: 1 }, true)).toBe(false);
  });
});

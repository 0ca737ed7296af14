import { describe, expect, test } from 'vitest';
import type { LengthPenaltyConfig } from '../../../config/schema.js';
import {
  applyLengthPenalty,
  generatedTokens,
  identityGroupRanges,
  lengthLambdas,
  lengthPenaltyMetrics,
} from '../../../processors/length-penalty.js';
import { gen, history, tokens, user } from './row-builders.js';

const ON: LengthPenaltyConfig = { enabled: true, coef: 1, correct_threshold: 0 };

describe('length penalty', () => {
  test('lambda runs linearly from +0.5 at the shortest to -0.5 at the longest', () => {
    expect(lengthLambdas([10, 20, 30])).toEqual([0.5, 0, -0.5]);
    expect(lengthLambdas([30, 10])).toEqual([-0.5, 0.5]);
  });

  test('lambda is 0 for every row when all lengths are equal (hi == lo)', () => {
    expect(lengthLambdas([5, 5, 5])).toEqual([0, 0, 0]);
    const out = applyLengthPenalty([1, 0, 1], [5, 5, 5], 3, ON);
    expect(out.rewards).toEqual([1, 0, 1]);
    expect(out.adjustments).toEqual([0, 0, 0]);
  });

  test('a correct row gets the full lambda and an incorrect row only its negative part', () => {
    // lambdas [0.5, 0, -0.5]; the last row has reward 0, not above the threshold
    expect(applyLengthPenalty([1, 1, 0], [10, 20, 30], 3, ON).rewards).toEqual([1.5, 1, -0.5]);
    // the short row is wrong: min(0, 0.5) = 0
    expect(applyLengthPenalty([0, 1], [10, 30], 2, ON).rewards).toEqual([0, 0.5]);
  });

  test('coef scales the term and correct_threshold is a strict lower bound', () => {
    const cfg = { enabled: true, coef: 2, correct_threshold: 0.5 };
    const out = applyLengthPenalty([0.5, 0.6], [0, 10], 2, cfg);
    expect(out.adjustments).toEqual([0, -1]);
    expect(out.rewards[0]).toBe(0.5);
    expect(out.rewards[1]).toBeCloseTo(-0.4, 12);
  });

  test('min and max are taken per identity group, not over the whole group', () => {
    expect(applyLengthPenalty([1, 1, 1, 1], [10, 20, 100, 300], 2, ON).rewards).toEqual([1.5, 0.5, 1.5, 0.5]);
    const whole = applyLengthPenalty([1, 1, 1, 1], [10, 20, 100, 300], 4, ON).adjustments!;
    expect(whole[0]).toBe(0.5);
    expect(whole[1]).toBeCloseTo(0.5 - 10 / 290, 12);
    expect(whole[2]).toBeCloseTo(0.5 - 90 / 290, 12);
    expect(whole[3]).toBe(-0.5);
  });

  test('identity groups are consecutive blocks, the last one shorter when the size does not divide', () => {
    expect(identityGroupRanges(5, 2)).toEqual([
      [0, 2],
      [2, 4],
      [4, 5],
    ]);
    expect(identityGroupRanges(3, 3)).toEqual([[0, 3]]);
  });

  test('a disabled penalty leaves rewards alone and reports no adjustments', () => {
    const out = applyLengthPenalty([1, 0], [1, 100], 2, { ...ON, enabled: false });
    expect(out).toEqual({ rewards: [1, 0], adjustments: null });
  });

  test('the length is the generated tokens: assistant messages with logprobs only', () => {
    expect(generatedTokens([user(tokens(5)), history(tokens(7)), user([1]), gen(tokens(3)), gen(tokens(2))])).toBe(5);
  });

  test('length penalty metrics are the mean over rows, min and max of the adjustments', () => {
    expect(lengthPenaltyMetrics([0.5, 0, -0.5, 0.2])).toEqual({
      'length_penalty/mean': 0.05,
      'length_penalty/min': -0.5,
      'length_penalty/max': 0.5,
    });
    expect(lengthPenaltyMetrics([null, null])).toEqual({});
  });
});

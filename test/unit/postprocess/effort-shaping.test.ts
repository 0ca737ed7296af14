import { describe, expect, test } from 'vitest';
import type { EffortConfig } from '../../../config/schema.js';
import {
  applyEffortShaping,
  effortMetrics,
  lastUserPromptContent,
  terminalCompletionLength,
} from '../../../processors/effort-shaping.js';
import type { JsonValue, RolloutRow } from '../../../processors/types.js';
import { gen, row, tokens, user } from './row-builders.js';

const CFG: EffortConfig = { low_weight: 0.5, low_penalty: 2, low_ub: 100, low_string: '/low' };

function effortRow(prompt: string, genLength: number, reward: number): RolloutRow {
  return row({ prompt, reward, messageLog: [user([1]), gen(tokens(genLength))] });
}

function withInput(input: JsonValue): RolloutRow {
  return { ...row({ messageLog: [user([1]), gen(tokens(40))] }), request: { input } };
}

describe('effort shaping', () => {
  test('a triggered row gets r + r*max(lr,0) + low_penalty*min(lr,0) with lr = min(1, w*(1 - len/ub))', () => {
    const rows = [effortRow('think /low please', 40, 1), effortRow('/low', 200, 1), effortRow('/low', 300, 0)];
    const { rewards, samples } = applyEffortShaping(rows, [1, 1, 0], CFG);
    // lr = 0.5*(1-0.4) = 0.3 -> 1 + 0.3; lr = 0.5*(1-2) = -0.5 -> 1 + 2*(-0.5); lr = -1 -> 0 + 2*(-1)
    expect(rewards[0]).toBeCloseTo(1.3, 12);
    expect(rewards[1]).toBeCloseTo(0, 12);
    expect(rewards[2]).toBeCloseTo(-2, 12);
    expect(samples[0]).toEqual({ bucket: 'low', length: 40, length_reward: expect.closeTo(0.3, 12), reward: rewards[0] });
  });

  test('a zero reward can become negative because the penalty term does not scale with the reward', () => {
    const { rewards } = applyEffortShaping([effortRow('/low', 150, 0)], [0], CFG);
    expect(rewards[0]).toBeCloseTo(2 * 0.5 * (1 - 1.5), 12);
  });

  test('the length reward is capped at 1', () => {
    const cfg = { ...CFG, low_weight: 5 };
    const { rewards, samples } = applyEffortShaping([effortRow('/low', 0, 0.75)], [0.75], cfg);
    expect(rewards[0]).toBe(1.5);
    expect(samples[0]).toMatchObject({ length_reward: 1 });
  });

  test('a row without the trigger keeps its reward and lands in the high bucket', () => {
    const { rewards, samples } = applyEffortShaping([effortRow('plain prompt', 10, 0.5)], [0.5], CFG);
    expect(rewards).toEqual([0.5]);
    expect(samples).toEqual([{ bucket: 'high', length: 10 }]);
  });

  test('the length is the last message only, and 0 when the last message is not an assistant turn', () => {
    expect(terminalCompletionLength([user([1]), gen(tokens(30)), user([2]), gen(tokens(7))])).toBe(7);
    expect(terminalCompletionLength([user([1]), gen(tokens(30)), user([2, 3])])).toBe(0);
    expect(terminalCompletionLength([])).toBe(0);
    const r = row({ prompt: '/low', messageLog: [user([1]), gen(tokens(50)), user([2])] });
    // len 0 -> lr = min(1, 0.5) = 0.5 -> 1 + 0.5
    expect(applyEffortShaping([r], [1], CFG).rewards).toEqual([1.5]);
  });

  test('only the last user message with content in request.input triggers shaping', () => {
    const later = withInput([
      { role: 'user', content: '/low' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'now be thorough' },
    ]);
    const contentless = withInput([{ role: 'user', content: 'go /low' }, { role: 'user' }]);
    const system = withInput([{ role: 'system', content: '/low' }, { role: 'user', content: 'hi' }]);
    const { samples } = applyEffortShaping([later, contentless, system], [1, 1, 1], CFG);
    expect(samples.map((s) => s?.bucket)).toEqual(['high', 'low', 'high']);
    expect(lastUserPromptContent({ input: 'not a list' })).toBe('');
  });

  test('structured list content is matched element-wise like Python, so text parts never trigger', () => {
    const parts = withInput([{ role: 'user', content: [{ type: 'input_text', text: '/low' }] }]);
    const bare = withInput([{ role: 'user', content: ['/low'] }]);
    const { samples } = applyEffortShaping([parts, bare], [1, 1], CFG);
    expect(samples.map((s) => s?.bucket)).toEqual(['high', 'low']);
  });

  test('shaping is off with a non-positive weight or an empty trigger string', () => {
    const rows = [effortRow('/low', 40, 1)];
    for (const cfg of [{ ...CFG, low_weight: 0 }, { ...CFG, low_weight: -1 }, { ...CFG, low_string: '' }]) {
      const out = applyEffortShaping(rows, [1], cfg);
      expect(out.rewards).toEqual([1]);
      expect(out.samples).toEqual([null]);
      expect(effortMetrics(out.samples)).toEqual({});
    }
  });

  test('effort metrics divide by their bucket size and appear only for non-empty buckets', () => {
    const rows = [
      effortRow('/low', 40, 1),
      effortRow('/low', 200, 1),
      effortRow('/low', 300, 0),
      effortRow('plain', 10, 0.5),
    ];
    const { samples } = applyEffortShaping(rows, [1, 1, 0, 0.5], CFG);
    const m = effortMetrics(samples);
    expect(Object.keys(m).sort()).toEqual([
      'mean_length_high',
      'mean_length_low',
      'mean_length_reward_low',
      'mean_reward_low',
      'median_length_high',
      'median_length_low',
    ]);
    expect(m['mean_length_reward_low']).toBeCloseTo((0.3 - 0.5 - 1) / 3, 12);
    expect(m['mean_reward_low']).toBeCloseTo((1.3 + 0 - 2) / 3, 12);
    expect(m['mean_length_low']).toBe(180);
    expect(m['median_length_low']).toBe(200);
    expect(m['mean_length_high']).toBe(10);
    expect(m['median_length_high']).toBe(10);

    const onlyHigh = effortMetrics([{ bucket: 'high', length: 4 }, { bucket: 'high', length: 7 }]);
    expect(onlyHigh).toEqual({ mean_length_high: 5.5, median_length_high: 5.5 });
  });
});

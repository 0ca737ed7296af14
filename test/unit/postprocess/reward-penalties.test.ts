import { describe, expect, test } from 'vitest';
import {
  applyRewardPenalties,
  findUnsupportedRole,
  penaltyRateMetrics,
} from '../../../processors/reward-penalties.js';
import type { ResolvedRewardPenaltyConfig } from '../../../processors/reward-penalty-config.js';
import { config, gen, messageItem, reasoningItem, row, user } from './row-builders.js';

function penalties(raw: Record<string, unknown>): ResolvedRewardPenaltyConfig {
  return config({ reward_penalties: raw }).reward_penalties!;
}

const ALL_ON = penalties({
  penalize_duplicated_reasoning: true,
  penalize_empty_final_answer: true,
  penalize_unwanted_tokens: true,
  penalize_malformed_think_tag: true,
  token_ids: { unwanted: [99] },
});

describe('applying reward penalties', () => {
  test('a triggered penalty sets the reward to exactly 0.0, also lifting a negative reward', () => {
    const rows = [row({ output: [messageItem(' ')] }), row({ output: [messageItem(' ')] }), row()];
    const out = applyRewardPenalties(rows, [0.7, -2, 0.9], ALL_ON);
    expect(out.rewards).toEqual([0, 0, 0.9]);
    expect(Object.is(out.rewards[1], 0)).toBe(true);
  });

  test('one row adds one to each kind it triggers, at most one per kind', () => {
    const bad = row({
      output: [reasoningItem('same'), messageItem('same'), messageItem('')],
      messageLog: [user([1]), gen([99, 99]), user([2]), gen([99])],
    });
    const out = applyRewardPenalties([bad, row()], [1, 1], ALL_ON);
    expect(out.counts).toEqual({
      duplicated_reasoning: 1,
      empty_final_answer: 1,
      unwanted_token: 1,
      malformed_think_tag: 0,
    });
    expect(out.fired).toEqual([['duplicated_reasoning', 'empty_final_answer', 'unwanted_token'], []]);
  });

  test('a disabled penalty never fires', () => {
    const cfg = penalties({ penalize_empty_final_answer: true });
    const rows = [row({ messageLog: [user([1]), gen([99], { has_malformed_thinking: true })] })];
    const out = applyRewardPenalties(rows, [1], cfg);
    expect(out.rewards).toEqual([1]);
    expect(out.fired).toEqual([[]]);
  });

  test('a null config applies nothing and returns all four counters at zero', () => {
    const out = applyRewardPenalties([row({ output: [] })], [0.5], null);
    expect(out.rewards).toEqual([0.5]);
    expect(out.counts).toEqual({ duplicated_reasoning: 0, empty_final_answer: 0, unwanted_token: 0, malformed_think_tag: 0 });
  });

  test('malformed think tags use the resolved ids, inferred here from the tokenizer', () => {
    const cfg = penalties({ penalize_malformed_think_tag: true, tokenizer_path: 'tokenizer.json' });
    const good = row({ messageLog: [user([1, 7]), gen([5, 8, 6])] });
    const bad = row({ messageLog: [user([1, 7]), gen([5, 6])] });
    const out = applyRewardPenalties([good, bad], [1, 1], cfg);
    expect(out.rewards).toEqual([1, 0]);
    expect(out.counts.malformed_think_tag).toBe(1);
  });
});

describe('penalty rates', () => {
  test('rates are count over rows and reported only for enabled penalties', () => {
    const cfg = penalties({ penalize_empty_final_answer: true, penalize_unwanted_tokens: true, token_ids: { unwanted: 5 } });
    const fired = [['empty_final_answer'], [], ['empty_final_answer', 'unwanted_token'], []] as const;
    expect(penaltyRateMetrics(fired.map((f) => [...f]), cfg)).toEqual({
      empty_final_answer_rate: 0.5,
      unwanted_token_rate: 0.25,
    });
  });

  test('all four rate names appear when all four penalties are on, zero when nothing fired', () => {
    expect(penaltyRateMetrics([[], []], ALL_ON)).toEqual({
      reasoning_equal_to_final_answer_rate: 0,
      empty_final_answer_rate: 0,
      unwanted_token_rate: 0,
      malformed_think_tag_rate: 0,
    });
  });

  test('a null config or a config with every flag off reports no rates', () => {
    expect(penaltyRateMetrics([[]], null)).toEqual({});
    expect(penaltyRateMetrics([[]], penalties({}))).toEqual({});
  });
});

describe('roles under penalties', () => {
  test('a role other than user or assistant is reported when any penalty is on', () => {
    const rows = [row(), { ...row({ messageLog: [user([1]), { role: 'tool', token_ids: Int32Array.of(2) }, gen([3])] }), row_index: 1 }];
    expect(findUnsupportedRole(rows, ALL_ON)).toEqual({ row_index: 1, role: 'tool' });
  });

  test('roles are not checked when no penalty is on', () => {
    const rows = [row({ messageLog: [{ role: 'system', token_ids: Int32Array.of(1) }, gen([3])] })];
    expect(findUnsupportedRole(rows, null)).toBeNull();
    expect(findUnsupportedRole(rows, penalties({}))).toBeNull();
  });
});

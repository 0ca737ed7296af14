import { describe, expect, test } from 'vitest';
import { perAgentMetrics } from '../../../processors/per-agent-metrics.js';
import { rewardDiagnostics } from '../../../processors/reward-diagnostics.js';
import { computeRolloutMetrics, messageLogShape, type MetricRow } from '../../../processors/rollout-metrics.js';
import { config, gen, history, tokens, user } from './row-builders.js';

function metricRow(over: Partial<MetricRow>): MetricRow {
  return {
    identity_group: 'g/0',
    agent: 'math',
    turns: 1,
    total_tokens: 10,
    gen_tokens: 5,
    max_gen_tokens_per_turn: 5,
    reward: 1,
    truncated: false,
    effort: null,
    penalties: [],
    length_penalty: null,
    result_fields: { reward: 1 },
    ...over,
  };
}

const ROWS: MetricRow[] = [
  metricRow({
    turns: 1,
    total_tokens: 10,
    gen_tokens: 6,
    max_gen_tokens_per_turn: 6,
    reward: 1,
    result_fields: { reward: 1, accuracy: 1, note: null },
  }),
  metricRow({
    turns: 2,
    total_tokens: 20,
    gen_tokens: 8,
    max_gen_tokens_per_turn: 5,
    reward: 0,
    truncated: true,
    result_fields: { reward: 0, accuracy: 0, note: null },
  }),
  metricRow({
    identity_group: 'g/1',
    turns: 3,
    total_tokens: 30,
    gen_tokens: 12,
    max_gen_tokens_per_turn: 12,
    reward: 0.5,
    result_fields: { reward: 0.5, accuracy: null, extra: 4 },
  }),
  metricRow({
    identity_group: 'g/1',
    agent: 'code',
    turns: 2,
    total_tokens: 40,
    gen_tokens: 20,
    max_gen_tokens_per_turn: 20,
    reward: 1,
    result_fields: { reward: 1, passed: 1 },
  }),
];

describe('rollout metrics', () => {
  test('every metric of a group has the hand-computed value and no other key appears', () => {
    const m = computeRolloutMetrics(ROWS, config({}));
    const expected: Record<string, number> = {
      'turns_per_sample/mean': 2,
      'turns_per_sample/max': 3,
      'turns_per_sample/min': 1,
      'turns_per_sample/median': 2,
      'turns_per_sample/stddev': Math.sqrt(2 / 3),
      'turns_per_sample/p95': 3,
      'turns_per_sample/p99': 3,
      'total_tokens_per_sample/mean': 25,
      'total_tokens_per_sample/max': 40,
      'total_tokens_per_sample/min': 10,
      'total_tokens_per_sample/median': 25,
      'total_tokens_per_sample/stddev': Math.sqrt(500 / 3),
      'gen_tokens_per_sample/mean': 11.5,
      'gen_tokens_per_sample/max': 20,
      'gen_tokens_per_sample/min': 6,
      'gen_tokens_per_sample/median': 10,
      'gen_tokens_per_sample/stddev': Math.sqrt(115 / 3),
      'max_gen_tokens_per_turn/mean': 10.75,
      'max_gen_tokens_per_turn/max': 20,
      'max_gen_tokens_per_turn/min': 5,
      'max_gen_tokens_per_turn/median': 9,
      'max_gen_tokens_per_turn/stddev': Math.sqrt(142.75 / 3),
      'max_gen_tokens_per_turn/p95': 20,
      'total_reward/mean': 0.625,
      'total_reward/max': 1,
      'total_reward/min': 0,
      'total_reward/median': 0.75,
      'total_reward/stddev': Math.sqrt(0.6875 / 3),
      natural_termination_rate: 0.75,
      truncation_rate: 0.25,
      mean_gen_tokens_per_sample: 11.5,
      // math: keys of its first result; accuracy is null on one of 3 results, so its mean is 1/3
      'math/reward/mean': 0.5,
      'math/reward/max': 1,
      'math/reward/min': 0,
      'math/reward/median': 0.5,
      'math/reward/stddev': 0.5,
      'math/accuracy/mean': 1 / 3,
      'math/accuracy/max': 1,
      'math/accuracy/min': 0,
      'math/accuracy/median': 0.5,
      'math/accuracy/stddev': Math.SQRT1_2,
      'code/reward/mean': 1,
      'code/reward/max': 1,
      'code/reward/min': 1,
      'code/reward/median': 1,
      'code/reward/stddev': Number.NaN,
      'code/passed/mean': 1,
      'code/passed/max': 1,
      'code/passed/min': 1,
      'code/passed/median': 1,
      'code/passed/stddev': Number.NaN,
      // identity groups g/0 = [1, 0] and g/1 = [0.5, 1]
      'reward_diagnostics/zero_std_group_fraction': 0,
      'reward_diagnostics/mean_group_std': 0.375,
      'reward_diagnostics/mean_group_range': 0.75,
    };
    expect(Object.keys(m).sort()).toEqual(Object.keys(expected).sort());
    for (const [key, value] of Object.entries(expected)) {
      if (Number.isNaN(value)) expect(m[key], key).toBeNaN();
      else expect(m[key], key).toBeCloseTo(value, 12);
    }
  });

  test('a single row has NaN in every stddev key', () => {
    const m = computeRolloutMetrics([ROWS[0]!], config({}));
    const stddevKeys = Object.keys(m).filter((k) => k.endsWith('/stddev'));
    expect(stddevKeys.sort()).toEqual([
      'gen_tokens_per_sample/stddev',
      'math/accuracy/stddev',
      'math/reward/stddev',
      'max_gen_tokens_per_turn/stddev',
      'total_reward/stddev',
      'total_tokens_per_sample/stddev',
      'turns_per_sample/stddev',
    ]);
    for (const k of stddevKeys) expect(m[k], k).toBeNaN();
    expect(m['reward_diagnostics/zero_std_group_fraction']).toBe(1);
  });

  test('effort, penalty and length-penalty metrics appear alongside when rows carry them', () => {
    const cfg = config({ reward_penalties: { penalize_empty_final_answer: true } });
    const rows = [
      metricRow({ effort: { bucket: 'low', length: 4, length_reward: 0.5, reward: 1.5 }, length_penalty: 0.5 }),
      metricRow({ effort: { bucket: 'high', length: 9 }, penalties: ['empty_final_answer'], length_penalty: -0.5, reward: 0 }),
    ];
    const m = computeRolloutMetrics(rows, cfg);
    expect(m['mean_length_reward_low']).toBe(0.5);
    expect(m['mean_reward_low']).toBe(1.5);
    expect(m['mean_length_low']).toBe(4);
    expect(m['median_length_low']).toBe(4);
    expect(m['mean_length_high']).toBe(9);
    expect(m['median_length_high']).toBe(9);
    expect(m['empty_final_answer_rate']).toBe(0.5);
    expect(m['unwanted_token_rate']).toBeUndefined();
    expect(m['length_penalty/mean']).toBe(0);
    expect(m['length_penalty/min']).toBe(-0.5);
    expect(m['length_penalty/max']).toBe(0.5);
  });

  test('no rows give no metrics', () => {
    expect(computeRolloutMetrics([], config({}))).toEqual({});
  });

  test('no metric key is a histogram or a timing', () => {
    const keys = Object.keys(computeRolloutMetrics(ROWS, config({})));
    expect(keys.filter((k) => k.includes('histogram') || k.startsWith('timing/'))).toEqual([]);
  });
});

describe('per-sample shape', () => {
  test('turns are user messages, gen tokens every assistant message, the max the longest assistant turn', () => {
    const log = [user(tokens(3)), history(tokens(4)), user(tokens(1)), gen(tokens(6)), user(tokens(2)), gen(tokens(2))];
    expect(messageLogShape(log)).toEqual({ turns: 3, total_tokens: 18, gen_tokens: 12, max_gen_tokens_per_turn: 6 });
    expect(messageLogShape([user(tokens(3))])).toEqual({
      turns: 1,
      total_tokens: 3,
      gen_tokens: 0,
      max_gen_tokens_per_turn: 0,
    });
  });
});

describe('per-agent metrics', () => {
  test('keys appearing only after the first result are ignored and bools count as 0/1', () => {
    const m = perAgentMetrics([
      { agent: 'a', result_fields: { ok: 1 } },
      { agent: 'a', result_fields: { ok: 0, late: 5 } },
    ]);
    expect(Object.keys(m).sort()).toEqual(['a/ok/max', 'a/ok/mean', 'a/ok/median', 'a/ok/min', 'a/ok/stddev']);
    expect(m['a/ok/mean']).toBe(0.5);
  });

  test('a key that is non-numeric in the first result still reports numbers found later', () => {
    const m = perAgentMetrics([
      { agent: 'a', result_fields: { score: null } },
      { agent: 'a', result_fields: { score: 4 } },
    ]);
    expect(m['a/score/mean']).toBe(2);
    expect(m['a/score/max']).toBe(4);
  });
});

describe('reward diagnostics', () => {
  test('zero-std fraction, mean std and mean range are taken per identity group', () => {
    const m = rewardDiagnostics([
      { identity_group: 'x', reward: 1 },
      { identity_group: 'x', reward: 1 },
      { identity_group: 'y', reward: 0 },
      { identity_group: 'y', reward: 1 },
    ]);
    expect(m).toEqual({
      'reward_diagnostics/zero_std_group_fraction': 0.5,
      'reward_diagnostics/mean_group_std': 0.25,
      'reward_diagnostics/mean_group_range': 0.5,
    });
  });
});

import { describe, expect, test } from 'vitest';
import { computeBatchMetrics, postprocessGroup, type PostprocessResult } from '../../../processors/postprocess.js';
import type { PenalizedGroup } from '../../../processors/types.js';
import { config, gen, group, messageItem, row, tokens, user } from './row-builders.js';

const FULL_CFG = config({
  max_total_tokens_per_sample: 12,
  effort: { low_weight: 0.5, low_penalty: 1, low_ub: 10, low_string: '/low' },
  reward_penalties: {
    penalize_empty_final_answer: true,
    penalize_unwanted_tokens: true,
    token_ids: { unwanted: [99] },
  },
  length_penalty: { enabled: true, coef: 1, correct_threshold: 0 },
});

function ok(result: PostprocessResult): Extract<PostprocessResult, { ok: true }> {
  if (!result.ok) throw new Error(`unexpected dead letter: ${result.deadLetter.reason} ${result.deadLetter.message}`);
  return result;
}

/** Three rows: a shaped low-effort row, a penalised one, a truncated one. */
function smallGroup() {
  return group([
    row({
      prompt: 'answer briefly /low',
      reward: 1,
      messageLog: [user([1, 2]), gen(tokens(4))],
      fullResult: { reward_components: { a: 0.75, b: 0.25 }, mask_sample: true },
      weightVersion: 3,
    }),
    row({
      reward: 0.5,
      messageLog: [user([1, 2]), gen([5, 6, 99])],
      fullResult: { reward_components: { a: 0.5 }, instance_config: { mask_sample: 0 } },
      weightVersion: 4,
    }),
    row({ reward: 1, messageLog: [user([1, 2]), gen(tokens(10))], output: [messageItem('ok')] }),
  ]);
}

describe('postprocessGroup on a small group', () => {
  const result = ok(postprocessGroup(smallGroup(), FULL_CFG));
  const p: PenalizedGroup = result.penalized;
  // effort: len 4 -> lr 0.5*(1-0.4) = 0.3 -> 1.3; penalty: row 1 has id 99 -> 0;
  // length: lengths [4, 3, 10], lambdas [0.5-1/7, 0.5, -0.5]; row 1 is not correct -> min(0, 0.5) = 0
  const finals = [1.3 + 5 / 14, 0, 0.5];

  test('rewards go through effort shaping, penalties and length penalty in that order', () => {
    p.rows.forEach((r, i) => expect(r.total_reward).toBeCloseTo(finals[i]!, 12));
    expect(p.rows.map((r) => r.original_reward)).toEqual([1, 0.5, 1]);
  });

  test('truncation, mask flags, reward components and violation counts are set per row', () => {
    expect(p.rows.map((r) => r.truncated)).toEqual([false, false, true]);
    expect(p.rows.map((r) => r.mask_sample)).toEqual([true, false, false]);
    expect(p.reward_component_names).toEqual(['a', 'b']);
    expect(p.rows.map((r) => r.reward_components)).toEqual([{ a: 0.75, b: 0.25 }, { a: 0.5, b: 0 }, null]);
    expect(p.rows[1]!.violation_counts).toEqual({
      num_invalid_tool_calls: 0,
      num_malformed_thinking: 0,
      num_assistant_messages: 1,
      num_routed_experts_backfilled: 0,
    });
  });

  test('the group carries its identity, the first row weight version and prompt, and its metrics', () => {
    const g = smallGroup();
    expect(p.group_id).toBe('g-0');
    expect(p.batch_id).toBe('b-0');
    expect(p.num_generations).toBe(3);
    expect(p.prompt_idx).toBe(42);
    expect(p.task_index).toBeNull();
    expect(p.weight_version).toBe(3);
    expect(p.rows.map((r) => r.weight_version)).toEqual([3, 4, 3]);
    expect(p.prompt).toEqual(g.rows[0]!.input_message_log);
    expect(p.rows.map((r) => r.row_index)).toEqual([0, 1, 2]);
    expect(p.metrics).toBe(result.metrics);
  });

  test('group metrics include effort, penalty, length-penalty and per-agent values read after shaping', () => {
    const m = result.metrics;
    expect(m['total_reward/mean']).toBeCloseTo((finals[0]! + finals[2]!) / 3, 12);
    expect(m['math/reward/mean']).toBeCloseTo(m['total_reward/mean']!, 12);
    // only the first result has mask_sample; mean over the agent's 3 results
    expect(m['math/mask_sample/mean']).toBeCloseTo(1 / 3, 12);
    expect(m['truncation_rate']).toBeCloseTo(1 / 3, 12);
    expect(m['natural_termination_rate']).toBeCloseTo(2 / 3, 12);
    expect(m['unwanted_token_rate']).toBeCloseTo(1 / 3, 12);
    expect(m['empty_final_answer_rate']).toBe(0);
    expect(m['reasoning_equal_to_final_answer_rate']).toBeUndefined();
    expect(m['mean_length_reward_low']).toBeCloseTo(0.3, 12);
    expect(m['mean_reward_low']).toBeCloseTo(1.3, 12);
    expect(m['mean_length_low']).toBe(4);
    expect(m['mean_length_high']).toBe(6.5);
    expect(m['median_length_high']).toBe(6.5);
    expect(m['length_penalty/mean']).toBeCloseTo((5 / 14 - 0.5) / 3, 12);
    expect(m['length_penalty/min']).toBe(-0.5);
    expect(m['length_penalty/max']).toBeCloseTo(5 / 14, 12);
    expect(m['reward_diagnostics/zero_std_group_fraction']).toBe(0);
    expect(m['reward_diagnostics/mean_group_range']).toBeCloseTo(finals[0]!, 12);
    expect(m['mean_gen_tokens_per_sample']).toBeCloseTo(17 / 3, 12);
  });

  test('one metric row per row, plain JSON that survives a round trip', () => {
    expect(result.metricRows).toHaveLength(3);
    expect(result.metricRows.map((r) => r.identity_group)).toEqual(['g-0/0', 'g-0/0', 'g-0/0']);
    expect(JSON.parse(JSON.stringify(result.metricRows))).toEqual(result.metricRows);
    expect(computeBatchMetrics(JSON.parse(JSON.stringify(result.metricRows)), FULL_CFG)).toEqual(result.metrics);
  });

  test('the input group is not modified', () => {
    const g = smallGroup();
    postprocessGroup(g, FULL_CFG);
    expect(g.rows.map((r) => r.full_result['reward'])).toEqual([1, 0.5, 1]);
  });
});

describe('postprocessGroup dead letters and deviations', () => {
  test('a penalised row whose components sum to the ORIGINAL reward passes (SPEC §4.6 deviation)', () => {
    const cfg = config({ reward_penalties: { penalize_empty_final_answer: true } });
    const g = group([row({ reward: 1, output: [messageItem(' ')], fullResult: { reward_components: { x: 0.4, y: 0.6 } } })]);
    const r = ok(postprocessGroup(g, cfg));
    expect(r.penalized.rows[0]!.total_reward).toBe(0);
    expect(r.penalized.rows[0]!.reward_components).toEqual({ x: 0.4, y: 0.6 });
  });

  test('components that do not sum to the reward dead-letter the whole group', () => {
    const g = group([row(), row({ reward: 1, fullResult: { reward_components: { x: 0.3 } } })]);
    const r = postprocessGroup(g, config({}));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.deadLetter).toMatchObject({
      reason: 'reward_components_mismatch',
      group_id: 'g-0',
      batch_id: 'b-0',
      row_indices: [0, 1],
      missing_row_indices: [],
      payloads: [],
    });
    expect(r.deadLetter.message).toContain('row 1');
  });

  test('an unsupported role dead-letters the whole group when a penalty is on, and passes otherwise', () => {
    const g = group([row(), row({ messageLog: [user([1]), { role: 'tool', token_ids: Int32Array.of(2) }, gen([3])] })]);
    const r = postprocessGroup(g, config({ reward_penalties: { penalize_empty_final_answer: true } }));
    expect(r.ok ? null : r.deadLetter.reason).toBe('unsupported_roles');
    expect(r.ok ? null : r.deadLetter.row_indices).toEqual([0, 1]);
    expect(postprocessGroup(g, config({ reward_penalties: {} })).ok).toBe(true);
    expect(postprocessGroup(g, config({})).ok).toBe(true);
  });

  test('a non-numeric verifier reward dead-letters the group instead of throwing', () => {
    const bad = row();
    bad.full_result = { reward: 'high' };
    const r = postprocessGroup(group([bad]), config({}));
    expect(r.ok ? null : r.deadLetter.reason).toBe('invalid_row');
  });

  test('empty reward_components count as absent: no columns', () => {
    const r = ok(postprocessGroup(group([row({ fullResult: { reward_components: {} } })]), config({})));
    expect(r.penalized.reward_component_names).toEqual([]);
    expect(r.penalized.rows[0]!.reward_components).toBeNull();
  });

  test('with the mask gate off every mask_sample is null', () => {
    const g = group([row({ fullResult: { mask_sample: true } })]);
    const r = ok(postprocessGroup(g, config({ mask_env_flagged_samples: false })));
    expect(r.penalized.rows[0]!.mask_sample).toBeNull();
  });

  test('identity_group_size splits the group for length penalty and reward diagnostics', () => {
    const lens = [2, 4, 2, 6];
    const g = group(lens.map((n) => row({ reward: 1, messageLog: [user([1]), gen(tokens(n))] })));
    const r = ok(postprocessGroup(g, config({ identity_group_size: 2, length_penalty: { enabled: true } })));
    expect(r.penalized.rows.map((x) => x.total_reward)).toEqual([1.5, 0.5, 1.5, 0.5]);
    expect(r.metricRows.map((x) => x.identity_group)).toEqual(['g-0/0', 'g-0/0', 'g-0/1', 'g-0/1']);
    expect(r.metrics['reward_diagnostics/mean_group_range']).toBe(1);
  });
});

describe('batch metrics', () => {
  test('batch metrics are the same definitions over all rows of the emitted groups, not a mean of group metrics', () => {
    const cfg = config({ reward_penalties: { penalize_empty_final_answer: true } });
    const a = ok(postprocessGroup(group([row({ reward: 1 }), row({ reward: 1 })], 'g-a'), cfg));
    const b = ok(postprocessGroup(group([row({ reward: 0.5, output: [] })], 'g-b'), cfg));
    const m = computeBatchMetrics([...a.metricRows, ...b.metricRows], cfg);
    expect(m['total_reward/mean']).toBeCloseTo(2 / 3, 12); // rows [1, 1, 0]; group means would give 0.5
    expect(m['empty_final_answer_rate']).toBeCloseTo(1 / 3, 12);
    expect(m['total_reward/stddev']).toBeCloseTo(Math.sqrt(1 / 3), 12);
    // identity groups g-a/0 = [1, 1] (zero std) and g-b/0 = [0]
    expect(m['reward_diagnostics/zero_std_group_fraction']).toBe(1);
    expect(b.metrics['total_reward/stddev']).toBeNaN();
  });
});

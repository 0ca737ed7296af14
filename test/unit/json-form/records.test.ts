import { describe, expect, test } from 'vitest';
import type { DeadLetterDecision, MetricsRecord, PackedGroup, PenalizedGroup } from '../../../processors/types.js';
import { formatJsonLine, parseJsonLine } from '../../../json-form/form.js';
import { generatedMessage, userMessage } from '../accumulate/fixtures.js';

function packedGroup(): PackedGroup {
  const tag = (i: number) => ({
    weight_version: 7,
    prompt_idx: 100,
    group_id: 'g0',
    num_invalid_tool_calls: i,
    num_malformed_thinking: 0,
    num_assistant_messages: 1,
    num_routed_experts_backfilled: 0,
    row_shapes: { image: [[1, 2]] },
  });
  return {
    group_id: 'g0',
    batch_id: 'b0',
    sample_ids: ['g0_g0', 'g0_g1'],
    tags: [tag(0), tag(1)],
    fields: [
      { name: 'input_ids', dtype: 'int64', layout: 'jagged', offsets: BigInt64Array.from([0n, 3n, 5n]), shape: [], values: BigInt64Array.from([1n, 2n, 3n, 4n, 5n]) },
      {
        name: 'generation_logprobs',
        dtype: 'float32',
        layout: 'jagged',
        offsets: BigInt64Array.from([0n, 3n, 5n]),
        shape: [],
        values: Float32Array.from([0, -0.25, Number.NaN, 0, Infinity]),
      },
      {
        name: 'routed_experts',
        dtype: 'int16',
        layout: 'jagged',
        offsets: BigInt64Array.from([0n, 1n, 1n]),
        shape: [1, 2],
        values: Int16Array.from([3, -1]),
      },
      { name: 'mask_sample', dtype: 'bool', layout: 'dense', offsets: null, shape: [2], values: Uint8Array.from([1, 0]) },
      { name: 'prompt_ids_for_adv', dtype: 'int64', layout: 'dense', offsets: null, shape: [2, 0], values: new BigInt64Array(0) },
    ],
  };
}

describe('JSON form of penalized, packed, metrics and dead-letter records (SPEC §9)', () => {
  test('a packed group round-trips, jagged and dense fields, NaN and empty tensors included', () => {
    const packed = packedGroup();
    expect(parseJsonLine(formatJsonLine({ kind: 'packed', packed }))).toEqual({ kind: 'packed', packed });
  });

  test('packed fields are written as dtype, layout, offsets or shape, and flat values', () => {
    const json = JSON.parse(formatJsonLine({ kind: 'packed', packed: packedGroup() }));
    expect(Object.keys(json.packed)).toEqual(['group_id', 'batch_id', 'sample_ids', 'tags', 'fields']);
    expect(json.packed.fields.input_ids).toEqual({ dtype: 'int64', layout: 'jagged', offsets: [0, 3, 5], inner_shape: [], values: [1, 2, 3, 4, 5] });
    expect(json.packed.fields.generation_logprobs.values).toEqual([0, -0.25, 'NaN', 0, 'Infinity']);
    expect(json.packed.fields.routed_experts).toMatchObject({ offsets: [0, 1, 1], inner_shape: [1, 2], values: [3, -1] });
    expect(json.packed.fields.mask_sample).toEqual({ dtype: 'bool', layout: 'dense', shape: [2], values: [true, false] });
    expect(json.packed.tags[1]).toEqual({
      weight_version: 7,
      prompt_idx: 100,
      group_id: 'g0',
      num_invalid_tool_calls: 1,
      num_malformed_thinking: 0,
      num_assistant_messages: 1,
      num_routed_experts_backfilled: 0,
      image__row_shapes: [[1, 2]],
    });
  });

  test('a penalized group round-trips with its message logs and NaN metrics', () => {
    const group: PenalizedGroup = {
      group_id: 'g0',
      batch_id: 'b0',
      group_index: 0,
      num_generations: 1,
      prompt_idx: 100,
      weight_version: 7,
      task_index: 2,
      prompt: [userMessage([1, 2])],
      reward_component_names: ['accuracy'],
      rows: [
        {
          row_index: 0,
          total_reward: 0.5,
          original_reward: 1,
          truncated: false,
          mask_sample: null,
          reward_components: { accuracy: 1 },
          violation_counts: { num_invalid_tool_calls: 0, num_malformed_thinking: 1, num_assistant_messages: 1, num_routed_experts_backfilled: 0 },
          agent_ref: { name: 'math' },
          weight_version: 7,
          message_log: [userMessage([1, 2]), generatedMessage([3], [-0.5])],
        },
      ],
      metrics: { 'total_reward/mean': 0.5, 'total_reward/stddev': Number.NaN },
    };
    const line = formatJsonLine({ kind: 'penalized', group });
    expect(JSON.parse(line).penalized.metrics['total_reward/stddev']).toBe('NaN');
    expect(parseJsonLine(line)).toEqual({ kind: 'penalized', group });
  });

  test('group metrics carry their group id and batch metrics leave it out', () => {
    const group: MetricsRecord = { scope: 'group', group_id: 'g0', batch_id: 'b0', values: { a: 1, 'b/stddev': Number.NaN } };
    const batch: MetricsRecord = { scope: 'batch', group_id: null, batch_id: 'b0', values: { a: -Infinity } };
    expect(JSON.parse(formatJsonLine({ kind: 'metrics', metrics: group }))).toEqual({
      metrics: { scope: 'group', group_id: 'g0', batch_id: 'b0', values: { a: 1, 'b/stddev': 'NaN' } },
    });
    expect(JSON.parse(formatJsonLine({ kind: 'metrics', metrics: batch }))).toEqual({
      metrics: { scope: 'batch', batch_id: 'b0', values: { a: '-Infinity' } },
    });
    expect(parseJsonLine(formatJsonLine({ kind: 'metrics', metrics: group }))).toEqual({ kind: 'metrics', metrics: group });
    expect(parseJsonLine(formatJsonLine({ kind: 'metrics', metrics: batch }))).toEqual({ kind: 'metrics', metrics: batch });
  });

  test('a dead letter is written with reason, message, group id and row indices, without its raw bytes', () => {
    const dl: DeadLetterDecision = {
      reason: 'incomplete_group',
      message: 'group g0 is incomplete',
      group_id: 'g0',
      batch_id: 'b0',
      row_indices: [1],
      missing_row_indices: [0, 2],
      payloads: [new Uint8Array([1, 2])],
    };
    const line = formatJsonLine({ kind: 'dead_letter', deadLetter: dl });
    expect(JSON.parse(line)).toEqual({
      dead_letter: { reason: 'incomplete_group', message: 'group g0 is incomplete', group_id: 'g0', row_indices: [1], missing_row_indices: [0, 2] },
    });
    expect(parseJsonLine(line)).toEqual({ kind: 'dead_letter', deadLetter: { ...dl, batch_id: null, payloads: [] } });
  });
});

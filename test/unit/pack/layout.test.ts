import { describe, expect, test } from 'vitest';
import { packGroup } from '../../../processors/pack.js';
import { cfg, field, group, msg, nums } from './builders.js';

const rows = [
  [msg('user', [1, 2, 3]), msg('assistant', [4, 5], { lp: [-1, -1] })],
  [msg('user', [1, 2, 3])],
  [msg('user', [1, 2, 3]), msg('assistant', [6], { lp: [-1] }), msg('user', [7, 8]), msg('assistant', [9], { lp: [-1] })],
];

describe('packed layout and identity', () => {
  const packed = packGroup(group(rows), cfg({ include_message_violation_fields: true }));

  test('per-token fields share int64 offsets with N+1 entries whose differences are the input lengths', () => {
    const lengths = field(packed, 'input_lengths');
    expect(lengths.dtype).toBe('int32');
    expect(lengths.values).toBeInstanceOf(Int32Array);
    expect(nums(lengths.values)).toEqual([5, 3, 7]);
    const offsets = field(packed, 'input_ids').offsets!;
    expect(offsets).toBeInstanceOf(BigInt64Array);
    expect(Array.from(offsets)).toEqual([0n, 5n, 8n, 15n]);
    for (const f of packed.fields.filter((x) => x.layout === 'jagged')) expect(f.offsets).toBe(offsets);
  });

  test('sample ids are "{group_id}_g{i}" in row order', () => {
    expect(packed.sample_ids).toEqual(['g-7_g0', 'g-7_g1', 'g-7_g2']);
    expect(packed.group_id).toBe('g-7');
    expect(packed.batch_id).toBe('b-1');
  });

  test('every row is tagged with the group weight version, prompt index and group id', () => {
    expect(packed.tags).toHaveLength(3);
    for (const t of packed.tags) {
      expect(t).toEqual({
        weight_version: 42,
        prompt_idx: 1234,
        group_id: 'g-7',
        num_invalid_tool_calls: 0,
        num_malformed_thinking: 0,
        num_assistant_messages: 0,
        num_routed_experts_backfilled: 0,
        row_shapes: {},
      });
    }
  });

  test('fields come in a fixed order with the trainer dtypes of SPEC §5 and the reference layouts', () => {
    expect(packed.fields.map((f) => [f.name, f.dtype, f.layout])).toEqual([
      ['input_ids', 'int64', 'jagged'],
      ['input_lengths', 'int32', 'dense'],
      ['generation_logprobs', 'float32', 'jagged'],
      ['token_mask', 'int64', 'jagged'],
      ['sample_mask', 'float32', 'dense'],
      ['prompt_ids_for_adv', 'int64', 'dense'],
      ['truncated', 'bool', 'dense'],
      ['total_reward', 'float32', 'dense'],
      ['invalid_tool_call_mask', 'bool', 'jagged'],
      ['malformed_thinking_mask', 'bool', 'jagged'],
    ]);
  });

  test('each jagged field holds exactly total tokens × inner elements and each dense field its full shape', () => {
    for (const f of packed.fields) {
      const expected = f.layout === 'jagged' ? 15 * f.shape.reduce((a, b) => a * b, 1) : f.shape.reduce((a, b) => a * b, 1);
      expect([f.name, f.values.length]).toEqual([f.name, expected]);
    }
  });

  test('packing copies: mutating the input afterwards leaves the packed values unchanged', () => {
    const log = [msg('user', [1, 2]), msg('assistant', [3], { lp: [-0.25] })];
    const p = packGroup(group([log]), cfg());
    log[0]!.token_ids[0] = 100;
    log[1]!.generation_logprobs![0] = 5;
    expect(nums(field(p, 'input_ids').values)).toEqual([1, 2, 3]);
    expect(nums(field(p, 'generation_logprobs').values)).toEqual([0, 0, -0.25]);
  });
});

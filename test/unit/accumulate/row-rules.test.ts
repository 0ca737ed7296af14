import { describe, expect, test } from 'vitest';
import {
  accumulateRow,
  createAccumulatorState,
  finishInput,
  type AccumulatorState,
} from '../../../processors/group-accumulator.js';
import type { RolloutRow } from '../../../processors/types.js';
import { defaultAccumulateConfig as cfg, generatedMessage, makeGroup, makeRow, rowInput } from './fixtures.js';

function add(state: AccumulatorState, record: RolloutRow | Record<string, unknown>, now = 0) {
  return accumulateRow(state, rowInput(record), cfg, now);
}

/** A row (position 1 of group g0, N = 4) with some fields replaced by raw values. */
function broken(fields: Record<string, unknown>): Record<string, unknown> {
  return { ...makeRow({ position: 1 }), ...fields };
}

describe('row-only rejections (SPEC §3 rules 1, 2, 3, 4, 7, 8 and invalid_row)', () => {
  test.each([
    ['a fraction', 1.5],
    ['a numeric string', '1'],
    ['NaN', Number.NaN],
  ])('a row_index that is %s is dead-lettered as row_index_type', (_, rowIndex) => {
    const out = add(createAccumulatorState(), broken({ row_index: rowIndex }));
    expect(out.deadLetters).toHaveLength(1);
    expect(out.deadLetters[0]).toMatchObject({ reason: 'row_index_type', group_id: 'g0', row_indices: [] });
    expect(out.changes).toEqual([]);
  });

  test('a row_index past the group range is row_index_out_of_range', () => {
    // group_index 1 with N = 4 owns rows [4, 8).
    const out = add(createAccumulatorState(), { ...makeRow({ group_index: 1 }), row_index: 8 });
    expect(out.deadLetters[0]).toMatchObject({ reason: 'row_index_out_of_range', row_indices: [8] });
    expect(out.deadLetters[0]?.message).toContain('[4, 8)');
  });

  test('a row_index before the group range is row_index_out_of_range', () => {
    const out = add(createAccumulatorState(), { ...makeRow({ group_index: 1 }), row_index: 3 });
    expect(out.deadLetters[0]?.reason).toBe('row_index_out_of_range');
  });

  test('a negative row_index is row_index_out_of_range', () => {
    const out = add(createAccumulatorState(), broken({ row_index: -1 }));
    expect(out.deadLetters[0]).toMatchObject({ reason: 'row_index_out_of_range', row_indices: [-1] });
  });

  test('the type check comes before the range check and the range check before field checks', () => {
    const state = createAccumulatorState();
    expect(add(state, broken({ row_index: 99.5, full_result: 3 })).deadLetters[0]?.reason).toBe('row_index_type');
    expect(add(state, broken({ row_index: 99, full_result: 3 })).deadLetters[0]?.reason).toBe('row_index_out_of_range');
  });

  test('a conflicting duplicate row index is dead-lettered alone and the first row stays', () => {
    const state = createAccumulatorState();
    const [r0, r1, r2, r3] = makeGroup();
    add(state, r1!);
    const conflicting = { ...r1!, full_result: { reward: 42 } };
    const out = add(state, conflicting);
    expect(out.deadLetters).toHaveLength(1);
    expect(out.deadLetters[0]).toMatchObject({ reason: 'duplicate_row_index', group_id: 'g0', row_indices: [1] });
    expect(out.deadLetters[0]?.payloads).toEqual([rowInput(conflicting).payload]);
    add(state, r0!);
    add(state, r2!);
    const done = add(state, r3!);
    expect(done.groups[0]?.group.rows[1]?.full_result).toEqual({ reward: 0.5, response: { output: [] } });
  });

  test('a byte-identical row index is an idempotent replay: dropped silently and counted', () => {
    const state = createAccumulatorState();
    const row = makeRow({ position: 2 });
    add(state, row);
    const out = add(state, makeRow({ position: 2 }));
    expect(out).toEqual({ groups: [], deadLetters: [], changes: [], replays: 1 });
  });

  test.each([
    ['num_generations', { num_generations: 8, row_index: 1 }],
    ['batch_id', { batch_id: 'other-batch' }],
    ['prompt_idx', { prompt_idx: 999 }],
  ])('a row disagreeing with its group on %s is inconsistent_group, row only', (field, fields) => {
    const state = createAccumulatorState();
    add(state, makeRow({ position: 0 }));
    const out = add(state, broken(fields));
    expect(out.deadLetters[0]).toMatchObject({ reason: 'inconsistent_group', row_indices: [1] });
    expect(out.deadLetters[0]?.message).toContain(field);
    expect(state.pending.get('g0')?.rows.size).toBe(1);
  });

  test('a row disagreeing on group_index is inconsistent_group', () => {
    const state = createAccumulatorState();
    add(state, makeRow({ group_id: 'g', group_index: 0, position: 0 }));
    const out = add(state, makeRow({ group_id: 'g', group_index: 1, position: 1 }));
    expect(out.deadLetters[0]).toMatchObject({ reason: 'inconsistent_group', row_indices: [5] });
  });

  test('a NaN logprob in a generated message is nan_logprobs', () => {
    const row = makeRow({ position: 1 });
    row.message_log = [row.message_log[0]!, generatedMessage([5, 6], [-0.1, Number.NaN])];
    const out = add(createAccumulatorState(), row);
    expect(out.deadLetters[0]).toMatchObject({ reason: 'nan_logprobs', row_indices: [1] });
  });

  test('a NaN logprob outside generated messages is accepted', () => {
    const row = makeRow({ position: 1 });
    const userWithLogprobs = { role: 'user', token_ids: Int32Array.from([1]), generation_logprobs: Float32Array.from([Number.NaN]) };
    row.message_log = [userWithLogprobs, ...row.message_log.slice(1)];
    const out = add(createAccumulatorState(), row);
    expect(out.deadLetters).toEqual([]);
    expect(out.changes).toHaveLength(1);
  });

  test.each([null, 'text', 42, [1, 2]])('a record that is not an object (%j) is undecodable and keeps its bytes', (record) => {
    const payload = new Uint8Array([0xff, 0x00, 0x13]);
    const out = accumulateRow(createAccumulatorState(), { record, payload }, cfg, 0);
    expect(out.deadLetters).toEqual([
      expect.objectContaining({ reason: 'undecodable', group_id: null, row_indices: [], payloads: [payload] }),
    ]);
  });

  const routes = (shape: number[]) => ({
    dtype: 'int32',
    shape,
    data: new Int32Array(shape.reduce((a, b) => a * b, 1)),
  });
  const withMessage = (message: Record<string, unknown>) => {
    const row = makeRow({ position: 1 });
    return { ...row, message_log: [row.message_log[0], message] };
  };

  test.each<[string, Record<string, unknown>]>([
    ['N < 1', { num_generations: 0 }],
    ['a fractional N', { num_generations: 2.5 }],
    ['a missing row_index', { row_index: undefined }],
    ['a missing full_result', { full_result: undefined }],
    ['a missing group_id', { group_id: undefined }],
    ['an agent_ref without name', { agent_ref: { version: 1 } }],
    ['a non-integer task index', { task_index: 1.5 }],
    ['a string weight_version', { weight_version: '7' }],
    ['a request that is a list', { request: [] }],
    ['token ids as a plain list', withMessage({ role: 'assistant', token_ids: [1, 2] })],
    [
      'logprobs longer than the tokens',
      withMessage({ role: 'assistant', token_ids: Int32Array.from([1]), generation_logprobs: new Float32Array(2) }),
    ],
    ['routed experts of rank 2', withMessage({ role: 'assistant', token_ids: Int32Array.from([1, 2]), routed_experts: routes([2, 4]) })],
    ['routed experts over other tokens', withMessage({ role: 'user', token_ids: Int32Array.from([1, 2]), routed_experts: routes([3, 1, 2]) })],
    [
      'a tensor whose data does not match its shape',
      withMessage({ role: 'user', token_ids: Int32Array.from([1]), routed_experts: { dtype: 'int32', shape: [1, 1, 2], data: new Int32Array(3) } }),
    ],
    ['a string flag', withMessage({ role: 'assistant', token_ids: new Int32Array(0), is_invalid_tool_call: 'yes' })],
  ])('%s is invalid_row', (_, fields) => {
    const out = add(createAccumulatorState(), broken(fields));
    expect(out.deadLetters).toHaveLength(1);
    expect(out.deadLetters[0]?.reason).toBe('invalid_row');
    expect(out.changes).toEqual([]);
  });

  test('a rejected row leaves its group waiting for a valid row', () => {
    const state = createAccumulatorState();
    const [r0, r1] = makeGroup({ num_generations: 2 });
    add(state, r0!);
    add(state, { ...r1!, weight_version: 'seven' });
    expect(state.pending.get('g0')?.rows.size).toBe(1);
    const out = add(state, r1!);
    expect(out.groups).toHaveLength(1);
    expect(out.groups[0]?.group.rows.map((r) => r.row_index)).toEqual([0, 1]);
  });

  test('a group whose every row was rejected leaves nothing open and reports nothing more', () => {
    const state = createAccumulatorState();
    for (const row of makeGroup({ num_generations: 3 })) add(state, { ...row, full_result: 'not an object' });
    expect(state.pending.size).toBe(0);
    expect(state.closed.size).toBe(0);
    expect(finishInput(state, cfg, 10)).toEqual({ groups: [], deadLetters: [], changes: [], replays: 0 });
  });
});

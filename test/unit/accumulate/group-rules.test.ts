import { describe, expect, test } from 'vitest';
import {
  accumulateRow,
  createAccumulatorState,
  type AccumulateResult,
  type AccumulatorState,
} from '../../../processors/group-accumulator.js';
import type { AccumulateConfig } from '../../../config/schema.js';
import type { RolloutRow } from '../../../processors/types.js';
import { accumulateConfig, defaultAccumulateConfig, makeGroup, makeRow, rowInput } from './fixtures.js';

function addAll(
  state: AccumulatorState,
  rows: Array<RolloutRow | Record<string, unknown>>,
  config: AccumulateConfig = defaultAccumulateConfig,
): AccumulateResult {
  const total: AccumulateResult = { groups: [], deadLetters: [], changes: [], replays: 0 };
  rows.forEach((row, i) => {
    const out = accumulateRow(state, rowInput(row), config, i);
    total.groups.push(...out.groups);
    total.deadLetters.push(...out.deadLetters);
    total.changes.push(...out.changes);
    total.replays += out.replays;
  });
  return total;
}

describe('group assembly (SPEC §3)', () => {
  test('accumulate restores input order when rows arrive shuffled', () => {
    const rows = makeGroup({ group_index: 2, num_generations: 4 });
    const shuffled = [rows[2]!, rows[0]!, rows[3]!, rows[1]!];
    const out = addAll(createAccumulatorState(), shuffled);
    expect(out.deadLetters).toEqual([]);
    expect(out.groups).toHaveLength(1);
    const emitted = out.groups[0]!;
    expect(emitted.group.rows.map((r) => r.row_index)).toEqual([8, 9, 10, 11]);
    expect(emitted.payloads).toEqual(rows.map((r) => rowInput(r).payload));
    expect(emitted.group).toMatchObject({
      group_id: 'g2',
      batch_id: 'b0',
      group_index: 2,
      num_generations: 4,
      prompt_idx: 102,
      task_index: null,
    });
  });

  test('a group is emitted once, by the row that brings the N-th distinct index', () => {
    const state = createAccumulatorState();
    const rows = makeGroup({ num_generations: 3 });
    expect(addAll(state, rows.slice(0, 2)).groups).toEqual([]);
    expect(addAll(state, [rows[2]!]).groups).toHaveLength(1);
    expect(state.pending.size).toBe(0);
    expect(state.closed.get('g0')?.row_hashes.size).toBe(3);
  });

  test('a group of one row is emitted at once', () => {
    const out = addAll(createAccumulatorState(), [makeRow({ num_generations: 1, group_index: 5 })]);
    expect(out.groups[0]?.group.rows.map((r) => r.row_index)).toEqual([5]);
  });

  test('groups of one batch are assembled independently', () => {
    const a = makeGroup({ group_index: 0, num_generations: 2 });
    const b = makeGroup({ group_index: 1, num_generations: 2 });
    const out = addAll(createAccumulatorState(), [a[0]!, b[1]!, b[0]!, a[1]!]);
    expect(out.groups.map((g) => g.group.group_id)).toEqual(['g1', 'g0']);
  });

  test('mixed agents reject the whole group in one dead letter with every row', () => {
    const rows = makeGroup({ num_generations: 3 });
    rows[1] = makeRow({ num_generations: 3, position: 1, agent: 'code' });
    const out = addAll(createAccumulatorState(), [rows[2]!, rows[1]!, rows[0]!]);
    expect(out.groups).toEqual([]);
    expect(out.deadLetters).toHaveLength(1);
    expect(out.deadLetters[0]).toMatchObject({
      reason: 'mixed_agents',
      group_id: 'g0',
      batch_id: 'b0',
      row_indices: [0, 1, 2],
      missing_row_indices: [],
    });
    expect(out.deadLetters[0]?.payloads).toEqual(rows.map((r) => rowInput(r).payload));
    expect(out.deadLetters[0]?.message).toContain('row 1: code');
  });

  test('allow_mixed_agents switches off the agent rule and still groups by N', () => {
    const rows = makeGroup({ num_generations: 2 });
    rows[1] = makeRow({ num_generations: 2, position: 1, agent: 'code' });
    const out = addAll(createAccumulatorState(), rows, accumulateConfig({ allow_mixed_agents: true }));
    expect(out.deadLetters).toEqual([]);
    expect(out.groups[0]?.group.rows.map((r) => r.agent_ref.name)).toEqual(['math', 'code']);
  });

  test('differing task indices reject the whole group as task_index_mismatch', () => {
    const rows = [makeRow({ num_generations: 2, position: 0, task_index: 3 }), makeRow({ num_generations: 2, position: 1, task_index: 4 })];
    const out = addAll(createAccumulatorState(), rows);
    expect(out.deadLetters).toEqual([expect.objectContaining({ reason: 'task_index_mismatch', row_indices: [0, 1] })]);
  });

  test('a task index on some rows but not others is task_index_mismatch, whichever row lacks it', () => {
    const rows = [makeRow({ num_generations: 2, position: 0 }), makeRow({ num_generations: 2, position: 1, task_index: 4 })];
    const out = addAll(createAccumulatorState(), rows);
    expect(out.deadLetters[0]?.reason).toBe('task_index_mismatch');
    expect(out.deadLetters[0]?.message).toContain('row 0: null');
  });

  test('a shared task index is carried by the emitted group', () => {
    const out = addAll(createAccumulatorState(), makeGroup({ num_generations: 2, task_index: 9 }));
    expect(out.groups[0]?.group.task_index).toBe(9);
  });

  test('the agent rule is checked before the task-index rule', () => {
    const rows = [
      makeRow({ num_generations: 2, position: 0, task_index: 1 }),
      makeRow({ num_generations: 2, position: 1, task_index: 2, agent: 'code' }),
    ];
    expect(addAll(createAccumulatorState(), rows).deadLetters[0]?.reason).toBe('mixed_agents');
  });

  test('a dead-lettered group is remembered: identical rows are replays, others group_already_closed', () => {
    const state = createAccumulatorState();
    const rows = makeGroup({ num_generations: 2 });
    rows[1] = makeRow({ num_generations: 2, position: 1, agent: 'code' });
    addAll(state, rows);
    const again = addAll(state, [rows[0]!, makeRow({ num_generations: 2, position: 1 })]);
    expect(again.replays).toBe(1);
    expect(again.deadLetters).toEqual([expect.objectContaining({ reason: 'group_already_closed', row_indices: [1] })]);
    expect(again.changes).toEqual([]);
  });

  test('a late identical row after emission is dropped silently and counted as a replay', () => {
    const state = createAccumulatorState();
    const rows = makeGroup({ num_generations: 2 });
    addAll(state, rows);
    const late = addAll(state, [makeRow({ num_generations: 2, position: 0 })]);
    expect(late).toEqual({ groups: [], deadLetters: [], changes: [], replays: 1 });
  });

  test('a late different row after emission is group_already_closed', () => {
    const state = createAccumulatorState();
    addAll(state, makeGroup({ num_generations: 2 }));
    const late = addAll(state, [makeRow({ num_generations: 2, position: 0, reward: 9 })]);
    expect(late.deadLetters).toEqual([
      expect.objectContaining({ reason: 'group_already_closed', group_id: 'g0', row_indices: [0] }),
    ]);
    expect(late.groups).toEqual([]);
  });
});

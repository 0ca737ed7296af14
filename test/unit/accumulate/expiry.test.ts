import { describe, expect, test } from 'vitest';
import {
  accumulateBatchEnd,
  accumulateRow,
  createAccumulatorState,
  expireGroups,
  finishInput,
} from '../../../processors/group-accumulator.js';
import { accumulateConfig, makeGroup, makeRow, rowInput } from './fixtures.js';

const cfg = accumulateConfig({ group_timeout_ms: 10_000, batch_end_grace_ms: 500, emitted_retention_ms: 60_000 });

describe('incomplete groups, timeouts and retention (SPEC §3 rule 9)', () => {
  test('a group still incomplete when BatchEnd plus grace has passed is incomplete_group with its missing rows', () => {
    const state = createAccumulatorState();
    const rows = makeGroup({ group_index: 1, num_generations: 4 });
    accumulateRow(state, rowInput(rows[3]!), cfg, 100);
    accumulateRow(state, rowInput(rows[1]!), cfg, 200);
    expect(accumulateBatchEnd(state, { batch_id: 'b0', num_rows: 8 }, cfg, 1000).deadLetters).toEqual([]);
    expect(expireGroups(state, cfg, 1499).deadLetters).toEqual([]);
    const out = expireGroups(state, cfg, 1500);
    expect(out.deadLetters).toHaveLength(1);
    expect(out.deadLetters[0]).toMatchObject({
      reason: 'incomplete_group',
      group_id: 'g1',
      batch_id: 'b0',
      row_indices: [5, 7],
      missing_row_indices: [4, 6],
    });
    expect(out.deadLetters[0]?.payloads).toEqual([rowInput(rows[1]!).payload, rowInput(rows[3]!).payload]);
    expect(state.pending.size).toBe(0);
  });

  test('a BatchEnd with zero grace dead-letters the batch open groups at once, and only that batch', () => {
    const state = createAccumulatorState();
    const noGrace = accumulateConfig({ batch_end_grace_ms: 0 });
    accumulateRow(state, rowInput(makeRow({ batch_id: 'b0', group_id: 'x' })), noGrace, 0);
    accumulateRow(state, rowInput(makeRow({ batch_id: 'b1', group_id: 'y' })), noGrace, 0);
    const out = accumulateBatchEnd(state, { batch_id: 'b0', num_rows: 4 }, noGrace, 5);
    expect(out.deadLetters.map((d) => [d.reason, d.group_id])).toEqual([['incomplete_group', 'x']]);
    expect([...state.pending.keys()]).toEqual(['y']);
  });

  test('a second BatchEnd of the same batch changes nothing', () => {
    const state = createAccumulatorState();
    accumulateBatchEnd(state, { batch_id: 'b0', num_rows: 4 }, cfg, 10);
    const again = accumulateBatchEnd(state, { batch_id: 'b0', num_rows: 4 }, cfg, 20);
    expect(again.changes).toEqual([]);
    expect(state.batch_ends.get('b0')).toBe(10);
  });

  test('a group open longer than the group timeout is incomplete_group', () => {
    const state = createAccumulatorState();
    accumulateRow(state, rowInput(makeRow({ position: 2 })), cfg, 1000);
    accumulateRow(state, rowInput(makeRow({ position: 0 })), cfg, 8000);
    expect(expireGroups(state, cfg, 10_999).deadLetters).toEqual([]);
    const out = expireGroups(state, cfg, 11_000);
    expect(out.deadLetters).toEqual([
      expect.objectContaining({ reason: 'incomplete_group', row_indices: [0, 2], missing_row_indices: [1, 3] }),
    ]);
    expect(out.deadLetters[0]?.message).toContain('timeout');
  });

  test('a missing row arriving after its group was dead-lettered as incomplete is group_already_closed', () => {
    const state = createAccumulatorState();
    const rows = makeGroup({ num_generations: 2 });
    accumulateRow(state, rowInput(rows[0]!), cfg, 0);
    finishInput(state, cfg, 1);
    const late = accumulateRow(state, rowInput(rows[1]!), cfg, 2);
    expect(late.deadLetters.map((d) => d.reason)).toEqual(['group_already_closed']);
    expect(accumulateRow(state, rowInput(rows[0]!), cfg, 3).replays).toBe(1);
  });

  test('end of input acts as BatchEnd for every open batch with the grace elapsed', () => {
    const state = createAccumulatorState();
    accumulateRow(state, rowInput(makeRow({ batch_id: 'b0', group_id: 'x', num_generations: 3 })), cfg, 0);
    accumulateRow(state, rowInput(makeRow({ batch_id: 'b1', group_id: 'y', num_generations: 2, position: 1 })), cfg, 0);
    const out = finishInput(state, cfg, 0);
    expect(out.deadLetters.map((d) => [d.group_id, d.row_indices, d.missing_row_indices])).toEqual([
      ['x', [0], [1, 2]],
      ['y', [1], [0]],
    ]);
    expect(out.changes.filter((c) => c.kind === 'batch_ended').map((c) => c.kind === 'batch_ended' && c.batch_id)).toEqual(['b0', 'b1']);
    expect(state.pending.size).toBe(0);
  });

  test('closed groups are forgotten after the retention, so the group id may be used again', () => {
    const state = createAccumulatorState();
    const rows = makeGroup({ num_generations: 1 });
    accumulateRow(state, rowInput(rows[0]!), cfg, 1000);
    expect(expireGroups(state, cfg, 60_999).changes).toEqual([]);
    const out = expireGroups(state, cfg, 61_000);
    expect(out.changes).toEqual([{ kind: 'closed_forgotten', group_id: 'g0' }]);
    const reused = accumulateRow(state, rowInput(makeRow({ num_generations: 1, reward: 3 })), cfg, 61_001);
    expect(reused.groups).toHaveLength(1);
    expect(reused.deadLetters).toEqual([]);
  });

  test('a batch end is forgotten after the retention once none of its groups is open', () => {
    const state = createAccumulatorState();
    const long = accumulateConfig({ group_timeout_ms: 1_000_000, batch_end_grace_ms: 500_000, emitted_retention_ms: 1000 });
    accumulateRow(state, rowInput(makeRow({ batch_id: 'b0' })), long, 0);
    accumulateBatchEnd(state, { batch_id: 'b0', num_rows: 4 }, long, 0);
    expect(expireGroups(state, long, 2000).changes).toEqual([]);
    const out = expireGroups(state, long, 500_000);
    expect(out.changes.map((c) => c.kind)).toEqual(['group_closed', 'batch_forgotten']);
  });
});

import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import {
  accumulateBatchEnd,
  accumulateRow,
  applyStateChange,
  createAccumulatorState,
  expireGroups,
  finishInput,
  type AccumulateResult,
  type AccumulatorState,
  type AccumulatorStateChange,
} from '../../../processors/group-accumulator.js';
import type { RolloutRow } from '../../../processors/types.js';
import { accumulateConfig, makeGroup, makeRow, rowInput } from './fixtures.js';

/** Valid rows of up to 4 groups of one batch (N in 1..4 per group). */
const batchRows = fc
  .array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 4 })
  .map((sizes) => sizes.flatMap((n, g) => makeGroup({ group_index: g, num_generations: n, task_index: g })));

describe('accumulate properties', () => {
  test('the emitted groups do not depend on the arrival order of the rows', () => {
    const cfg = accumulateConfig();
    const inOrder = (rows: RolloutRow[]) => {
      const state = createAccumulatorState();
      const outs = rows.map((r, i) => accumulateRow(state, rowInput(r), cfg, i));
      return {
        groups: outs.flatMap((o) => o.groups).sort((a, b) => a.group.group_index - b.group.group_index),
        deadLetters: outs.flatMap((o) => o.deadLetters),
      };
    };
    fc.assert(
      fc.property(
        batchRows.chain((rows) => fc.tuple(fc.constant(rows), fc.shuffledSubarray(rows, { minLength: rows.length }))),
        ([rows, shuffled]) => {
          const expected = inOrder(rows);
          const actual = inOrder(shuffled);
          expect(actual.deadLetters).toEqual([]);
          expect(actual.groups).toEqual(expected.groups);
          for (const { group } of actual.groups) {
            const start = group.group_index * group.num_generations;
            expect(group.rows.map((r) => r.row_index)).toEqual(group.rows.map((_, i) => start + i));
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  test('replaying the emitted changes into a fresh state rebuilds the same state', () => {
    const cfg = accumulateConfig({ group_timeout_ms: 50, batch_end_grace_ms: 10, emitted_retention_ms: 80 });
    // Operations over a small id space so that duplicates, replays, conflicts,
    // closed-group rows, expiry and forgetting all happen.
    const rowOp = fc.record({
      kind: fc.constant('row' as const),
      group: fc.integer({ min: 0, max: 2 }),
      position: fc.integer({ min: -1, max: 3 }),
      reward: fc.integer({ min: 0, max: 1 }),
      agent: fc.constantFrom('math', 'math', 'math', 'code'),
      advance: fc.integer({ min: 0, max: 20 }),
    });
    const otherOp = fc.oneof(
      fc.record({ kind: fc.constant('batch_end' as const), advance: fc.integer({ min: 0, max: 20 }) }),
      fc.record({ kind: fc.constant('expire' as const), advance: fc.integer({ min: 0, max: 60 }) }),
    );
    const ops = fc.array(fc.oneof({ arbitrary: rowOp, weight: 4 }, { arbitrary: otherOp, weight: 1 }), {
      maxLength: 40,
    });
    fc.assert(
      fc.property(ops, fc.boolean(), (list, finish) => {
        const state = createAccumulatorState();
        const changes: AccumulatorStateChange[] = [];
        const keep = (out: AccumulateResult) => changes.push(...out.changes);
        let now = 0;
        for (const op of list) {
          now += op.advance;
          if (op.kind === 'row') {
            const row = makeRow({ group_index: op.group, num_generations: 3, position: op.position, reward: op.reward, agent: op.agent });
            keep(accumulateRow(state, rowInput(row), cfg, now));
          } else if (op.kind === 'batch_end') {
            keep(accumulateBatchEnd(state, { batch_id: 'b0', num_rows: 9 }, cfg, now));
          } else {
            keep(expireGroups(state, cfg, now));
          }
        }
        if (finish) keep(finishInput(state, cfg, now));
        const rebuilt: AccumulatorState = createAccumulatorState();
        for (const change of changes) applyStateChange(rebuilt, change);
        expect(rebuilt).toEqual(state);
      }),
      { numRuns: 80 },
    );
  });
});

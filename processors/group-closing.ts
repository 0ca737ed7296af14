/**
 * What happens when an open group closes (SPEC §3): the whole-group rules
 * (5 `mixed_agents`, 6 `task_index_mismatch`), building the emitted
 * PromptGroup in row-index order, and the `incomplete_group` dead letter.
 * Pure functions over a PendingGroup; the accumulator records the closing.
 */
import type { PendingGroup, PendingRow } from './accumulator-state.js';
import type { DeadLetterDecision, PromptGroup, RolloutRow } from './types.js';

/** The pending rows sorted by row index: the input order the producer meant. */
export function rowsInOrder(group: PendingGroup): PendingRow[] {
  return [...group.rows.entries()].sort((a, b) => a[0] - b[0]).map(([, r]) => r);
}

/** The group's reference row: its first accepted row (arrival order). */
export function referenceRow(group: PendingGroup): RolloutRow {
  const first = group.rows.values().next();
  if (first.done) throw new Error(`pending group ${group.group_id} has no rows`);
  return first.value.row;
}

/**
 * The whole-group rejection of a complete group, or null when it may be
 * emitted. Agents are compared by `agent_ref.name` unless mixed agents are
 * allowed; task indices must all be absent or all equal (SPEC §3 rule 6 is
 * symmetric: unlike the reference, a missing index on the first row does not
 * switch the check off).
 */
export function wholeGroupProblem(
  rows: readonly RolloutRow[],
  allowMixedAgents: boolean,
): { reason: 'mixed_agents' | 'task_index_mismatch'; message: string } | null {
  if (!allowMixedAgents) {
    const names = rows.map((r) => String(r.agent_ref.name));
    if (new Set(names).size > 1) {
      return {
        reason: 'mixed_agents',
        message: `rows of one group must share one agent, got ${listByRow(rows, names)}`,
      };
    }
  }
  const tasks = rows.map((r) => r.task_index ?? null);
  if (new Set(tasks).size > 1) {
    return {
      reason: 'task_index_mismatch',
      message: `rows of one group must share one task index, got ${listByRow(rows, tasks.map(String))}`,
    };
  }
  return null;
}

function listByRow(rows: readonly RolloutRow[], values: string[]): string {
  return rows.map((r, i) => `row ${r.row_index}: ${values[i]}`).join(', ');
}

/** The PromptGroup of a complete group whose rows are already in row order. */
export function buildPromptGroup(rows: readonly RolloutRow[]): PromptGroup {
  const first = rows[0];
  if (!first) throw new Error('a prompt group needs at least one row');
  return {
    group_id: first.group_id,
    batch_id: first.batch_id,
    group_index: first.group_index,
    num_generations: first.num_generations,
    prompt_idx: first.prompt_idx,
    task_index: first.task_index ?? null,
    rows: [...rows],
  };
}

/** A dead letter carrying every accepted row of the group (whole-group granularity). */
export function groupDeadLetter(
  group: PendingGroup,
  reason: DeadLetterDecision['reason'],
  message: string,
  missing: number[] = [],
): DeadLetterDecision {
  const rows = rowsInOrder(group);
  return {
    reason,
    message,
    group_id: group.group_id,
    batch_id: group.batch_id,
    row_indices: rows.map((r) => r.row.row_index),
    missing_row_indices: missing,
    payloads: rows.map((r) => r.payload),
  };
}

/** Row indices of the group's range `[group_index*N, group_index*N + N)` not yet received, ascending. */
export function missingRowIndices(group: PendingGroup): number[] {
  const ref = referenceRow(group);
  const start = ref.group_index * ref.num_generations;
  const missing: number[] = [];
  for (let i = start; i < start + ref.num_generations; i++) {
    if (!group.rows.has(i)) missing.push(i);
  }
  return missing;
}

/** The `incomplete_group` dead letter of an open group, `why` saying what ended the wait. */
export function incompleteGroupDeadLetter(group: PendingGroup, why: string): DeadLetterDecision {
  const missing = missingRowIndices(group);
  const received = rowsInOrder(group).map((r) => r.row.row_index);
  return groupDeadLetter(
    group,
    'incomplete_group',
    `group ${group.group_id} of batch ${group.batch_id} is incomplete ${why}: ` +
      `received rows [${received.join(', ')}], missing [${missing.join(', ')}]`,
    missing,
  );
}

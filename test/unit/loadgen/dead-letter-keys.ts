/**
 * One key per dead letter, for comparing what the accumulator wrote with
 * what the load generator expected (`collectExpectations`): whole-group
 * reasons by their rows and missing rows, row reasons by their row.
 */
import type { ExpectedOutcome } from '../../../loadgen/index.js';
import type { DeadLetterDecision } from '../../../processors/types.js';

const GROUP_REASONS = new Set(['incomplete_group', 'mixed_agents', 'task_index_mismatch']);

export function realKey(d: DeadLetterDecision): string {
  if (GROUP_REASONS.has(d.reason)) {
    return `${d.reason}|${d.group_id}|rows=${d.row_indices.join(',')}|missing=${d.missing_row_indices.join(',')}`;
  }
  return `${d.reason}|${d.group_id}|row=${d.row_indices[0]}`;
}

export function expectedKey(e: ExpectedOutcome): string {
  if (e.row_indices !== undefined) {
    return `${e.reason}|${e.group_id}|rows=${e.row_indices.join(',')}|missing=${(e.missing_row_indices ?? []).join(',')}`;
  }
  return `${e.reason}|${e.group_id}|row=${e.row_index}`;
}

/**
 * Accumulate (SPEC §3): rows of `rollout.row-completed` in completion order
 * in, complete prompt groups in row-index order out, every bad input as a
 * dead-letter decision. Pure: time comes in as `nowMs`, state is an explicit
 * AccumulatorState, and every state mutation is returned as an
 * AccumulatorStateChange (applied here through `applyStateChange`, so the
 * returned changes rebuild the state exactly).
 */
import {
  type AccumulatorState,
  type AccumulatorStateChange,
  type PendingGroup,
  applyStateChange,
  payloadHash,
} from './accumulator-state.js';
import {
  buildPromptGroup,
  groupDeadLetter,
  incompleteGroupDeadLetter,
  referenceRow,
  rowsInOrder,
  wholeGroupProblem,
} from './group-closing.js';
import { CONTENT_DIGEST_PREFIX } from './content-digest.js';
import { ingestGymResult } from './gym-ingest.js';
import type { ResolvedIngestConfig } from './ingest-config.js';
import { validateRow } from './row-validation.js';
import type { AccumulateConfig } from '../config/schema.js';
import type { BatchEnd, DeadLetterDecision, PromptGroup, RolloutRow } from './types.js';

export { createAccumulatorState, applyStateChange } from './accumulator-state.js';
export type { AccumulatorState, AccumulatorStateChange } from './accumulator-state.js';

/** One row-completed record: the decoded object (fields may be invalid) and the bytes it arrived as. */
export interface RowInput {
  record: unknown;
  payload: Uint8Array;
  /**
   * The bytes that identify the record's content for replay detection (SPEC
   * §3 rule 3: the decoded record ignoring only `produced_at`); default
   * `payload`. The runtime passes the payload without its trailing
   * `produced_at`, so a publisher that re-sends a batch after a crash, with
   * new timestamps, is recognised.
   */
  identity?: Uint8Array;
  /**
   * The record's content digest (processors/content-digest.ts): what replay
   * detection compares. Rows remembered under an older identity (a hash of
   * `identity`, without the digest's prefix) are compared that way.
   */
  digest?: string;
}

export interface EmittedGroup {
  group: PromptGroup;
  /** Original bytes of each row, in row order. */
  payloads: Uint8Array[];
}

export interface AccumulateResult {
  groups: EmittedGroup[];
  deadLetters: DeadLetterDecision[];
  changes: AccumulatorStateChange[];
  /** Byte-identical rows dropped as idempotent replays. */
  replays: number;
}

/** Collects outputs and applies each change as it is recorded. */
class Step {
  readonly result: AccumulateResult = { groups: [], deadLetters: [], changes: [], replays: 0 };
  constructor(readonly state: AccumulatorState) {}

  change(c: AccumulatorStateChange): void {
    applyStateChange(this.state, c);
    this.result.changes.push(c);
  }

  close(group: PendingGroup, at: number): void {
    const row_hashes = rowsInOrder(group).map((r) => ({ row_index: r.row.row_index, hash: r.hash }));
    this.change({ kind: 'group_closed', group_id: group.group_id, batch_id: group.batch_id, at, row_hashes });
  }
}

function rowDeadLetter(
  reason: DeadLetterDecision['reason'],
  message: string,
  ids: { group_id: string | null; batch_id: string | null; row_index: number | null },
  payload: Uint8Array,
): DeadLetterDecision {
  return {
    reason,
    message,
    group_id: ids.group_id,
    batch_id: ids.batch_id,
    row_indices: ids.row_index === null ? [] : [ids.row_index],
    missing_row_indices: [],
    payloads: [payload],
  };
}

/** Which of the group-defining fields of `row` differ from the group's reference row. */
function inconsistentFields(row: RolloutRow, ref: RolloutRow): string[] {
  const keys = ['num_generations', 'group_index', 'batch_id', 'prompt_idx'] as const;
  return keys.filter((k) => row[k] !== ref[k]).map((k) => `${k} ${row[k]} (group has ${ref[k]})`);
}

/**
 * Adds one row. Order of checks: the row-only checks of `validateRow`
 * (type, range, fields, NaN logprobs); then, for a closed group, a
 * byte-identical row is a replay and anything else `group_already_closed`;
 * for an open group, an index already received is a replay when identical
 * and `duplicate_row_index` otherwise, and a row disagreeing with the group
 * on N, group_index, batch_id or prompt_idx is `inconsistent_group`. A row
 * that completes its group (N distinct indices) closes it: emitted, or one
 * whole-group dead letter (`mixed_agents`, then `task_index_mismatch`).
 * Row-only rejections leave the group open and waiting. Never throws on bad
 * input.
 */
export function accumulateRow(
  state: AccumulatorState,
  input: RowInput,
  config: AccumulateConfig,
  nowMs: number,
): AccumulateResult {
  const step = new Step(state);
  const out = step.result;
  const checked = validateRow(input.record);
  if (!checked.ok) {
    out.deadLetters.push(rowDeadLetter(checked.reason, checked.message, checked, input.payload));
    return out;
  }
  const row = checked.row;
  const ids = { group_id: row.group_id, batch_id: row.batch_id, row_index: row.row_index };
  const hash = input.digest ?? payloadHash(input.identity ?? input.payload);
  // A row remembered before content digests existed carries the hash of its bytes.
  const same = (stored: string | undefined) =>
    stored !== undefined && (stored === hash || (!stored.startsWith(CONTENT_DIGEST_PREFIX) && stored === payloadHash(input.identity ?? input.payload)));

  const closed = state.closed.get(row.group_id);
  if (closed) {
    if (same(closed.row_hashes.get(row.row_index))) out.replays += 1;
    else {
      const message = `group ${row.group_id} is already closed; row ${row.row_index} is not a replay of a row it received`;
      out.deadLetters.push(rowDeadLetter('group_already_closed', message, ids, input.payload));
    }
    return out;
  }

  const open = state.pending.get(row.group_id);
  if (open) {
    const existing = open.rows.get(row.row_index);
    if (existing) {
      if (same(existing.hash)) out.replays += 1;
      else {
        const message = `row ${row.row_index} of group ${row.group_id} was already received with different content`;
        out.deadLetters.push(rowDeadLetter('duplicate_row_index', message, ids, input.payload));
      }
      return out;
    }
    const diff = inconsistentFields(row, referenceRow(open));
    if (diff.length > 0) {
      const message = `row ${row.row_index} disagrees with group ${row.group_id}: ${diff.join('; ')}`;
      out.deadLetters.push(rowDeadLetter('inconsistent_group', message, ids, input.payload));
      return out;
    }
  }

  step.change({
    kind: 'row_added',
    group_id: row.group_id,
    batch_id: row.batch_id,
    row_index: row.row_index,
    row,
    payload: input.payload,
    hash,
    at: nowMs,
  });
  const group = state.pending.get(row.group_id) as PendingGroup;
  if (group.rows.size === row.num_generations) closeComplete(step, group, config, nowMs);
  return out;
}

/**
 * Adds one raw NeMo-Gym result (SPEC §2.1): converts it into the RolloutRow
 * NeMo-RL's NeMo-Gym actor would build, then treats that row exactly as
 * `accumulateRow` does, with the GymResult's bytes as its payload (a dead
 * letter keeps the original record). A result that cannot be converted is a
 * row-level dead letter (`non_contiguous_tokens`, `no_generation_data`,
 * `invalid_row`, …) and its group keeps waiting.
 */
export function accumulateGymResult(
  state: AccumulatorState,
  input: RowInput,
  config: AccumulateConfig,
  ingest: ResolvedIngestConfig,
  nowMs: number,
): AccumulateResult {
  const converted = ingestGymResult(input.record, ingest);
  if (converted.ok) return accumulateRow(state, { ...input, record: converted.row }, config, nowMs);
  const out = new Step(state).result;
  out.deadLetters.push(rowDeadLetter(converted.reason, converted.message, converted, input.payload));
  return out;
}

function closeComplete(step: Step, group: PendingGroup, config: AccumulateConfig, nowMs: number): void {
  const ordered = rowsInOrder(group);
  const rows = ordered.map((r) => r.row);
  const problem = wholeGroupProblem(rows, config.allow_mixed_agents);
  if (problem) {
    step.result.deadLetters.push(groupDeadLetter(group, problem.reason, problem.message));
  } else {
    step.result.groups.push({ group: buildPromptGroup(rows), payloads: ordered.map((r) => r.payload) });
  }
  step.close(group, nowMs);
}

/**
 * Records a batch's BatchEnd (the first one seen counts; later copies from
 * other producers change nothing) and, when the grace is already over (grace
 * 0), dead-letters the batch's open groups as `incomplete_group`.
 */
export function accumulateBatchEnd(
  state: AccumulatorState,
  end: BatchEnd,
  config: AccumulateConfig,
  nowMs: number,
): AccumulateResult {
  const step = new Step(state);
  if (!state.batch_ends.has(end.batch_id)) step.change({ kind: 'batch_ended', batch_id: end.batch_id, at: nowMs });
  expireBatchEnds(step, config, nowMs, end.batch_id);
  return step.result;
}

function expireBatchEnds(step: Step, config: AccumulateConfig, nowMs: number, onlyBatch?: string): void {
  for (const group of [...step.state.pending.values()]) {
    if (onlyBatch !== undefined && group.batch_id !== onlyBatch) continue;
    const endedAt = step.state.batch_ends.get(group.batch_id);
    if (endedAt === undefined || nowMs < endedAt + config.batch_end_grace_ms) continue;
    const why = `${config.batch_end_grace_ms} ms after its batch ended`;
    step.result.deadLetters.push(incompleteGroupDeadLetter(group, why));
    step.close(group, nowMs);
  }
}

/**
 * Time-driven work, to be called periodically with the current time: open
 * groups older than `group_timeout_ms` (counted from their first row) or
 * whose batch ended at least `batch_end_grace_ms` ago become
 * `incomplete_group` dead letters; closed groups are forgotten
 * `emitted_retention_ms` after closing, and batch ends likewise once no
 * group of the batch is open.
 */
export function expireGroups(state: AccumulatorState, config: AccumulateConfig, nowMs: number): AccumulateResult {
  const step = new Step(state);
  for (const group of [...state.pending.values()]) {
    if (nowMs - group.opened_at < config.group_timeout_ms) continue;
    step.result.deadLetters.push(incompleteGroupDeadLetter(group, `after the ${config.group_timeout_ms} ms group timeout`));
    step.close(group, nowMs);
  }
  expireBatchEnds(step, config, nowMs);
  for (const closed of [...state.closed.values()]) {
    if (nowMs - closed.closed_at >= config.emitted_retention_ms) {
      step.change({ kind: 'closed_forgotten', group_id: closed.group_id });
    }
  }
  const openBatches = new Set([...state.pending.values()].map((g) => g.batch_id));
  for (const [batchId, at] of [...state.batch_ends]) {
    if (nowMs - at >= config.emitted_retention_ms && !openBatches.has(batchId)) {
      step.change({ kind: 'batch_forgotten', batch_id: batchId });
    }
  }
  return step.result;
}

/**
 * End of input (the offline runner): acts as a BatchEnd for every batch with
 * open groups, grace already elapsed, so every open group becomes an
 * `incomplete_group` dead letter listing its missing rows. Closed groups stay
 * remembered.
 */
export function finishInput(state: AccumulatorState, _config: AccumulateConfig, nowMs: number): AccumulateResult {
  const step = new Step(state);
  for (const group of [...state.pending.values()]) {
    if (!state.batch_ends.has(group.batch_id)) {
      step.change({ kind: 'batch_ended', batch_id: group.batch_id, at: nowMs });
    }
  }
  for (const group of [...state.pending.values()]) {
    step.result.deadLetters.push(incompleteGroupDeadLetter(group, 'at the end of input'));
    step.close(group, nowMs);
  }
  return step.result;
}

/**
 * What the load generator emits, and what each injected fault must cause
 * downstream. A test of the real pipeline collects every `expect` of a run
 * (`collectExpectations`) and checks that the dead-letter topic holds
 * exactly those dead letters and that every other group was emitted whole.
 */
import type { BatchEnd, DeadLetterReason, GymResult, RolloutRow } from '../processors/types.js';
import type { FaultKind } from './fault-spec.js';

/**
 * The outcome one injected fault must have in the accumulator (SPEC §3).
 * Field names follow the dead-letter record so a test can compare them
 * directly.
 */
export interface ExpectedOutcome {
  fault: FaultKind;
  /** The dead-letter reason; null when the record must vanish without a dead letter (an identical duplicate). */
  reason: DeadLetterReason | null;
  batch_id: string;
  /** The group; for garbage, the record key (the group id of a row sent just before it). */
  group_id: string;
  /** Row-level outcomes: the index the rejected record carries (for `out_of_range`, the bogus index). */
  row_index?: number;
  /** Group-level outcomes: the indices of the rows the group's one dead letter carries, sorted. */
  row_indices?: number[];
  /** `incomplete_group`: the indices that were never sent, sorted. */
  missing_row_indices?: number[];
  /**
   * `conflict`: which copy arrives second and is rejected. The first copy
   * to arrive is valid and wins: it is the row the group is emitted (or
   * dead-lettered) with.
   */
  rejected_copy?: 'original' | 'conflicting';
}

/**
 * One record to produce, with `delayMs`: the modelled gap since the
 * previous event (exponential inter-arrival at the profile's row rate), for
 * a producer that paces itself or wants realistic spacing.
 *
 * - `row`: a `RolloutRow` for the row-completed topic, keyed by its group
 *   id. `expect` is set when this record is the rejected part of a fault.
 * - `garbage`: raw bytes to send as the value with `key` (not Avro: the
 *   first byte is never the Confluent magic byte 0).
 * - `batch_end`: the `BatchEnd` control record (to every partition).
 *   `expect` lists the groups of the batch that must become
 *   `incomplete_group` once it arrived and the grace period passed.
 */
export type LoadgenEvent =
  | { kind: 'row'; delayMs: number; row: RolloutRow; expect?: ExpectedOutcome }
  | { kind: 'garbage'; delayMs: number; key: string; bytes: Uint8Array; expect: ExpectedOutcome }
  | { kind: 'batch_end'; delayMs: number; end: BatchEnd; expect?: ExpectedOutcome[] };

/**
 * A row sent as the NeMo-Gym result it came from (SPEC §2.1), for
 * `loadgen --format gym-result` (`asGymResultEvents`): accumulate's
 * conversion turns it back into the row, so `expect` is the row's.
 */
export type GymResultEvent = { kind: 'gym_result'; delayMs: number; result: GymResult; expect?: ExpectedOutcome };

/** The events of a gym-result run: every row replaced by its GymResult; garbage and batch ends unchanged. */
export type GymLoadgenEvent = Exclude<LoadgenEvent, { kind: 'row' }> | GymResultEvent;

/** Every expectation of a run, split the way a pipeline test checks them. */
export interface Expectations {
  /** Outcomes that must appear on the dead-letter topic, once each. */
  deadLetters: ExpectedOutcome[];
  /** Records that must vanish: no dead letter, no effect on their group. */
  silentlyDropped: ExpectedOutcome[];
  /** Groups that must reach group-complete whole (all N rows), by group id, with their batch. */
  completeGroups: Map<string, { batch_id: string; num_generations: number }>;
}

/**
 * Folds the `expect`s of a run into the sets a pipeline test checks. A group
 * is expected complete when at least one of its rows was sent and no
 * group-level outcome (`mixed_agents`, `task_index_mismatch`,
 * `incomplete_group`) names it.
 */
export function collectExpectations(events: Iterable<LoadgenEvent | GymResultEvent>): Expectations {
  const deadLetters: ExpectedOutcome[] = [];
  const silentlyDropped: ExpectedOutcome[] = [];
  const seen = new Map<string, { batch_id: string; num_generations: number }>();
  const failed = new Set<string>();
  const note = (e: ExpectedOutcome): void => {
    if (e.reason === null) silentlyDropped.push(e);
    else deadLetters.push(e);
    if (e.row_indices !== undefined) failed.add(e.group_id);
  };
  for (const ev of events) {
    if (ev.kind === 'row' || ev.kind === 'gym_result') {
      const r = ev.kind === 'row' ? ev.row : ev.result;
      if (!seen.has(r.group_id)) seen.set(r.group_id, { batch_id: r.batch_id, num_generations: r.num_generations });
      if (ev.expect !== undefined) note(ev.expect);
    } else if (ev.kind === 'garbage') {
      note(ev.expect);
    } else {
      for (const e of ev.expect ?? []) note(e);
    }
  }
  const completeGroups = new Map([...seen].filter(([id]) => !failed.has(id)));
  return { deadLetters, silentlyDropped, completeGroups };
}

/**
 * Row references (the claim-check pattern, issue 16): in reference mode
 * (`runtime.intermediate_records: reference`) `rollout.group-complete` and
 * `rollout.penalized` name each row of a group by where it already lies in
 * `rollout.row-completed` instead of carrying a copy. A decoded reference
 * record is marked `unresolved` until its rows are read back
 * (row-resolver.ts) and put in place here.
 */
import type { PenalizedGroup, PromptGroup, RolloutRow } from '../../processors/types.js';

/**
 * One row's place in `rollout.row-completed`. A group's references are in row
 * order: the i-th is its row with row_index `group_index × N + i` (SPEC §3).
 */
export interface RowRef {
  partition: number;
  offset: string;
}

/**
 * What a group-complete or penalized record carries besides the processor's
 * object. `row_refs` set: the record is written in reference form. `unresolved`
 * (decoded reference records only): the rows' own fields are not there yet —
 * empty `rows` (group-complete), or rows without message logs and agent refs
 * and an empty prompt (penalized).
 */
export interface RowRefFields {
  row_refs?: RowRef[];
  /**
   * Reference form: the fingerprint of the ingest config that derived the
   * rows (processors/ingest-fingerprint.ts); a reader that would convert a
   * GymResult row under another one refuses the record. Absent in records
   * written before fingerprints existed.
   */
  ingest_fingerprint?: string;
  unresolved?: true;
}

export type GroupRecord = PromptGroup & RowRefFields;
export type PenalizedRecord = PenalizedGroup & RowRefFields;

/** The group with its rows read back, in reference order. */
export function groupWithRows(g: GroupRecord, rows: RolloutRow[]): GroupRecord {
  const { unresolved: _u, ...rest } = g;
  return { ...rest, rows };
}

/** The penalized group with the fields postprocess copied from its rows put back (processors/postprocess.ts). */
export function penalizedWithRows(p: PenalizedRecord, rows: RolloutRow[]): PenalizedRecord {
  const { unresolved: _u, ...rest } = p;
  if (rows.length !== p.rows.length) throw new Error(`penalized group ${p.group_id} has ${p.rows.length} rows and ${rows.length} references resolved`);
  return {
    ...rest,
    prompt: rows[0]?.input_message_log ?? [],
    rows: p.rows.map((r, i) => ({ ...r, agent_ref: rows[i]!.agent_ref, message_log: rows[i]!.message_log })),
  };
}

/**
 * The record to write: with `refs` in reference form, carrying
 * `fingerprint` (the ingest config that derived the rows), else in full form
 * (no references, no fingerprint).
 */
export function asWritten<T extends object>(value: T & RowRefFields, refs: RowRef[] | null, fingerprint: string | null): T & RowRefFields {
  const { row_refs: _r, ingest_fingerprint: _f, unresolved: _u, ...rest } = value;
  if (!refs) return rest as T & RowRefFields;
  return (fingerprint ? { ...rest, row_refs: refs, ingest_fingerprint: fingerprint } : { ...rest, row_refs: refs }) as T & RowRefFields;
}

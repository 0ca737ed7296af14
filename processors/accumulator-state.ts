/**
 * The accumulator's durable state (SPEC §3, §8) and the changes that build it.
 *
 * The state is a plain value; the only way it changes is `applyStateChange`,
 * and the accumulator applies every change it emits through that function.
 * So replaying the emitted changes, in order, into a fresh state rebuilds an
 * identical state — which is how a restarted instance restores itself from
 * its changelog topic (STYLE.md: state is a logged store).
 */
import { createHash } from 'node:crypto';
import type { RolloutRow } from './types.js';

/** One accepted row of an open group, with the bytes it arrived as. */
export interface PendingRow {
  row: RolloutRow;
  payload: Uint8Array;
  /** `payloadHash(payload)`: recognizes byte-identical replays. */
  hash: string;
  at: number;
}

/** A group that has accepted rows but not yet closed. */
export interface PendingGroup {
  group_id: string;
  batch_id: string;
  /** Arrival time of its first accepted row; the group timeout counts from here. */
  opened_at: number;
  /** By row index, in arrival order (the first entry is the group's reference row). */
  rows: Map<number, PendingRow>;
}

/** A group already emitted or dead-lettered, remembered for replay detection. */
export interface ClosedGroup {
  group_id: string;
  batch_id: string;
  closed_at: number;
  /** Payload hash per accepted row index. */
  row_hashes: Map<number, string>;
}

export interface AccumulatorState {
  pending: Map<string, PendingGroup>;
  closed: Map<string, ClosedGroup>;
  /** batch id → time its BatchEnd (or end of input) was seen. */
  batch_ends: Map<string, number>;
}

export interface RowHash {
  row_index: number;
  hash: string;
}

/** Every mutation of AccumulatorState, as plain data (serializable by the runtime). */
export type AccumulatorStateChange =
  | {
      kind: 'row_added';
      group_id: string;
      batch_id: string;
      row_index: number;
      row: RolloutRow;
      payload: Uint8Array;
      hash: string;
      at: number;
    }
  /** The group left `pending` (emitted or dead-lettered); its row hashes are remembered. */
  | { kind: 'group_closed'; group_id: string; batch_id: string; at: number; row_hashes: RowHash[] }
  | { kind: 'batch_ended'; batch_id: string; at: number }
  | { kind: 'closed_forgotten'; group_id: string }
  | { kind: 'batch_forgotten'; batch_id: string };

export function createAccumulatorState(): AccumulatorState {
  return { pending: new Map(), closed: new Map(), batch_ends: new Map() };
}

/** A stable content hash of a record's bytes (hex SHA-256). */
export function payloadHash(payload: Uint8Array): string {
  return createHash('sha256').update(payload).digest('hex');
}

/**
 * Applies one change to `state` in place. Applying a change whose target is
 * already gone (e.g. forgetting a group that is not remembered) is a no-op,
 * so replaying a compacted changelog is safe.
 */
export function applyStateChange(state: AccumulatorState, change: AccumulatorStateChange): void {
  switch (change.kind) {
    case 'row_added': {
      let group = state.pending.get(change.group_id);
      if (!group) {
        group = { group_id: change.group_id, batch_id: change.batch_id, opened_at: change.at, rows: new Map() };
        state.pending.set(change.group_id, group);
      }
      group.rows.set(change.row_index, { row: change.row, payload: change.payload, hash: change.hash, at: change.at });
      return;
    }
    case 'group_closed': {
      state.pending.delete(change.group_id);
      const row_hashes = new Map(change.row_hashes.map((h) => [h.row_index, h.hash] as const));
      state.closed.set(change.group_id, {
        group_id: change.group_id,
        batch_id: change.batch_id,
        closed_at: change.at,
        row_hashes,
      });
      return;
    }
    case 'batch_ended':
      if (!state.batch_ends.has(change.batch_id)) state.batch_ends.set(change.batch_id, change.at);
      return;
    case 'closed_forgotten':
      state.closed.delete(change.group_id);
      return;
    case 'batch_forgotten':
      state.batch_ends.delete(change.batch_id);
      return;
  }
}

/**
 * The changelog key of a change, for a compacted changelog topic: one key
 * per pending row (`g/<group>/r/<index>`), per group (`g/<group>`) and per
 * batch (`b/<batch>`). Keys are distinct per row so compaction never drops a
 * pending row; `supersededKeys` names the keys a change makes obsolete (the
 * runtime writes tombstones for them).
 */
export function changelogKey(change: AccumulatorStateChange): string {
  switch (change.kind) {
    case 'row_added':
      return rowKey(change.group_id, change.row_index);
    case 'group_closed':
    case 'closed_forgotten':
      return `g/${change.group_id}`;
    case 'batch_ended':
    case 'batch_forgotten':
      return `b/${change.batch_id}`;
  }
}

/** Keys whose latest value no longer matters after `change` (tombstone them). */
export function supersededKeys(change: AccumulatorStateChange): string[] {
  if (change.kind === 'group_closed') return change.row_hashes.map((h) => rowKey(change.group_id, h.row_index));
  return [];
}

function rowKey(groupId: string, rowIndex: number): string {
  return `g/${groupId}/r/${rowIndex}`;
}

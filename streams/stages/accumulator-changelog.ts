/**
 * Serialization of the accumulator's state changes for its compacted
 * changelog topic. Keys come from `changelogKey` (one per pending row, group
 * and batch). Values:
 *
 *   row_added     := u32be(header_len) header_json [payload]
 *   group_closed  := u32be(header_len) header_json           (row hashes)
 *   batch_ended   := u32be(header_len) header_json
 *   *_forgotten   := tombstone (null), as are rows superseded by a close
 *
 * A pending row's bytes are already in the input topic, so its changelog
 * record is a reference: the header carries the row's input offset and no
 * payload (`ref: true`), and a restore reads the referenced rows back from
 * the input partition (the input topic is the changelog of the row bytes, as
 * Kafka Streams does for source tables). This keeps a row's bytes from being
 * written to the broker a fifth time. A row whose offset is unknown, and
 * records written before references existed, carry the payload inline.
 */
import {
  changelogKey,
  supersededKeys,
  type AccumulatorStateChange,
} from '../../processors/accumulator-state.js';
import type { ChangelogRecord } from '../api/stage.js';

interface Header {
  kind: AccumulatorStateChange['kind'];
  [key: string]: unknown;
}

function frame(header: Header, payload?: Uint8Array): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const out = Buffer.allocUnsafe(4 + json.length + (payload?.length ?? 0));
  out.writeUInt32BE(json.length, 0);
  json.copy(out, 4);
  if (payload) out.set(payload, 4 + json.length);
  return out;
}

/** Changelog records for one change: its own key (or a tombstone) plus tombstones for superseded keys. */
export function changelogRecords(change: AccumulatorStateChange, offsetOf: (payload: Uint8Array) => string | undefined): ChangelogRecord[] {
  const key = changelogKey(change);
  let value: Buffer | null;
  switch (change.kind) {
    case 'row_added': {
      const { row: _row, payload, ...rest } = change;
      const offset = offsetOf(payload);
      value = offset !== undefined && BigInt(offset) >= 0n ? frame({ ...rest, offset, ref: true }) : frame({ ...rest, offset }, payload);
      break;
    }
    case 'group_closed':
    case 'batch_ended':
      value = frame({ ...change });
      break;
    default:
      value = null;
  }
  return [{ key, value }, ...supersededKeys(change).map((k) => ({ key: k, value: null }))];
}

/** A pending row as stored: its change without the decoded row, where it came from, and its bytes when stored inline. */
export interface StoredRow {
  change: Omit<Extract<AccumulatorStateChange, { kind: 'row_added' }>, 'row' | 'payload'>;
  /** Input offset of the row (absent in records that predate it). */
  offset?: string;
  /** Inline payload; absent for a reference (read the input partition at `offset`). */
  payload?: Buffer;
}

export type ParsedChangelogRecord = { kind: 'row'; row: StoredRow } | { kind: 'change'; change: AccumulatorStateChange };

/**
 * What a changelog record stands for, or null for a tombstone of a
 * superseded row (nothing to apply). Rows come back undecoded: the caller
 * resolves references and decodes the payload.
 */
export function parseChangelogRecord(record: ChangelogRecord): ParsedChangelogRecord | null {
  if (record.value === null) {
    if (record.key.startsWith('b/')) return { kind: 'change', change: { kind: 'batch_forgotten', batch_id: record.key.slice(2) } };
    if (record.key.startsWith('g/') && !record.key.includes('/r/')) {
      return { kind: 'change', change: { kind: 'closed_forgotten', group_id: record.key.slice(2) } };
    }
    return null;
  }
  const len = record.value.readUInt32BE(0);
  const header = JSON.parse(record.value.subarray(4, 4 + len).toString('utf8')) as Header;
  if (header.kind === 'row_added') {
    const { offset, ref, ...rest } = header as Header & { offset?: string; ref?: boolean };
    const row: StoredRow = { change: rest as unknown as StoredRow['change'] };
    if (offset !== undefined) row.offset = offset;
    if (ref !== true) row.payload = record.value.subarray(4 + len);
    else if (offset === undefined) throw new Error(`changelog row ${record.key} is a reference without an offset`);
    return { kind: 'row', row };
  }
  return { kind: 'change', change: header as unknown as AccumulatorStateChange };
}

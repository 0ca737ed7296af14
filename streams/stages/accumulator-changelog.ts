/**
 * Serialization of the accumulator's state changes for its compacted
 * changelog topic. Keys come from `changelogKey` (one per pending row, group
 * and batch). Values:
 *
 *   row_added     := u32be(header_len) header_json payload   (payload = the row's original Kafka value)
 *   group_closed  := u32be(header_len) header_json           (row hashes)
 *   batch_ended   := u32be(header_len) header_json
 *   *_forgotten   := tombstone (null), as are rows superseded by a close
 *
 * The header of a row carries the source offset so dead letters of restored
 * rows still point at where the row came from.
 */
import {
  changelogKey,
  supersededKeys,
  type AccumulatorStateChange,
} from '../../processors/accumulator-state.js';
import type { RolloutRow } from '../../processors/types.js';
import type { ChangelogRecord } from '../stage.js';

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
      value = frame({ ...rest, offset: offsetOf(payload) }, payload);
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

/**
 * The change a changelog record stands for, or null for a tombstone of a
 * superseded row (nothing to apply). `decodeRow` turns a stored payload back
 * into the row.
 */
export async function changeFromRecord(
  record: ChangelogRecord,
  decodeRow: (payload: Buffer) => Promise<RolloutRow>,
): Promise<{ change: AccumulatorStateChange; offset?: string; payload?: Buffer } | null> {
  if (record.value === null) {
    if (record.key.startsWith('b/')) return { change: { kind: 'batch_forgotten', batch_id: record.key.slice(2) } };
    if (record.key.startsWith('g/') && !record.key.includes('/r/')) {
      return { change: { kind: 'closed_forgotten', group_id: record.key.slice(2) } };
    }
    return null;
  }
  const len = record.value.readUInt32BE(0);
  const header = JSON.parse(record.value.subarray(4, 4 + len).toString('utf8')) as Header;
  if (header.kind === 'row_added') {
    const payload = record.value.subarray(4 + len);
    const { offset, ...rest } = header as Header & { offset?: string };
    const row = await decodeRow(payload);
    return { change: { ...(rest as object), row, payload } as unknown as AccumulatorStateChange, ...(offset ? { offset } : {}), payload };
  }
  return { change: header as unknown as AccumulatorStateChange };
}

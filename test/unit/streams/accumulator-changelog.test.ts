import { describe, expect, test } from 'vitest';
import type { AccumulatorStateChange } from '../../../processors/accumulator-state.js';
import { changelogRecords, parseChangelogRecord } from '../../../streams/stages/accumulator-changelog.js';
import { makeRow } from '../accumulate/fixtures.js';

const row = makeRow({ group_id: 'g7', position: 2 });
const payload = Buffer.alloc(50_000, 3);
const added: AccumulatorStateChange = {
  kind: 'row_added',
  group_id: 'g7',
  batch_id: 'b0',
  row_index: row.row_index,
  row,
  payload,
  hash: 'abc',
  at: 1234,
};

describe('accumulator changelog records', () => {
  test('a row with a known input offset is stored as a reference, without its bytes', () => {
    const [rec, ...rest] = changelogRecords(added, () => '41');
    expect(rest).toEqual([]);
    expect(rec!.key).toBe('g/g7/r/2');
    expect(rec!.value!.length).toBeLessThan(300);
    expect(parseChangelogRecord(rec!)).toEqual({
      kind: 'row',
      row: { change: { kind: 'row_added', group_id: 'g7', batch_id: 'b0', row_index: 2, hash: 'abc', at: 1234 }, offset: '41' },
    });
  });

  test('a row without an input offset keeps its bytes inline', () => {
    const [rec] = changelogRecords(added, () => undefined);
    const parsed = parseChangelogRecord(rec!);
    expect(parsed?.kind).toBe('row');
    if (parsed?.kind !== 'row') return;
    expect(parsed.row.offset).toBeUndefined();
    expect(Buffer.compare(parsed.row.payload!, payload)).toBe(0);
  });

  test('records written before references existed (offset and inline payload) still parse', () => {
    const json = Buffer.from(JSON.stringify({ kind: 'row_added', group_id: 'g7', batch_id: 'b0', row_index: 2, hash: 'abc', at: 1, offset: '9' }));
    const len = Buffer.alloc(4);
    len.writeUInt32BE(json.length);
    const parsed = parseChangelogRecord({ key: 'g/g7/r/2', value: Buffer.concat([len, json, payload]) });
    expect(parsed?.kind === 'row' && parsed.row.offset).toBe('9');
    expect(parsed?.kind === 'row' && Buffer.compare(parsed.row.payload!, payload)).toBe(0);
  });

  test('a reference without an offset is refused', () => {
    const json = Buffer.from(JSON.stringify({ kind: 'row_added', group_id: 'g7', ref: true }));
    const len = Buffer.alloc(4);
    len.writeUInt32BE(json.length);
    expect(() => parseChangelogRecord({ key: 'g/g7/r/2', value: Buffer.concat([len, json]) })).toThrow(/without an offset/);
  });

  test('closes supersede row keys with tombstones; tombstones of groups and batches are forget changes', () => {
    const closed: AccumulatorStateChange = { kind: 'group_closed', group_id: 'g7', batch_id: 'b0', row_hashes: [{ row_index: 2, hash: 'abc' }], at: 5 } as AccumulatorStateChange;
    const recs = changelogRecords(closed, () => undefined);
    expect(recs.map((r) => [r.key, r.value === null])).toEqual([
      ['g/g7', false],
      ['g/g7/r/2', true],
    ]);
    expect(parseChangelogRecord(recs[0]!)).toEqual({ kind: 'change', change: closed });
    expect(parseChangelogRecord(recs[1]!)).toBeNull();
    expect(parseChangelogRecord({ key: 'g/g7', value: null })).toEqual({ kind: 'change', change: { kind: 'closed_forgotten', group_id: 'g7' } });
    expect(parseChangelogRecord({ key: 'b/b0', value: null })).toEqual({ kind: 'change', change: { kind: 'batch_forgotten', batch_id: 'b0' } });
  });
});

/**
 * Replay is recognised by what a row says, not how it was spelled: the
 * content digest (processors/content-digest.ts) is the same for a row
 * decoded from Avro and from its JSON line, whatever the key order, number
 * spelling or unicode escaping of its JSON, with or without `produced_at`;
 * any real change of content changes it. Accumulate counts such copies as
 * replays, and still recognises rows it remembered by their old byte hash.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { contentDigest, CONTENT_DIGEST_PREFIX } from '../../../processors/content-digest.js';
import { accumulateRow } from '../../../processors/group-accumulator.js';
import { createAccumulatorState, payloadHash } from '../../../processors/accumulator-state.js';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import { formatJsonLine, parseJsonLine } from '../../../json-form/form.js';
import type { RolloutRow } from '../../../processors/types.js';
import { defaultAccumulateConfig, makeRow, reversed } from './fixtures.js';

const codec = new AvroBodyCodec('rowCompleted');
const throughAvro = (row: RolloutRow): RolloutRow => {
  const e = codec.decodeBody(codec.encodeFramed({ kind: 'row', row }, 1), 5);
  if (e.kind !== 'row') throw new Error('not a row');
  return e.row;
};
const throughJson = (row: RolloutRow): RolloutRow => {
  const l = parseJsonLine(formatJsonLine({ kind: 'row', record: row }));
  if (l.kind !== 'row') throw new Error('not a row');
  return l.record as RolloutRow;
};

describe('content digest', () => {
  const row = makeRow({ position: 1 });
  row.full_result = { reward: 1, response: { output: [{ type: 'message', text: 'caf\u00e9 ☕' }] }, score: 2.5 };
  row.produced_at = 1_700_000_000_000;

  test('the same row from Avro, from its JSON line and from a re-spelled JSON line has one digest', () => {
    const d = contentDigest(row);
    expect(d.startsWith(CONTENT_DIGEST_PREFIX)).toBe(true);
    expect(contentDigest(throughAvro(row))).toBe(d);
    expect(contentDigest(throughJson(row))).toBe(d);
    // Another publisher's spelling: key order reversed, 1.0 for 1, unicode escaped, no produced_at.
    const line = formatJsonLine({ kind: 'row', record: row });
    const obj = JSON.parse(line) as Record<string, unknown>;
    delete obj.produced_at;
    const respelled = JSON.stringify(reversed(obj))
      .replace('"reward":1,', '"reward":1.0,')
      .replace(/é/g, '\\u00e9')
      .replace(/☕/g, '\\u2615');
    expect(respelled).not.toBe(line);
    const l = parseJsonLine(respelled);
    expect(l.kind === 'row' && contentDigest(l.record)).toBe(d);
    // And a later re-send with a new timestamp.
    expect(contentDigest({ ...row, produced_at: 1_800_000_000_000 })).toBe(d);
  });

  test('a tensor dtype is content, as is every value', () => {
    const d = contentDigest(row);
    const other = structuredClone(row);
    other.message_log[1]!.token_ids = Int32Array.from(other.message_log[1]!.token_ids, (x, i) => (i === 0 ? x + 1 : x));
    expect(contentDigest(other)).not.toBe(d);
    const score = structuredClone(row);
    (score.full_result as { score: number }).score = 2.25;
    expect(contentDigest(score)).not.toBe(d);
  });

  test('property: key order never matters, any changed leaf does', () => {
    const json = fc.jsonValue({ maxDepth: 3 });
    fc.assert(
      fc.property(fc.dictionary(fc.string({ minLength: 1, maxLength: 4 }), json, { minKeys: 1, maxKeys: 5 }), fc.string({ minLength: 1, maxLength: 3 }), (o, extra) => {
        const norm = JSON.parse(JSON.stringify(o)) as Record<string, unknown>;
        expect(contentDigest(reversed(norm))).toBe(contentDigest(norm));
        const key = `${extra}\u0000new`;
        expect(contentDigest({ ...norm, [key]: 1 })).not.toBe(contentDigest(norm));
        const first = Object.keys(norm)[0]!;
        if (norm[first] !== null) expect(contentDigest({ ...norm, [first]: [norm[first]] })).not.toBe(contentDigest(norm));
      }),
      { numRuns: 200 },
    );
  });
});

describe('accumulate with content digests', () => {
  const input = (row: RolloutRow, payload = 'bytes') => ({ record: row, payload: new TextEncoder().encode(payload), digest: contentDigest(row) });

  test('a re-spelled copy is a replay; a changed one is duplicate_row_index', () => {
    const state = createAccumulatorState();
    const row = makeRow({ position: 0 });
    accumulateRow(state, input(row, 'first spelling'), defaultAccumulateConfig, 0);
    const again = accumulateRow(state, input(throughJson(throughAvro(row)), 'second spelling'), defaultAccumulateConfig, 1);
    expect([again.replays, again.deadLetters.length]).toEqual([1, 0]);
    const changed = structuredClone(row);
    changed.full_result = { ...changed.full_result, reward: 0.25 };
    const dup = accumulateRow(state, input(changed), defaultAccumulateConfig, 2);
    expect(dup.deadLetters.map((d) => d.reason)).toEqual(['duplicate_row_index']);
  });

  test('a row remembered by its old byte hash is still recognised by the same bytes', () => {
    const state = createAccumulatorState();
    const row = makeRow({ position: 0 });
    const bytes = new TextEncoder().encode('the encoded row');
    // As an older version stored it: no digest, the hash of the bytes.
    accumulateRow(state, { record: row, payload: bytes }, defaultAccumulateConfig, 0);
    expect([...state.pending.values()][0]!.rows.get(0)!.hash).toBe(payloadHash(bytes));
    const again = accumulateRow(state, { record: row, payload: bytes, digest: contentDigest(row) }, defaultAccumulateConfig, 1);
    expect([again.replays, again.deadLetters.length]).toEqual([1, 0]);
  });
});

describe('offline accumulate', () => {
  test('a line without produced_at and its re-send with one (and another spelling) are one row', async () => {
    const { runOffline } = await import('../../../cli/offline.js');
    const { loadConfig } = await import('../../../config/load.js');
    const rows = [0, 1].map((position) => makeRow({ position, num_generations: 2 }));
    const plain = rows.map((r) => {
      const o = JSON.parse(formatJsonLine({ kind: 'row', record: r })) as Record<string, unknown>;
      delete o.produced_at;
      return JSON.stringify(o);
    });
    const resent = JSON.stringify({ ...(reversed(JSON.parse(plain[0]!)) as object), produced_at: 1_900_000_000_000 });
    const out: string[] = [];
    await runOffline('accumulate', loadConfig({ env: {} }).config, [plain[0]!, resent, plain[1]!], (l) => void out.push(l));
    const kinds = out.map((l) => Object.keys(JSON.parse(l) as object)[0]);
    expect(kinds).toEqual(['group']);
  });
});

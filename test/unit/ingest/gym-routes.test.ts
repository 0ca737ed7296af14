import { describe, expect, test } from 'vitest';
import { encodeRoutedExperts, type RouteDType } from '../../../processors/routed-experts-envelope.js';
import { validateRow } from '../../../processors/row-validation.js';
import type { Message } from '../../../processors/types.js';
import { functionCallOutputItem, genItem, gymRecord, ingestCfg, ingestOk, ingestRejected } from './builders.js';

const L = 2;
const K = 2;
/** Route of token position `s` (within one item's routes), layer `l`, slot `k`; `turn` tells items apart. */
const route = (turn: number, s: number, l: number, k: number) => turn * 40 + s * 4 + l * 2 + k;

function nestedRoutes(turn: number, rows: number): number[][][] {
  return Array.from({ length: rows }, (_, s) => Array.from({ length: L }, (_, l) => Array.from({ length: K }, (_, k) => route(turn, s, l, k))));
}

function envelopeRoutes(turn: number, rows: number, dtype: RouteDType = 'int16'): string {
  const ARR = { int8: Int8Array, int16: Int16Array, int32: Int32Array }[dtype];
  const data = ARR.from(nestedRoutes(turn, rows).flat(2));
  return encodeRoutedExperts({ dtype, shape: [rows, L, K], data });
}

/** Route rows of a message as `[[l0k0, l0k1, l1k0, l1k1], ...]`. */
function rowsOf(m: Message): number[][] {
  const t = m.routed_experts!;
  const flat = Array.from(t.data as Int32Array);
  return Array.from({ length: t.shape[0]! }, (_, s) => flat.slice(s * L * K, (s + 1) * L * K));
}
const expected = (turn: number, from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => nestedRoutes(turn, to)[from + i]!.flat());

/** Two turns: prompt [1,2] → [3,4]; tool output; prompt [1,2,3,4,5] → [6,7,8]. Routes cover prompt + generation (+ `extra` rows). */
function twoTurns(form: 'nested' | 'envelope', extra = 0) {
  const enc = form === 'nested' ? nestedRoutes : envelopeRoutes;
  return gymRecord({
    output: [
      genItem([1, 2], [3, 4], { routed_experts: enc(1, 4 + extra) }),
      functionCallOutputItem(),
      genItem([1, 2, 3, 4, 5], [6, 7, 8], { routed_experts: enc(2, 8 + extra) }),
    ],
  });
}

describe('routed experts on converted messages (SPEC §2.1 rule 4)', () => {
  test.each(['nested', 'envelope'] as const)('%s routes: user gets rows [seen, prompt), assistant the next generation rows', (form) => {
    const row = ingestOk(twoTurns(form, 3));
    const [u1, a1, u2, a2] = row.message_log;
    expect(u1!.routed_experts!.shape).toEqual([2, L, K]);
    expect(rowsOf(u1!)).toEqual(expected(1, 0, 2));
    expect(a1!.routed_experts!.shape).toEqual([2, L, K]);
    expect(rowsOf(u2!)).toEqual(expected(2, 4, 5));
    expect(rowsOf(a2!)).toEqual(expected(2, 5, 8));
    expect(validateRow(row).ok).toBe(true);
  });

  test("the previous assistant message's last route row is overwritten with row len(seen)-1 of the next item", () => {
    for (const form of ['nested', 'envelope'] as const) {
      const a1 = ingestOk(twoTurns(form)).message_log[1]!;
      // Row 0 of the first answer keeps its decode route; its last row (token 4,
      // position 3 overall) now carries the second item's prefill route of position 3.
      expect(rowsOf(a1)).toEqual([expected(1, 2, 3)[0], expected(2, 3, 4)[0]]);
    }
  });

  test('no overwrite when the next item has no routes, or the previous answer had none', () => {
    const withoutNext = gymRecord({
      output: [genItem([1, 2], [3, 4], { routed_experts: nestedRoutes(1, 4) }), genItem([1, 2, 3, 4, 5], [6])],
    });
    const a1 = ingestOk(withoutNext).message_log[1]!;
    expect(rowsOf(a1)).toEqual(expected(1, 2, 4));
    const withoutPrevious = gymRecord({
      output: [genItem([1, 2], [3, 4]), genItem([1, 2, 3, 4, 5], [6], { routed_experts: nestedRoutes(2, 6) })],
    });
    const log = ingestOk(withoutPrevious).message_log;
    expect(log[1]!.routed_experts).toBeUndefined();
    expect(rowsOf(log[2]!)).toEqual(expected(2, 4, 5));
  });

  test('the overwrite does not reach into the input record', () => {
    const record = twoTurns('nested');
    const before = structuredClone(record);
    ingestOk(record);
    expect(record).toEqual(before);
  });

  test.each(['int8', 'int16', 'int32'] as const)('routes are stored in the configured dtype %s', (dtype) => {
    const row = ingestOk(twoTurns('nested'), ingestCfg({ routed_experts_dtype: dtype }));
    for (const m of row.message_log) expect(m.routed_experts!.dtype).toBe(dtype);
    expect(row.message_log[0]!.routed_experts!.data).toBeInstanceOf({ int8: Int8Array, int16: Int16Array, int32: Int32Array }[dtype]);
    expect(validateRow(row).ok).toBe(true);
  });

  test('the default route dtype is int16', () => {
    expect(ingestOk(twoTurns('envelope')).message_log[0]!.routed_experts!.dtype).toBe('int16');
  });

  test('an int32 envelope converts to an int8 target when its values fit', () => {
    const record = gymRecord({ output: [genItem([1], [2], { routed_experts: envelopeRoutes(0, 2, 'int32') })] });
    const row = ingestOk(record, ingestCfg({ routed_experts_dtype: 'int8' }));
    expect(row.message_log[1]!.routed_experts!.data).toEqual(Int8Array.from([4, 5, 6, 7]));
  });

  test('routed_experts: null is absent', () => {
    const row = ingestOk(gymRecord({ output: [genItem([1], [2], { routed_experts: null })] }));
    expect(row.message_log.every((m) => m.routed_experts === undefined)).toBe(true);
  });

  test('fewer route rows than prompt plus generated tokens is invalid_row', () => {
    const out = ingestRejected(gymRecord({ output: [genItem([1, 2], [3, 4], { routed_experts: nestedRoutes(1, 3) })] }));
    expect(out.reason).toBe('invalid_row');
    expect(out.message).toBe('gym_result.response.output[0].routed_experts has 3 rows; the item\'s prompt and generated tokens need at least 4');
    expect(ingestRejected(gymRecord({ output: [genItem([1, 2], [3, 4], { routed_experts: envelopeRoutes(1, 3) })] })).reason).toBe('invalid_row');
  });

  test('a route block of rank other than 3 is invalid_row', () => {
    const out = ingestRejected(gymRecord({ output: [genItem([1], [2], { routed_experts: [[1, 2], [3, 4]] })] }));
    expect([out.reason, out.message]).toEqual(['invalid_row', 'gym_result.response.output[0].routed_experts has rank 2; expected [tokens, layers, topk]']);
  });

  test('a value out of range for the target dtype is invalid_row in either form (Deviation)', () => {
    const big = [[[1, 40000]], [[2, 3]]];
    const nested = ingestRejected(gymRecord({ output: [genItem([1], [2], { routed_experts: big })] }));
    expect([nested.reason, nested.message]).toEqual(['invalid_row', 'gym_result.response.output[0].routed_experts value 40000 at [0, 0, 1] does not fit int16']);
    const env = encodeRoutedExperts({ dtype: 'int32', shape: [2, 1, 2], data: Int32Array.from([1, 40000, 2, 3]) });
    const enveloped = ingestRejected(gymRecord({ output: [genItem([1], [2], { routed_experts: env })] }));
    expect([enveloped.reason, enveloped.message]).toEqual(['invalid_row', nested.message]);
    expect(ingestOk(gymRecord({ output: [genItem([1], [2], { routed_experts: env })] }), ingestCfg({ routed_experts_dtype: 'int32' }))).toBeTruthy();
  });

  test('a malformed envelope is invalid_row naming the item', () => {
    const out = ingestRejected(gymRecord({ output: [genItem([1], [2], { routed_experts: 'nrlre1:int64:2x1x1:AAAAAAAAAAA=' })] }));
    expect([out.reason, out.message]).toEqual(['invalid_row', 'gym_result.response.output[0].routed_experts envelope dtype "int64" is not int8, int16 or int32']);
  });

  test('route blocks whose layers or topk differ between items of a row are invalid_row', () => {
    const other = Array.from({ length: 6 }, () => [[1, 2, 3]]);
    const out = ingestRejected(
      gymRecord({ output: [genItem([1, 2], [3, 4], { routed_experts: nestedRoutes(1, 4) }), genItem([1, 2, 3, 4, 5], [6], { routed_experts: other })] }),
    );
    expect(out.reason).toBe('invalid_row');
    expect(out.message).toMatch(/output\[1\]\.routed_experts is \[6, 1, 3\] but an earlier item's is \[4, 2, 2\]/);
  });

  test('with require_routed_experts a trainable item without routes is invalid_row', () => {
    const cfg = ingestCfg({ require_routed_experts: true });
    const out = ingestRejected(
      gymRecord({ output: [genItem([1, 2], [3, 4], { routed_experts: nestedRoutes(1, 4) }), genItem([1, 2, 3, 4, 5], [6], { routed_experts: null })] }),
      cfg,
    );
    expect([out.reason, out.message]).toEqual(['invalid_row', 'gym_result.response.output[1] has no routed_experts and ingest.require_routed_experts is true']);
    expect(ingestOk(twoTurns('envelope'), cfg).message_log).toHaveLength(4);
    // Items that are not trainable need no routes.
    expect(ingestOk(gymRecord({ output: [functionCallOutputItem(), genItem([1], [2], { routed_experts: nestedRoutes(0, 2) })] }), cfg)).toBeTruthy();
  });
});

import { describe, expect, test } from 'vitest';
import { packGroup } from '../../../processors/pack.js';
import { PackError } from '../../../processors/pack-error.js';
import { backfillMissingRoutedExperts } from '../../../processors/routed-experts-backfill.js';
import { cfg, field, group, msg, nums, thrownBy } from './builders.js';

// layers = 2, topk = 1: one route per layer per token.
const routes = (values: number[]) => ({ layers: 2, topk: 1, values });

describe('routed experts', () => {
  const row0 = [msg('user', [1, 2]), msg('assistant', [3], { lp: [-1], routes: routes([4, 5]) })];
  const row1 = [msg('user', [1]), msg('assistant', [], { lp: [] }), msg('assistant', [6, 7], { lp: [-1, -1], routes: routes([1, 2, 3, 0]) })];

  test('messages with tokens but no routes get the −1 sentinel shaped [tokens, layers, topk]', () => {
    const re = field(packGroup(group([row0, row1]), cfg()), 'routed_experts');
    expect(re.layout).toBe('jagged');
    expect(re.shape).toEqual([2, 1]);
    // row0: user 2 tokens × 2 layers of −1, then [4, 5]; row1: user 1 token of −1, then the routes.
    expect(nums(re.values)).toEqual([-1, -1, -1, -1, 4, 5, -1, -1, 1, 2, 3, 0]);
  });

  test('the backfill count per row counts messages that got the sentinel, not empty messages, and overrides the incoming count', () => {
    const g = group([row0, row1], { counts: [{ num_routed_experts_backfilled: 9 }, {}] });
    const tags = packGroup(g, cfg()).tags;
    expect(tags.map((t) => t.num_routed_experts_backfilled)).toEqual([1, 1]);
  });

  test('with no routes anywhere in the group the field is absent and nothing is counted', () => {
    const packed = packGroup(group([[msg('user', [1]), msg('assistant', [2], { lp: [-1] })]]), cfg());
    expect(packed.fields.map((f) => f.name)).not.toContain('routed_experts');
    expect(packed.tags[0]!.num_routed_experts_backfilled).toBe(0);
    expect(backfillMissingRoutedExperts([[msg('user', [1])]])).toBeNull();
  });

  test("routes keep the producer's dtype by default (auto), or the one the config forces", () => {
    const g = group([row0]);
    const byDtype = (d?: string) => field(packGroup(g, cfg(d === undefined ? {} : { routed_experts_dtype: d })), 'routed_experts');
    // row0's block is int32: auto keeps it.
    expect(byDtype().dtype).toBe('int32');
    expect(byDtype().values).toBeInstanceOf(Int32Array);
    expect(byDtype('int8').values).toBeInstanceOf(Int8Array);
    expect(byDtype('int16').dtype).toBe('int16');
    expect(nums(byDtype('int16').values)).toEqual([-1, -1, -1, -1, 4, 5]);
    expect(nums(byDtype().values)).toEqual([-1, -1, -1, -1, 4, 5]);
  });

  test.each([
    ['int8', 'int8'],
    ['uint8', 'int16'],
    ['int16', 'int16'],
    ['int32', 'int32'],
    ['int64', 'int32'],
  ] as const)('auto: %s blocks pack as %s (room for the -1 of messages without routes)', (src, want) => {
    const data = { int8: Int8Array.of(3, 4), uint8: Uint8Array.of(3, 4), int16: Int16Array.of(3, 4), int32: Int32Array.of(3, 4), int64: BigInt64Array.of(3n, 4n) }[src];
    const m = msg('assistant', [3, 4], { lp: [-1, -1] });
    m.routed_experts = { dtype: src, shape: [2, 1, 1], data };
    const f = field(packGroup(group([[msg('user', [1, 2]), m]]), cfg()), 'routed_experts');
    expect(f.dtype).toBe(want);
    expect(nums(f.values)).toEqual([-1, -1, 3, 4]);
  });

  test('auto takes the widest dtype of a group whose blocks differ', () => {
    const a = msg('assistant', [3], { lp: [-1] });
    a.routed_experts = { dtype: 'int8', shape: [1, 1, 1], data: Int8Array.of(7) };
    const b = msg('assistant', [4], { lp: [-1] });
    b.routed_experts = { dtype: 'int16', shape: [1, 1, 1], data: Int16Array.of(300) };
    const f = field(packGroup(group([[a], [b]]), cfg()), 'routed_experts');
    expect([f.dtype, nums(f.values)]).toEqual(['int16', [7, 300]]);
  });

  test('an id the forced dtype cannot hold is refused, not wrapped', () => {
    const m = msg('assistant', [3], { lp: [-1] });
    m.routed_experts = { dtype: 'int16', shape: [1, 1, 1], data: Int16Array.of(300) };
    const e = thrownBy(() => packGroup(group([[m]]), cfg({ routed_experts_dtype: 'int8' })));
    expect(e).toBeInstanceOf(PackError);
    expect((e as PackError).message).toMatch(/routed expert id 300 does not fit the packed dtype int8/);
    const big = msg('assistant', [3], { lp: [-1] });
    big.routed_experts = { dtype: 'int64', shape: [1, 1, 1], data: BigInt64Array.of(2n ** 40n) };
    expect(thrownBy(() => packGroup(group([[big]]), cfg())).message).toMatch(/does not fit the packed dtype int32/);
  });

  test('the template is the first route block found, and a block of another geometry is refused', () => {
    const other = [msg('assistant', [3], { lp: [-1], routes: { layers: 3, topk: 1, values: [1, 1, 1] } })];
    expect(backfillMissingRoutedExperts([row0, row1])).toEqual({ layers: 2, topk: 1, backfilled: [1, 1], dtype: 'int32' });
    const e = thrownBy(() => packGroup(group([row0, other]), cfg()));
    expect(e).toBeInstanceOf(PackError);
    expect((e as PackError).code).toBe('pack_bad_routed_experts');
    expect((e as PackError).row).toBe(1);
  });

  test('a route block whose token count differs from its message is refused', () => {
    const bad = msg('assistant', [3, 4], { lp: [-1, -1] });
    bad.routed_experts = { dtype: 'int32', shape: [1, 2, 1], data: Int32Array.from([1, 2]) };
    expect(thrownBy(() => packGroup(group([[bad]]), cfg())).message).toMatch(/does not match \[2, 2, 1\]/);
  });
});

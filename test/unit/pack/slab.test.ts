import { describe, expect, test } from 'vitest';
import { packGroup } from '../../../processors/pack.js';
import { type PackTarget, SlabPlan, SlabPool } from '../../../processors/slab.js';
import type { PackedGroup } from '../../../processors/types.js';
import { cfg, f32, group, msg, nums } from './builders.js';

/** A slab source that hands out memory full of 0xA5, as a recycled slab would be. */
const garbage = (bytes: number) => {
  const b = new ArrayBuffer(bytes + 64);
  new Uint8Array(b).fill(0xa5);
  return b;
};

const summary = (p: PackedGroup) => p.fields.map((f) => [f.name, f.dtype, f.shape, f.offsets && nums(f.offsets), nums(f.values)]);

describe('slab allocation', () => {
  test('views are carved in order, 8-byte aligned, from one buffer', () => {
    const plan = new SlabPlan();
    plan.add('bool', 3);
    plan.add('int64', 2);
    plan.add('int16', 5);
    expect(plan.byteLength).toBe(8 + 16 + 10);
    const [a, b, c] = plan.carve((n) => new ArrayBuffer(n));
    expect([a!.byteOffset, b!.byteOffset, c!.byteOffset]).toEqual([0, 8, 24]);
    expect(b).toBeInstanceOf(BigInt64Array);
    expect(a!.buffer).toBe(c!.buffer);
    expect(() => plan.carve(() => new ArrayBuffer(8))).toThrow(/need 34/);
  });

  test('packing into a slab full of garbage writes every element, zeros and padding included', () => {
    const rows = [
      [
        msg('user', [1, 2], { media: { pixel_values: f32([1, 2], [0.5, 1.5]) } }),
        msg('assistant', [3], { lp: [-1], routes: { layers: 2, topk: 2 }, invalid: true }),
      ],
      [msg('user', [1, 2, 4]), msg('tool', [5]), msg('assistant', [6, 7], { lp: [-2, -3], malformed: true })],
    ];
    const g = group(rows, { prompt: [msg('user', [1, 2])], maskSample: [false, true], componentNames: ['x'], components: [{ x: 1 }, null] });
    const c = cfg({ include_message_violation_fields: true, pad_values: { token_ids: 3 } });
    expect(summary(packGroup(g, c, garbage))).toEqual(summary(packGroup(g, c)));
  });

  test('a pool hands a released slab to the next group of similar size', () => {
    const pool = new SlabPool();
    const g = group([[msg('user', [1, 2, 3]), msg('assistant', [4, 5], { lp: [-1, -1] })]]);
    const first = packGroup(g, cfg(), pool.source);
    const slab = first.fields[0]!.values.buffer;
    pool.release(first);
    expect(pool.retainedBytes).toBe(slab.byteLength);
    const second = packGroup(g, cfg(), pool.source);
    expect(second.fields[0]!.values.buffer).toBe(slab);
    expect(pool.retainedBytes).toBe(0);
    expect(nums(second.fields[0]!.values)).toEqual([1, 2, 3, 4, 5]);
  });

  test('a pool does not hand out a slab twice when a group is released twice', () => {
    const pool = new SlabPool();
    const g = group([[msg('user', [1])]]);
    const p = packGroup(g, cfg(), pool.source);
    pool.release(p);
    pool.release(p);
    const a = pool.source(8);
    const b = pool.source(8);
    expect(a).not.toBe(b);
  });

  test('a pool keeps a slab far larger than the request for a larger group, and ignores memory it did not issue', () => {
    const pool = new SlabPool();
    const big = packGroup(group([[msg('user', new Array<number>(50_000).fill(1))]]), cfg(), pool.source);
    pool.release(big);
    const small = pool.source(64);
    expect(small.byteLength).toBeLessThan(big.fields[0]!.values.buffer.byteLength);
    pool.release(packGroup(group([[msg('user', [1])]]), cfg()));
    expect(pool.retainedBytes).toBe(big.fields[0]!.values.buffer.byteLength);
  });

  test('a pool leaves released slabs to the GC beyond its retention limit', () => {
    const pool = new SlabPool(1);
    pool.release(packGroup(group([[msg('user', [1])]]), cfg(), pool.source));
    expect(pool.retainedBytes).toBe(0);
  });

  test('a lent buffer is handed out again only after it is settled with the view it was lent with', () => {
    const pool = new SlabPool();
    const buffer = pool.source(1000);
    const value = new Uint8Array(buffer, 0, 900);
    pool.lend(value);
    expect(pool.lentCount).toBe(1);
    expect(pool.give(buffer)).toBe(false);
    expect(pool.source(1000)).not.toBe(buffer);
    expect(pool.settle(new Uint8Array(buffer, 0, 900))).toBe(false);
    expect(pool.settle(value)).toBe(true);
    expect(pool.settle(value)).toBe(false);
    expect(pool.lentCount).toBe(0);
    expect(pool.source(1000)).toBe(buffer);
  });

  test('a pool makes room for a newly released buffer by dropping its oldest free ones', () => {
    const pool = new SlabPool(2 * 131072 + 1000); // two of its 131072-byte buffers (60 000 bytes rounded up)
    const [a, b, c] = [pool.source(60_000), pool.source(60_000), pool.source(60_000)];
    expect([pool.give(a), pool.give(b)]).toEqual([true, true]);
    expect(pool.give(c)).toBe(true);
    expect(pool.retainedBytes).toBe(b.byteLength + c.byteLength);
    expect(pool.source(60_000)).toBe(b);
  });

  test('the packer writes each field into the view its target gives, and refuses a target that gives too few', () => {
    const g = group([[msg('user', [1, 2]), msg('assistant', [3], { lp: [-1] })]]);
    const names: string[] = [];
    const target: PackTarget = {
      place(layout) {
        names.push(...layout.fields.map((f) => `${f.name}:${f.dtype}:${f.length}`));
        const plan = new SlabPlan();
        for (const f of layout.fields) plan.add(f.dtype, f.length);
        return plan.carve(garbage);
      },
    };
    expect(summary(packGroup(g, cfg(), target))).toEqual(summary(packGroup(g, cfg())));
    expect(names.slice(0, 4)).toEqual(['input_ids:int64:3', 'input_lengths:int32:1', 'generation_logprobs:float32:3', 'token_mask:int64:3']);
    expect(() => packGroup(g, cfg(), { place: () => [] })).toThrow(/gave 0 views/);
  });
});

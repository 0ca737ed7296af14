import { describe, expect, test } from 'vitest';
import { packGroup } from '../../../processors/pack.js';
import { PackError } from '../../../processors/pack-error.js';
import { unpackRows } from '../../../processors/unpack.js';
import { cfg, f32, field, group, msg, nums, thrownBy } from './builders.js';

const seq = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

describe('media fields', () => {
  test('segments are concatenated along dim 0 over rows, with each row\'s shapes in its tags', () => {
    const row0 = [msg('user', [1], { media: { pixel_values: f32([2, 3], seq(6)) } }), msg('assistant', [2], { lp: [-1] })];
    const row1 = [
      msg('user', [1], { media: { pixel_values: f32([1, 3], seq(3, 100)) } }),
      msg('user', [3], { media: { pixel_values: f32([2, 3], seq(6, 200)) } }),
    ];
    const packed = packGroup(group([row0, row1]), cfg());
    const pv = field(packed, 'pixel_values');
    expect(pv.layout).toBe('jagged');
    expect(pv.dtype).toBe('float32');
    expect(pv.shape).toEqual([3]);
    expect(Array.from(pv.offsets!)).toEqual([0n, 2n, 5n]);
    expect(nums(pv.values)).toEqual([...seq(6), ...seq(3, 100), ...seq(6, 200)]);
    expect(packed.tags.map((t) => t.row_shapes)).toEqual([
      { pixel_values: [[2, 3]] },
      { pixel_values: [[1, 3], [2, 3]] },
    ]);
  });

  test('segments with different trailing dims are flattened and the offsets count elements', () => {
    const row0 = [msg('user', [1], { media: { pixel_values: f32([1, 2], [1, 2]) } })];
    const row1 = [msg('user', [1], { media: { pixel_values: f32([2, 3], seq(6, 10)) } })];
    const packed = packGroup(group([row0, row1]), cfg());
    const pv = field(packed, 'pixel_values');
    expect(pv.shape).toEqual([]);
    expect(Array.from(pv.offsets!)).toEqual([0n, 2n, 8n]);
    const back = unpackRows(packed);
    expect(back[1]!.media['pixel_values']!.map((t) => [t.shape, nums(t.data)])).toEqual([[[2, 3], seq(6, 10)]]);
  });

  test('a row without a media field gets an empty shape list and an empty slice', () => {
    const row0 = [msg('user', [1], { media: { image_grid_thw: { dtype: 'int64', shape: [1, 3], data: BigInt64Array.from([1n, 4n, 4n]) } } })];
    const row1 = [msg('user', [1])];
    const packed = packGroup(group([row0, row1]), cfg());
    expect(packed.tags[1]!.row_shapes).toEqual({ image_grid_thw: [] });
    expect(Array.from(field(packed, 'image_grid_thw').offsets!)).toEqual([0n, 1n, 1n]);
    expect(field(packed, 'image_grid_thw').dtype).toBe('int64');
    expect(unpackRows(packed)[1]!.media['image_grid_thw']).toEqual([]);
  });

  test('a group without media has no media fields and empty row shapes', () => {
    const packed = packGroup(group([[msg('user', [1])]]), cfg());
    expect(packed.tags[0]!.row_shapes).toEqual({});
    expect(packed.fields.map((f) => f.name)).not.toContain('pixel_values');
  });

  test('one media name with two dtypes in a group is refused', () => {
    const row0 = [msg('user', [1], { media: { pixel_values: f32([1], [1]) } })];
    const row1 = [msg('user', [1], { media: { pixel_values: { dtype: 'uint8', shape: [1], data: Uint8Array.from([1]) } } })];
    const e = thrownBy(() => packGroup(group([row0, row1]), cfg()));
    expect(e).toBeInstanceOf(PackError);
    expect((e as PackError).code).toBe('pack_bad_media');
  });
});

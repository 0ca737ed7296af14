/**
 * Packing into the framed value (framed-pack-target.ts) gives the bytes the
 * copy encoder gives (`encodeFramed` of `packGroup` into fresh memory) for
 * every synthetic group, both wires, routed experts, media, violation fields
 * and the tfjs backend — pinned by hashes taken from the copy encoder before
 * the packer wrote into the value — and on the trainer wire the packed
 * group's values are the value's own bytes (nothing copied after packing).
 */
import { createHash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { packGroup } from '../../../processors/pack.js';
import { PackError } from '../../../processors/pack-error.js';
import { SlabPool } from '../../../processors/slab.js';
import type { PackedGroup } from '../../../processors/types.js';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import { VALUES_ALIGNMENT } from '../../../streams/codecs/packed-writer.js';
import { HEADER_BYTES } from '../../../streams/codecs/wire-format.js';
import { framedCases } from './framed-pack-cases.js';

/** sha256 (first 32 hex digits) and length of the framed value, from the copy encoder before the change. */
const GOLDEN: Record<string, string> = {
  'text seed 1 (trainer)': '7dccf858f2e1d9c4d1cef187d22f5c14 215697',
  'text seed 1 (narrow)': '884bbfa9cfab5b0e4697859724301c56 100625',
  'text seed 2 (trainer)': 'a60a148cfd19adcaf0fd8e852292fc67 226897',
  'text seed 2 (narrow)': 'fa7b330cd9486a368c87132401b633a2 105873',
  'text seed 3 (trainer)': 'c362503fb74e31f46798030d9943512d 47185',
  'text seed 3 (narrow)': '6c4356096ed77503c072a20382b1531c 22353',
  'text, one row (trainer)': '020205cc1d0c110634c76dfc4495978b 16645',
  'text, one row (narrow)': '95ce5f7eff8b49300bf85664d2b994b6 8133',
  'text without mask_sample (trainer)': 'cdb58cad1de65dd1086da7cad14df5ee 47249',
  'text without mask_sample (narrow)': 'e082cb3861bdeb2d50ffb00a02750ab2 22417',
  'text with violation fields (trainer)': '630222865d15f4e92ccae8bd11573b01 159717',
  'text with violation fields (narrow)': 'aada1f48e1285be6f2c5c59db34b9f1e 80421',
  'text with small ids and a wide pad (trainer)': '3596c03c80b2f6e6ca8e7c49b4236fc6 221265',
  'text with small ids and a wide pad (narrow)': '0ebc1902bceb4c1963dc949300603a73 56017',
  'text with empty rows (trainer)': '6ac3b071f22f5b1ede96c2ae0c9abc24 98368',
  'text with empty rows (narrow)': 'df01fe2724986f9393bbc44f75d65e1a 49792',
  'routed int8 (trainer)': 'd8a6dc8bec82cc8876ab482dba19aa2b 77027',
  'routed int8 (narrow)': '3a72204bca77aec5b7d5cd5aa57dbb48 43683',
  'routed int16 (trainer)': '03c6614ef6607b13a87174a93ed2ac19 90821',
  'routed int16 (narrow)': '8fde4431940df8cc805afbaff5f5c4bb 43683',
  'routed int32 (trainer)': '9e0d7ed04fbf92ea27bca9d6b5403098 118409',
  'routed int32 (narrow)': '566901401347c6e7524d56c6e0dc1e70 43683',
  'routed with violation fields (trainer)': 'd3e7222111b4971f03c71330c2891000 1018243',
  'routed with violation fields (narrow)': 'c9e254c4b7309fad4fcbc76e8c875dfd 509891',
  'media (trainer)': '5fdd597b1cca6a6a0e2670360bb8421a 64569',
  'media (narrow)': 'e1092393c158e4d1fc31d0c93d0e507c 30777',
  'media, routed and violation fields (trainer)': '5b08d2732fc1fb02b9e705af5cbc5c4c 147385',
  'media, routed and violation fields (narrow)': '4dc4176d117a7c6835a3efde1d19f2de 74745',
  'media with the tfjs backend (trainer)': '29a2b4d184b8c82ee406f8c0a4c856a8 229589',
  'media with the tfjs backend (narrow)': '028f4db6a4ca2956b385cf4143ee6c1b 115733',
};

const digest = (v: Uint8Array) => `${createHash('sha256').update(v).digest('hex').slice(0, 32)} ${v.length}`;

/** A pool whose new buffers are full of garbage, as recycled memory would be. */
function dirtyPool() {
  const pool = new SlabPool();
  const dirtied = new WeakSet<ArrayBuffer>();
  return {
    pool,
    source(bytes: number): ArrayBuffer {
      const b = pool.source(bytes);
      if (!dirtied.has(b)) new Uint8Array(b).fill(0xa5);
      dirtied.add(b);
      return b;
    },
    give: (b: ArrayBuffer) => pool.give(b),
  };
}

const schemaId = 77;

describe('packing into the framed value', () => {
  const cases = framedCases();

  test('the cases cover routed experts, media, violation fields, both wires and both backends', () => {
    const names = (c: (typeof cases)[number]) => packGroup(c.group, c.config).fields.map((f) => f.name);
    const all = new Set(cases.flatMap(names));
    for (const name of ['routed_experts', 'pixel_values', 'image_grid_thw', 'audio', 'invalid_tool_call_mask', 'mask_sample']) expect(all, name).toContain(name);
    expect(new Set(cases.map((c) => c.wire))).toEqual(new Set(['trainer', 'narrow']));
    expect(cases.some((c) => c.config.backend === 'tfjs')).toBe(true);
    expect(Object.keys(GOLDEN).sort()).toEqual(cases.map((c) => c.name).sort());
  });

  test.each(cases.map((c) => [c.name, c] as const))('%s: same bytes as the copy encoder', (_name, c) => {
    const codec = new AvroBodyCodec('packed', { packedWire: c.wire });
    const memory = dirtyPool();
    const pool = memory.pool;
    let packed: PackedGroup | undefined;
    const value = codec.packFramed((m) => (packed = packGroup(c.group, c.config, m)), schemaId, memory);
    const copied = codec.encodeFramed(packGroup(c.group, c.config), schemaId);
    expect(digest(value)).toBe(digest(copied));
    expect(digest(value)).toBe(GOLDEN[c.name]);
    expect(codec.decodeBody(value, HEADER_BYTES)).toEqual(packGroup(c.group, c.config));
    if (c.wire === 'trainer') {
      // The packed group's values are the value's bytes, in place and aligned.
      for (const f of packed!.fields) {
        expect(f.values.buffer, f.name).toBe(value.buffer);
        expect(f.values.byteOffset % VALUES_ALIGNMENT, f.name).toBe(0);
      }
      expect(pool.retainedBytes).toBe(0);
    } else {
      // The scratch slab is back in the pool; the value's buffer is another one.
      expect(packed!.fields[0]!.values.buffer).not.toBe(value.buffer);
      expect(pool.retainedBytes).toBe(packed!.fields[0]!.values.buffer.byteLength);
    }
  });

  test('values packed one after another into recycled, dirty buffers are each the copy encoder\'s bytes', () => {
    for (const wire of ['trainer', 'narrow'] as const) {
      const codec = new AvroBodyCodec('packed', { packedWire: wire });
      const memory = dirtyPool();
      let reused = 0;
      const seen = new Set<ArrayBufferLike>();
      // Largest first, so later (smaller) groups land in buffers holding an earlier group's bytes.
      const sorted = cases.filter((c) => c.wire === wire).sort((a, b) => Number(GOLDEN[b.name]!.split(' ')[1]) - Number(GOLDEN[a.name]!.split(' ')[1]));
      for (const c of [...sorted, ...sorted]) {
        const value = codec.packFramed((m) => packGroup(c.group, c.config, m), schemaId, memory);
        expect(digest(value), c.name).toBe(GOLDEN[c.name]);
        if (seen.has(value.buffer)) reused++;
        seen.add(value.buffer);
        memory.give(value.buffer as ArrayBuffer);
      }
      expect(reused, wire).toBeGreaterThan(sorted.length / 2);
    }
  });

  test('a pack that fails after its value was laid out gives the buffer back and throws', () => {
    const c = cases[0]!;
    const codec = new AvroBodyCodec('packed');
    const pool = new SlabPool();
    const fail = () =>
      codec.packFramed(
        (memory) => {
          packGroup(c.group, c.config, memory);
          throw new PackError('pack_bad_media', 'late failure');
        },
        schemaId,
        pool,
      );
    expect(fail).toThrow(PackError);
    expect(pool.retainedBytes).toBeGreaterThan(0);
    expect(() => new AvroBodyCodec('penalized').packFramed(() => packGroup(c.group, c.config), schemaId, pool)).toThrow(/packed values/);
  });
});

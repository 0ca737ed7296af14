import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { decodeRoutedExperts, encodeRoutedExperts, type RouteDType } from '../../../processors/routed-experts-envelope.js';

const DTYPES: RouteDType[] = ['int8', 'int16', 'int32'];
const ARRAYS = { int8: Int8Array, int16: Int16Array, int32: Int32Array };

/** The 2x2x2 block 0..7 (plus `bias`) as nested lists. */
const nested = (bias = 0) => [
  [
    [0 + bias, 1 + bias],
    [2 + bias, 3 + bias],
  ],
  [
    [4 + bias, 5 + bias],
    [6 + bias, 7 + bias],
  ],
];

function ok(raw: unknown, dtype: RouteDType) {
  const out = decodeRoutedExperts(raw, dtype);
  if (!out.ok) throw new Error(out.message);
  return out.tensor;
}

function refusal(raw: unknown, dtype: RouteDType = 'int16'): string {
  const out = decodeRoutedExperts(raw, dtype);
  if (out.ok) throw new Error('expected a refusal');
  return out.message;
}

/** An envelope written by hand, the way the reference codec writes one (little-endian, row-major). */
function envelope(wire: RouteDType, shape: number[], values: number[]): string {
  const data = new ARRAYS[wire](values);
  return `nrlre1:${wire}:${shape.join('x')}:${Buffer.from(data.buffer).toString('base64')}`;
}

describe('routed experts decoding (SPEC §2.1 rule 4)', () => {
  test.each(DTYPES)('nested lists decode to a [S, L, K] tensor of the target dtype %s', (dtype) => {
    const t = ok(nested(), dtype);
    expect(t.dtype).toBe(dtype);
    expect(t.shape).toEqual([2, 2, 2]);
    expect(t.data).toBeInstanceOf(ARRAYS[dtype]);
    expect(Array.from(t.data as Int32Array)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  test.each(DTYPES.flatMap((wire) => DTYPES.map((target) => [wire, target] as const)))(
    'an %s envelope decodes to the target dtype %s',
    (wire, target) => {
      const t = ok(envelope(wire, [2, 2, 2], [0, 1, 2, 3, 4, 5, 6, 127]), target);
      expect(t.dtype).toBe(target);
      expect(t.shape).toEqual([2, 2, 2]);
      expect(t.data).toBeInstanceOf(ARRAYS[target]);
      expect(Array.from(t.data as Int32Array)).toEqual([0, 1, 2, 3, 4, 5, 6, 127]);
    },
  );

  test('envelope bytes are read little-endian in row-major order', () => {
    // 0x0102 little-endian is the bytes 02 01.
    const text = `nrlre1:int16:1x1x2:${Buffer.from([0x02, 0x01, 0xff, 0xff]).toString('base64')}`;
    expect(Array.from(ok(text, 'int32').data as Int32Array)).toEqual([0x0102, -1]);
  });

  test('an empty envelope decodes to a tensor with a zero dim', () => {
    const t = ok('nrlre1:int16:0x3x2:', 'int16');
    expect(t.shape).toEqual([0, 3, 2]);
    expect(t.data.length).toBe(0);
  });

  test('encode then decode gives the tensor back for any shape and dtype', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...DTYPES),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer(),
        (dtype, s, l, k, seed) => {
          const data = new ARRAYS[dtype](s * l * k).map((_, i) => (seed + i * 7919) % 100);
          const t = ok(encodeRoutedExperts({ dtype, shape: [s, l, k], data }), dtype);
          expect(t.shape).toEqual([s, l, k]);
          expect(Array.from(t.data as Int32Array)).toEqual(Array.from(data));
        },
      ),
    );
  });

  describe('values that do not fit the target dtype are refused in either form (Deviation)', () => {
    test('nested lists', () => {
      expect(refusal(nested(125), 'int8')).toMatch(/value 128 at \[0, 1, 1\] does not fit int8/);
      expect(refusal([[[40000]]], 'int16')).toMatch(/value 40000 at \[0, 0, 0\] does not fit int16/);
      expect(refusal([[[2 ** 31]]], 'int32')).toMatch(/does not fit int32/);
      expect(refusal([[[-129]]], 'int8')).toMatch(/does not fit int8/);
    });

    test('an envelope whose wire dtype is wider than the target', () => {
      expect(refusal(envelope('int32', [1, 2, 1], [5, 40000]), 'int16')).toMatch(/value 40000 at \[0, 1, 0\] does not fit int16/);
      expect(refusal(envelope('int16', [1, 1, 1], [-200]), 'int8')).toMatch(/value -200 .* does not fit int8/);
      expect(ok(envelope('int32', [1, 1, 2], [-32768, 32767]), 'int16').data).toEqual(Int16Array.from([-32768, 32767]));
    });
  });

  describe('refused nested lists', () => {
    test('rank other than 3', () => {
      expect(refusal([])).toMatch(/rank 1/);
      expect(refusal([[1, 2]])).toMatch(/rank 2/);
      expect(refusal([[]])).toMatch(/rank 2/);
      expect(refusal([[[[1]]]])).toMatch(/rank 4/);
    });

    test('ragged lists', () => {
      expect(refusal([[[1, 2]], [[3]]])).toMatch(/not rectangular: \[1\]\[0\] is not a list of 2/);
      expect(refusal([[[1]], [[2], [3]]])).toMatch(/not rectangular: row 1/);
      expect(refusal([[[1]], 5])).toMatch(/not rectangular: row 1/);
    });

    test('non-integer expert ids', () => {
      expect(refusal([[[1.5]]])).toMatch(/holds 1.5 at \[0, 0, 0\]/);
      expect(refusal([[['3']]])).toMatch(/holds "3"/);
      expect(refusal([[[true]]])).toMatch(/holds true/);
      expect(refusal([[[null]]])).toMatch(/holds null/);
    });

    test('another JSON type', () => {
      expect(refusal(7)).toMatch(/nested lists .* or an nrlre1 envelope/);
      expect(refusal({ dtype: 'int16' })).toMatch(/nested lists/);
    });
  });

  describe('malformed envelopes', () => {
    const good = envelope('int16', [2, 2, 2], [0, 1, 2, 3, 4, 5, 6, 7]);
    const data = good.slice(good.lastIndexOf(':') + 1);

    test('wrong magic or too few fields', () => {
      expect(refusal(good.replace('nrlre1', 'nrlre2'))).toMatch(/is not an nrlre1:<int8\|int16\|int32>:<S>x<L>x<K>:<base64> envelope/);
      expect(refusal('nrlre1:int16:2x2x2')).toMatch(/not an nrlre1/);
      expect(refusal('')).toMatch(/not an nrlre1/);
      expect(refusal(data)).toMatch(/not an nrlre1/);
    });

    test('an unknown dtype name', () => {
      expect(refusal(good.replace(':int16:', ':int64:'))).toMatch(/envelope dtype "int64" is not int8, int16 or int32/);
      expect(refusal(good.replace(':int16:', ':float32:'))).toMatch(/dtype "float32"/);
    });

    test('a shape that is not three decimal dims', () => {
      expect(refusal(good.replace('2x2x2', '8x1'))).toMatch(/envelope shape "8x1" is not <S>x<L>x<K>/);
      expect(refusal(good.replace('2x2x2', '2x2x2x1'))).toMatch(/is not <S>x<L>x<K>/);
      expect(refusal(good.replace('2x2x2', '2x-2x-2'))).toMatch(/is not <S>x<L>x<K>/);
      expect(refusal(good.replace('2x2x2', '2x2x'))).toMatch(/is not <S>x<L>x<K>/);
    });

    test('an element count that differs from the shape', () => {
      expect(refusal(good.replace('2x2x2', '2x2x3'))).toMatch(/envelope has 8 elements, expected 12 for shape \[2, 2, 3\]/);
      expect(refusal(good.replace('2x2x2', '1x2x2'))).toMatch(/envelope has 8 elements, expected 4/);
      expect(refusal(good.replace(':int16:', ':int32:'))).toMatch(/envelope has 4 elements, expected 8/);
    });

    test('data that is not padded standard base64', () => {
      const one = `nrlre1:int8:1x1x1:`;
      expect(refusal(`${one}AQ`, 'int8')).toMatch(/not padded base64/);
      expect(refusal(`${one}A!==`, 'int8')).toMatch(/not valid base64/);
      expect(refusal(`${one}A\n==`, 'int8')).toMatch(/not valid base64/);
      expect(refusal(`${one}A===`, 'int8')).toMatch(/not valid base64/);
      // Node reads the URL-safe alphabet too; the envelope does not.
      expect(refusal(`nrlre1:int8:1x1x3:-_-_`, 'int8')).toMatch(/not standard base64/);
      expect(ok(`nrlre1:int8:1x1x3:+/+/`, 'int8').data.length).toBe(3);
    });

    test('a mutated envelope is accepted exactly when its data is still valid padded base64 of the right size', () => {
      const canonical = /^[A-Za-z0-9+/]*={0,2}$/;
      const noise = fc.constantFrom(...'AQz09+/=-_ !\n.:');
      fc.assert(
        fc.property(
          fc.uint8Array({ maxLength: 9 }),
          fc.array(fc.tuple(fc.nat(), fc.nat(2), noise), { maxLength: 3 }),
          (bytes, edits) => {
            const chars = Buffer.from(bytes).toString('base64').split('');
            for (const [pos, op, ch] of edits) {
              const at = pos % (chars.length + 1);
              if (op === 0) chars.splice(at, 0, ch);
              else if (op === 1) chars.splice(at, 1);
              else chars[at] = ch;
            }
            const text = chars.join('');
            const valid = canonical.test(text) && text.length % 4 === 0 && Buffer.from(text, 'base64').length === bytes.length;
            const out = decodeRoutedExperts(`nrlre1:int8:${bytes.length}x1x1:${text}`, 'int8');
            expect(out.ok).toBe(valid);
            if (out.ok) expect(Buffer.from((out.tensor.data as Int8Array).buffer)).toEqual(Buffer.from(text, 'base64'));
          },
        ),
        { numRuns: 3000 },
      );
    });
  });
});

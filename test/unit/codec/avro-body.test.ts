import { describe, expect, test } from 'vitest';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import { readSchemaId, UndecodableError, writeHeader } from '../../../streams/codecs/wire-format.js';
import { typedArrayFrom } from '../../../streams/codecs/tensor-bytes.js';
import {
  sampleDeadLetter,
  sampleGroup,
  sampleMetrics,
  samplePacked,
  samplePenalized,
  sampleRow,
} from '../../fixtures/records.js';

describe('Avro body codec', () => {
  test('a row survives a round trip with NaN and ±Infinity logprobs, empty tensors and routes', () => {
    const codec = new AvroBodyCodec('rowCompleted');
    const event = { kind: 'row' as const, row: sampleRow(1) };
    const back = codec.decodeBody(codec.encodeBody(event));
    expect(back).toEqual(event);
    if (back.kind !== 'row') throw new Error('expected a row');
    const lp = back.row.message_log[1]!.generation_logprobs!;
    expect(Number.isNaN(lp[1])).toBe(true);
    expect(lp[2]).toBe(Number.NEGATIVE_INFINITY);
    expect(lp[3]).toBe(Number.POSITIVE_INFINITY);
    expect(back.row.message_log[2]!.token_ids).toEqual(new Int32Array(0));
  });

  test('a BatchEnd survives a round trip', () => {
    const codec = new AvroBodyCodec('rowCompleted');
    const event = { kind: 'batch_end' as const, end: { batch_id: 'b9', num_rows: 64 } };
    expect(codec.decodeBody(codec.encodeBody(event))).toEqual(event);
  });

  test.each([
    ['groupComplete', sampleGroup],
    ['penalized', samplePenalized],
    ['packed', samplePacked],
    ['deadLetter', sampleDeadLetter],
    ['metrics', sampleMetrics],
  ] as const)('a %s record survives a round trip', (kind, make) => {
    const codec = new AvroBodyCodec(kind);
    const value = make();
    expect(codec.decodeBody(codec.encodeBody(value as never))).toEqual(value);
  });

  test('with the trainer wire (the default) packed fields travel in their trainer dtypes', () => {
    const codec = new AvroBodyCodec('packed');
    const body = codec.encodeBody(samplePacked());
    const raw = codec.type.fromBuffer(body) as { fields: Array<{ name: string; wire_dtype: string; dtype: string }> };
    for (const f of raw.fields) expect(f.wire_dtype, f.name).toBe(f.dtype);
    expect(codec.decodeBody(body)).toEqual(samplePacked());
  });

  test('with the narrow wire packed int64 fields travel narrowed and come back as int64', () => {
    const codec = new AvroBodyCodec('packed', { packedWire: 'narrow' });
    const body = codec.encodeBody(samplePacked());
    const raw = codec.type.fromBuffer(body) as { fields: Array<{ name: string; wire_dtype: string; dtype: string }> };
    const wire = Object.fromEntries(raw.fields.map((f) => [f.name, `${f.dtype}/${f.wire_dtype}`]));
    expect(wire).toEqual({
      input_ids: 'int64/int32',
      token_mask: 'int64/uint8',
      big: 'int64/int64',
      generation_logprobs: 'float32/float32',
      routed_experts: 'int16/int8',
      input_lengths: 'int32/uint8',
      truncated: 'bool/uint8',
      empty: 'float32/float32',
    });
    const back = codec.decodeBody(body);
    expect(back.fields[0]!.values).toEqual(BigInt64Array.from([5n, 70000n, -2n]));
    expect(back.fields[2]!.values).toEqual(BigInt64Array.from([1n << 40n, -(1n << 40n)]));
  });

  test.each([
    ['int16', Int16Array.from([0, 127, 255]), 'uint8'],
    ['int16', Int16Array.from([-128, 0, 127]), 'int8'],
    ['int16', Int16Array.from([-1, 200]), 'int16'],
    ['int16', Int16Array.from([-32768, 32767]), 'int16'],
    ['int32', Int32Array.from([0, 255]), 'uint8'],
    ['int32', Int32Array.from([-3, 100]), 'int8'],
    ['int32', Int32Array.from([-32768, 32767, 5]), 'int16'],
    ['int32', Int32Array.from([40000, -1]), 'int32'],
    ['int32', Int32Array.from([-(2 ** 31), 2 ** 31 - 1]), 'int32'],
    ['int16', new Int16Array(0), 'uint8'],
  ] as const)('packed %s values %j travel as %s on the narrow wire and come back equal', (dtype, values, wire) => {
    const codec = new AvroBodyCodec('packed', { packedWire: 'narrow' });
    const group = samplePacked();
    group.fields = [{ name: 'routed_experts', dtype, layout: 'dense', offsets: null, shape: [values.length], values }];
    const body = codec.encodeBody(group);
    const raw = codec.type.fromBuffer(body) as { fields: Array<{ wire_dtype: string; values: Buffer }> };
    expect(raw.fields[0]!.wire_dtype).toBe(wire);
    const back = codec.decodeBody(body).fields[0]!.values;
    expect(back.constructor).toBe(values.constructor);
    expect(back).toEqual(values);
  });

  test('truncated bytes are undecodable', () => {
    const codec = new AvroBodyCodec('groupComplete');
    const body = codec.encodeBody(sampleGroup());
    expect(() => codec.decodeBody(body.subarray(0, body.length - 3))).toThrow(UndecodableError);
  });

  test('trailing bytes are undecodable', () => {
    const codec = new AvroBodyCodec('metrics');
    const body = Buffer.concat([codec.encodeBody(sampleMetrics()), Buffer.from([1, 2])]);
    expect(() => codec.decodeBody(body)).toThrow(/trailing/);
  });

  test('garbage is undecodable, not a crash', () => {
    const codec = new AvroBodyCodec('rowCompleted');
    expect(() => codec.decodeBody(Buffer.from('{"json": "not avro"}'))).toThrow(UndecodableError);
  });
});

describe('Confluent framing', () => {
  test('the header carries magic 0 and a big-endian schema id', () => {
    const buf = Buffer.alloc(5);
    writeHeader(buf, 258);
    expect([...buf]).toEqual([0, 0, 0, 1, 2]);
    expect(readSchemaId(buf)).toBe(258);
  });

  test('a wrong magic byte is refused', () => {
    expect(() => readSchemaId(Buffer.from([1, 0, 0, 0, 1, 0]))).toThrow(/magic byte 1/);
  });

  test('a value shorter than the header is refused', () => {
    expect(() => readSchemaId(Buffer.from([0, 0]))).toThrow(/shorter than the 5-byte/);
  });
});

describe('tensor bytes', () => {
  test('an unaligned view is copied into an aligned array with the same values', () => {
    const bytes = Buffer.alloc(9);
    bytes.writeFloatLE(1.5, 1);
    bytes.writeFloatLE(-2, 5);
    const arr = typedArrayFrom('float32', bytes.subarray(1));
    expect(Array.from(arr as Float32Array)).toEqual([1.5, -2]);
  });

  test('a byte count that is not a whole number of elements is refused', () => {
    expect(() => typedArrayFrom('int32', new Uint8Array(6))).toThrow(RangeError);
  });
});

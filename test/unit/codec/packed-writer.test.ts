import { describe, expect, test } from 'vitest';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import { VALUES_ALIGNMENT } from '../../../streams/codecs/packed-writer.js';
import { HEADER_BYTES, readSchemaId } from '../../../streams/codecs/wire-format.js';
import type { PackedField, PackedGroup } from '../../../processors/types.js';
import { samplePacked } from '../../fixtures/records.js';

/** A field whose bytes start with a marker unique to `index`, so its position can be found in the output. */
function markedField(index: number, bytes: number): PackedField {
  const values = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) values[i] = (i * 31 + index * 7) & 0xff;
  values.set([0xfe, 0xed, index, 0xfa, 0xce, index, 0xb0, 0x0c].slice(0, bytes));
  return { name: `f${index}`.repeat(index + 1), dtype: 'uint8', layout: 'dense', offsets: null, shape: [bytes], values };
}

function groupOf(fields: PackedField[], groupId = 'g-1'): PackedGroup {
  return { ...samplePacked(), group_id: groupId, fields };
}

describe('aligned packed values', () => {
  // Value sizes cross the one-, two- and three-byte varint lengths and the 64-byte boundary.
  const sizes = [8, 63, 64, 65, 200, 8191, 8192, 20_000, 1_100_000];

  test.each(['trainer', 'narrow'] as const)('every values of a framed record starts at a multiple of 64 (%s wire)', (wire) => {
    const codec = new AvroBodyCodec('packed', { packedWire: wire });
    for (const groupId of ['g', 'a-longer-group-id-that-moves-everything']) {
      const fields = sizes.map((n, i) => markedField(i, n));
      const value = codec.encodeFramed(groupOf(fields, groupId), 123);
      expect(readSchemaId(value)).toBe(123);
      for (const [i, f] of fields.entries()) {
        const at = value.indexOf(Buffer.from((f.values as Uint8Array).subarray(0, 8)));
        expect(at, `${f.name} found`).toBeGreaterThan(0);
        expect(at % VALUES_ALIGNMENT, `values of field ${i} (${sizes[i]} bytes, group ${groupId})`).toBe(0);
      }
    }
  });

  test('the body is the Avro that avsc writes for the same record with the chosen pads, and decodes back', () => {
    const codec = new AvroBodyCodec('packed');
    const group = groupOf([...samplePacked().fields, ...sizes.map((n, i) => markedField(i, n))]);
    const value = codec.encodeFramed(group, 9);
    const body = value.subarray(HEADER_BYTES);
    const obj = codec.type.fromBuffer(body) as { fields: Array<{ pad: Buffer }> };
    expect(obj.fields.some((f) => f.pad.length > 0)).toBe(true);
    for (const f of obj.fields) {
      expect(f.pad.length).toBeLessThan(VALUES_ALIGNMENT);
      expect(f.pad.every((b) => b === 0)).toBe(true);
    }
    expect(codec.type.toBuffer(obj).equals(body)).toBe(true);
    expect(codec.decodeBody(body)).toEqual(group);
  });

  test('a group without fields is the plain encoding', () => {
    const codec = new AvroBodyCodec('packed');
    const group = groupOf([]);
    const value = codec.encodeFramed(group, 5);
    expect(value.subarray(HEADER_BYTES).equals(codec.encodeBody(group))).toBe(true);
    expect(codec.decodeBody(value, HEADER_BYTES)).toEqual(group);
  });

  test('records written before `pad` existed still decode (schema resolution)', async () => {
    const avro = (await import('avsc')).default;
    const codec = new AvroBodyCodec('packed', { packedWire: 'narrow' });
    const schema = JSON.parse(JSON.stringify(codec.type.schema())) as {
      fields: Array<{ name: string; type: { items: { fields: Array<{ name: string }> } } }>;
    };
    const packedField = schema.fields.find((f) => f.name === 'fields')!.type.items;
    packedField.fields = packedField.fields.filter((f) => f.name !== 'pad');
    const old = avro.Type.forSchema(schema as never, { wrapUnions: 'auto' });
    const group = samplePacked();
    const oldBody = old.toBuffer(codec.type.fromBuffer(codec.encodeBody(group)));
    expect(codec.decodeBody(oldBody, 0, codec.type.createResolver(old))).toEqual(group);
  });
});

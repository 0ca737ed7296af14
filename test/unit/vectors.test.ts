/**
 * Shared test vectors (TypeScript ↔ Python, SPEC §6). For a fixed set of
 * groups, the packer's records are checked in under test/vectors/ as
 * `<name>.avro` (the full Confluent-framed value, schema id 1) and
 * `<name>.json` (the SPEC §9 JSON form). This suite checks the checked-in
 * files are still exactly what the packer produces; python/tests/test_vectors.py
 * decodes the same bytes and compares them with the JSON. A wire-format change
 * fails both. Regenerate after an intended change with
 * `UPDATE_VECTORS=1 npx vitest run --project unit test/unit/vectors.test.ts`.
 */
import { existsSync, readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { runOffline } from '../../cli/offline.js';
import { configSchema } from '../../config/schema.js';
import { generateEvents, UNWANTED_TOKEN_ID, type LoadgenOptions } from '../../loadgen/index.js';
import { formatJsonLine, parseJsonLine } from '../../json-form/form.js';
import { AvroBodyCodec } from '../../streams/codecs/codec.js';
import { HEADER_BYTES } from '../../streams/codecs/wire-format.js';

const DIR = join(import.meta.dirname, '..', 'vectors');
const UPDATE = process.env.UPDATE_VECTORS === '1';

interface VectorSpec {
  name: string;
  loadgen: LoadgenOptions;
  config: { pack?: { wire_dtypes?: 'trainer' | 'narrow' } & Record<string, unknown> } & Record<string, unknown>;
}

const SPECS: VectorSpec[] = [
  { name: 'small-text', loadgen: { batches: 1, groupsPerBatch: 2, generations: 4, seed: 101, profile: 'small' }, config: {} },
  {
    name: 'routes-media-violations',
    loadgen: {
      batches: 1,
      groupsPerBatch: 2,
      generations: 3,
      seed: 202,
      profile: 'small',
      shape: {
        routes: { layers: 2, topk: 2, numExperts: 8, dtype: 'int8' },
        media: { groupRate: 1, name: 'pixel_values', itemShape: [2, 3], maxItems: 2 },
      },
    },
    config: {
      pack: { include_message_violation_fields: true, pad_values: { token_ids: 7 }, routed_experts_dtype: 'int16', wire_dtypes: 'narrow' },
      postprocess: {
        reward_penalties: { penalize_unwanted_tokens: true, token_ids: { unwanted: [UNWANTED_TOKEN_ID] } },
        length_penalty: { enabled: true },
      },
    },
  },
];

async function packedLines(spec: VectorSpec): Promise<string[]> {
  const input = [...generateEvents({ ...spec.loadgen, runId: spec.name })]
    .filter((e) => e.kind !== 'garbage')
    .map((e) => (e.kind === 'row' ? formatJsonLine({ kind: 'row', record: e.row }) : formatJsonLine({ kind: 'batch_end', end: e.end })));
  const out: string[] = [];
  await runOffline('all', configSchema.parse(spec.config), input, (l) => void out.push(l));
  return out.filter((l) => l.startsWith('{"packed"'));
}

describe('shared packed test vectors', () => {
  test.each(SPECS)('the checked-in $name vectors are what the packer produces', async (spec) => {
    const codec = new AvroBodyCodec('packed', { packedWire: spec.config.pack?.wire_dtypes });
    const lines = await packedLines(spec);
    expect(lines.length).toBeGreaterThan(0);
    for (const [i, line] of lines.entries()) {
      const parsed = parseJsonLine(line);
      if (parsed.kind !== 'packed') throw new Error('expected a packed line');
      const name = `${spec.name}-${i}`;
      const avro = codec.encodeFramed(parsed.packed, 1);
      const json = `${line}\n`;
      if (UPDATE) {
        writeFileSync(join(DIR, `${name}.avro`), avro);
        writeFileSync(join(DIR, `${name}.json`), json);
        copyFileSync(join(import.meta.dirname, '..', '..', 'schemas', 'packed.avsc'), join(DIR, 'packed.avsc'));
      }
      expect(existsSync(join(DIR, `${name}.avro`)), `${name}.avro is checked in (UPDATE_VECTORS=1 writes it)`).toBe(true);
      expect(readFileSync(join(DIR, `${name}.avro`)).equals(avro), `${name}.avro bytes`).toBe(true);
      expect(readFileSync(join(DIR, `${name}.json`), 'utf8')).toBe(json);
      // The bytes decode back to the JSON form's record.
      expect(codec.decodeBody(avro, HEADER_BYTES)).toEqual(parsed.packed);
    }
  });

  test('the vectors cover routes, media, violation masks, rewards columns and both wires', () => {
    const json = readFileSync(join(DIR, 'routes-media-violations-0.json'), 'utf8');
    for (const field of ['routed_experts', 'pixel_values', 'invalid_tool_call_mask', 'malformed_thinking_mask', 'prompt_ids_for_adv', 'mask_sample']) {
      expect(json).toContain(`"${field}"`);
    }
    const codec = new AvroBodyCodec('packed');
    const wires = (name: string) => {
      const value = readFileSync(join(DIR, `${name}.avro`));
      const obj = codec.type.decode(value, HEADER_BYTES).value as { fields: Array<{ name: string; wire_dtype: string }> };
      return Object.fromEntries(obj.fields.map((f) => [f.name, f.wire_dtype]));
    };
    expect(wires('small-text-0')).toMatchObject({ input_ids: 'int64', token_mask: 'int64', mask_sample: 'bool' });
    expect(wires('routes-media-violations-0')).toMatchObject({ input_ids: 'int32', token_mask: 'uint8', routed_experts: 'int8' });
    expect(readFileSync(join(DIR, 'packed.avsc'), 'utf8')).toBe(readFileSync(join(import.meta.dirname, '..', '..', 'schemas', 'packed.avsc'), 'utf8'));
  });
});

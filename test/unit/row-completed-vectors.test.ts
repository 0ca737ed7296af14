/**
 * Shared `rollout.row-completed` vectors (TypeScript ↔ Python, SPEC §2.2).
 * Both publishers must write the same bytes for the same value: replay
 * detection compares record bytes (SPEC §3 rule 3), so a row re-sent from
 * Python after a crash must equal the one TypeScript wrote, and the reverse.
 *
 * test/vectors/row-completed/<name>.avro is a framed value (schema id 1)
 * written here with avsc; <name>.json is its SPEC §9 JSON form (`formatJsonLine`).
 * python/tests/test_row_completed_vectors.py re-encodes each .json with the
 * Python encoder and must get the .avro byte for byte, and decodes each .avro
 * back to the .json. The other direction: `py-<name>.avro`/`.json` are
 * written by python/tests/make_py_vectors.py from torch / numpy / list values;
 * this suite decodes them to exactly their JSON text and re-encodes both the
 * decoded record and the JSON description to exactly their bytes.
 * Regenerate the TypeScript ones after an intended change with
 * `UPDATE_VECTORS=1 npx vitest run --project unit test/unit/row-completed-vectors.test.ts`.
 *
 * GymResult version 2 (binary columns) changed what a GymResult encodes to:
 * `gym-result.avro` (and `py-gym-result.avro` while Python wrote version 1)
 * are version-1 records written with `row-completed-v1.avsc`; they must keep
 * decoding to the same values. `gym-result-v2*` are what the writers give now.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import avro from 'avsc';
import { describe, expect, test } from 'vitest';
import { gymResultDigest } from '../../processors/content-digest.js';
import type { BatchEnd, GymResult, JsonObject, RolloutRow } from '../../processors/types.js';
import { formatJsonLine, parseJsonLine } from '../../json-form/form.js';
import { AvroBodyCodec } from '../../streams/codecs/codec.js';
import type { RowCompletedEvent } from '../../streams/codecs/record-mapping.js';
import { HEADER_BYTES, UndecodableError } from '../../streams/codecs/wire-format.js';

const DIR = join(import.meta.dirname, '..', 'vectors', 'row-completed');
const UPDATE = process.env.UPDATE_VECTORS === '1';
const codec = new AvroBodyCodec('rowCompleted');

// Numbers whose JSON.stringify spelling differs from Python's json.dumps (or is easy to get wrong).
const AWKWARD_NUMBERS = [
  1, 1.5, -0, 0.1 + 0.2, 1e-5, 1e-6, 1e-7, 1.5e-10, 123e-20, 1e16, 1.5e16, 1e20, 1e21, 1.2345e22, 2 ** 53, 2 ** 53 + 2, 2 ** 63,
  5e-324, 1.7976931348623157e308, -1.2e-5, -3.576e-7, 100, 1e2, 0.000001234, 12345678.9, 4.35, 1 / 3, -2 / 3,
];

// No -0 in float tensors: the JSON form writes it as 0 (float32ToJson), so the .json could not describe it.
const TRICKY_TEXT = 'Grüße 🌍 — "quoted" \\ back\\slash\ttab\nline\u0001ctrl\u001f\u007f\u2028\u2029 中文 ';

function multiTurnRow(): RolloutRow {
  const user = (ids: number[], content: string) => ({ role: 'user', token_ids: Int32Array.from(ids), content });
  return {
    batch_id: 'vec-batch-1',
    group_id: 'vec-group/ü-2',
    group_index: 2,
    row_index: 7,
    num_generations: 3,
    prompt_idx: 123456789012,
    task_index: 42,
    agent_ref: { name: 'math-agent', '1': 'integer-like keys come first', version: 2 },
    weight_version: 2 ** 40 + 3,
    instance_label: 'actor-ß-0',
    request: {
      input: [{ role: 'user', content: TRICKY_TEXT }],
      max_output_tokens: 4096,
      temperature: 1.0,
      top_p: 0.95,
    },
    input_message_log: [user([1, 2, -3, 2147483647, -2147483648], 'Grüße')],
    message_log: [
      user([1, 2, -3, 2147483647, -2147483648], 'Grüße'),
      {
        role: 'assistant',
        token_ids: Int32Array.from([10, 11, 12, 13, 14, 15, 16]),
        generation_logprobs: Float32Array.from([-0.1, -1e-7, -0.25, Number.NaN, -Infinity, -3.4028234663852886e38, 1.401298464324817e-45]),
        routed_experts: { dtype: 'int16', shape: [7, 2, 2], data: Int16Array.from({ length: 28 }, (_, i) => (i * 37) % 300 - 150) },
        has_malformed_thinking: false,
        is_invalid_tool_call: true,
        content: '思考 <think> 😀',
      },
      {
        role: 'user',
        token_ids: Int32Array.from([20, 21]),
        routed_experts: { dtype: 'int32', shape: [2, 1, 2], data: Int32Array.from([1, 2, 3, 4]) },
        media: {
          pixel_values: { dtype: 'float32', shape: [1, 2, 3], data: Float32Array.from([0.5, -1.25, Number.NaN, 1e-8, 3.4e38, 2]) },
          '0': { dtype: 'uint8', shape: [2, 2], data: Uint8Array.from([0, 255, 7, 128]) },
          mask: { dtype: 'bool', shape: [3], data: Uint8Array.from([1, 0, 1]) },
          ids: { dtype: 'int64', shape: [2], data: BigInt64Array.from([-(2n ** 40n), 9007199254740991n]) },
        },
      },
      {
        role: 'assistant',
        token_ids: Int32Array.from([30, 31, 32]),
        generation_logprobs: Float32Array.from([-2.5, -0.000123, -17]),
        routed_experts: { dtype: 'int8', shape: [3, 1, 1], data: Int8Array.from([-128, 0, 127]) },
        content: '',
      },
      {
        role: 'assistant',
        token_ids: new Int32Array(0),
        generation_logprobs: new Float32Array(0),
        routed_experts: { dtype: 'int32', shape: [0, 2, 2], data: new Int32Array(0) },
        has_malformed_thinking: true,
      },
    ],
    full_result: {
      reward: 0.1 + 0.2,
      reward_components: { b: 1e21, '10': 5e-324, '2': -0 },
      response: {
        output: [
          { type: 'reasoning', summary: [{ type: 'summary_text', text: 'why… 😀' }] },
          { type: 'message', content: [{ type: 'output_text', text: TRICKY_TEXT }], generation_str: '<think>x</think>' },
        ],
        incomplete_details: null,
      },
      mask_sample: false,
      instance_config: { mask_sample: null },
      awkward_numbers: AWKWARD_NUMBERS,
      nested: { a: { b: { c: [{}, [], [[null, true, false, 'NaN', 'Infinity']]] } } },
      empty: '',
      lone_surrogates: '\ud800 and \udfff alone, \ud83d\ude00 paired',
    },
    timing: { generate: 1.25, '3': 0.5, stalled: Number.NaN, forever: Infinity },
    produced_at: 1700000000123,
  };
}

function minimalRow(): RolloutRow {
  return {
    batch_id: 'b',
    group_id: 'g',
    group_index: 0,
    row_index: 0,
    num_generations: 1,
    prompt_idx: 0,
    agent_ref: { name: '' },
    weight_version: 0,
    request: { input: 'a plain string prompt' },
    input_message_log: [],
    message_log: [],
    full_result: {},
  };
}

function gymResult(): GymResult {
  const request = { input: [{ role: 'user', content: 'Résumé ✓ — 1e-7?' }], max_output_tokens: 512, temperature: 1.0 };
  return {
    batch_id: 'vec-batch-1',
    group_id: 'vec-group-gym',
    group_index: 1,
    row_index: 5,
    num_generations: 4,
    prompt_idx: 9,
    weight_version: 3,
    gym_row: {
      responses_create_params: request,
      agent_ref: { name: 'code-agent' },
      _ng_task_index: 5,
      _rowidx: 5,
      verifier_metadata: { tests: ['assert f(1) == 2', 'ünïcode'], '7': 1, '01': 'not an index key' },
    },
    gym_result: {
      reward: 1,
      response: {
        output: [
          {
            type: 'message',
            content: [{ type: 'output_text', text: 'x = 1e-7 ≈ 0 "ok"\n' }],
            prompt_token_ids: [1, 2, 3],
            generation_token_ids: [4, 5],
            generation_log_probs: [-0.5, -1e-5, -0],
            routed_experts: 'nrlre1:int8:5x1x1:AQIDBAU=',
          },
          { type: 'function_call_output', output: '{"nested": "json in a string"}', call_id: 'c1' },
        ],
        usage: { input_tokens: 3, output_tokens: 2 },
      },
      responses_create_params: request,
      reward_components: { pass: 1.0, style: 1e-21 },
      score: 0.30000000000000004,
      inf_as_text: 'Infinity',
      huge_int: 2 ** 53 + 2,
    },
    timing: { '0': 0.125, total: 12.5 },
    produced_at: 1700000000000,
  };
}

/**
 * The gym-result vector's rollout as version 2 writes it, with its -0
 * logprob as 0: the binary column keeps -0, which the JSON description (and
 * the version-1 JSON text) cannot say.
 */
function gymResultV2(): GymResult {
  const g = gymResult();
  const output = ((g.gym_result.response as JsonObject).output as JsonObject[]).map((item, i) => (i === 0 ? { ...item, generation_log_probs: [-0.5, -1e-5, 0] } : item));
  return { ...g, gym_result: { ...g.gym_result, response: { ...(g.gym_result.response as JsonObject), output } } };
}

/**
 * Version 2's other routes: nested lists and an int16 envelope move into
 * columns; what fails a column rule stays JSON (a token id of 2^31, a
 * "NaN" logprob, an unpadded envelope, a ragged list, null routes).
 */
function gymResultV2Routes(): GymResult {
  const g = gymResult();
  const output = [
    {
      type: 'function_call',
      name: 'run',
      prompt_token_ids: [1, 2, 3],
      generation_token_ids: [4, -2147483648, 2147483647],
      generation_log_probs: [-0.5, -1.25, -2],
      routed_experts: [[[1, 2]], [[3, 4]], [[5, 6]], [[7, 8]], [[9, 10]], [[11, 12]]],
    },
    { type: 'function_call_output', output: 'ok', call_id: 'c1' },
    {
      type: 'message',
      content: [{ type: 'output_text', text: 'done' }],
      prompt_token_ids: [1, 2, 3, 4, -2147483648, 2147483647, 9],
      generation_token_ids: [2147483648],
      generation_log_probs: ['NaN'],
      routed_experts: 'nrlre1:int16:1x1x1:AQA',
    },
    { type: 'message', content: [], generation_token_ids: [], prompt_token_ids: [1], routed_experts: [[[1], [2, 3]]] },
    { type: 'message', content: [], generation_token_ids: [7], generation_log_probs: [-0.5], routed_experts: 'nrlre1:int16:2x1x1:AQD//w==' },
    { type: 'message', content: [], generation_token_ids: [8], routed_experts: null },
  ];
  return { ...g, group_id: 'vec-group-gym-v2', gym_result: { ...g.gym_result, response: { output: output as unknown as JsonObject[] } } };
}

const END: BatchEnd = { batch_id: 'vec-batch-1', num_rows: 12 };

const VECTORS: Array<{ name: string; event: RowCompletedEvent }> = [
  { name: 'row-multi-turn', event: { kind: 'row', row: multiTurnRow() } },
  { name: 'row-minimal', event: { kind: 'row', row: minimalRow() } },
  { name: 'gym-result-v2', event: { kind: 'gym_result', result: gymResultV2() } },
  { name: 'gym-result-v2-routes', event: { kind: 'gym_result', result: gymResultV2Routes() } },
  { name: 'batch-end', event: { kind: 'batch_end', end: END } },
];

/** The reader of version-1 GymResult records: the schema before GymResult had `columns`. */
const V1_RESOLVER = codec.type.createResolver(avro.Type.forSchema(JSON.parse(readFileSync(join(DIR, 'row-completed-v1.avsc'), 'utf8')) as avro.Schema, { wrapUnions: 'auto' }));

/**
 * A vector's value, read as a version-2 record or else as a version-1 one
 * (which reading gives the vector's JSON description: a version-1 body can
 * also parse under the current schema, wrongly).
 */
function decodeVector(avroBytes: Buffer, json: string): { event: RowCompletedEvent; v1: boolean } {
  try {
    const event = codec.decodeBody(avroBytes, HEADER_BYTES);
    if (`${jsonLine(event)}\n` === json) return { event, v1: false };
  } catch (e) {
    if (!(e instanceof UndecodableError)) throw e;
  }
  return { event: codec.decodeBody(avroBytes, HEADER_BYTES, V1_RESOLVER), v1: true };
}

/** The SPEC §9 JSON line of an event. */
function jsonLine(e: RowCompletedEvent): string {
  switch (e.kind) {
    case 'row':
      return formatJsonLine({ kind: 'row', record: e.row });
    case 'gym_result':
      return formatJsonLine({ kind: 'gym_result', record: e.result });
    case 'batch_end':
      return formatJsonLine({ kind: 'batch_end', end: e.end });
  }
}

/** The event a JSON line describes (what `produce` would publish for it). */
function eventFromJson(line: string): RowCompletedEvent {
  const parsed = parseJsonLine(line);
  if (parsed.kind === 'row') return { kind: 'row', row: parsed.record as RolloutRow };
  if (parsed.kind === 'gym_result') return { kind: 'gym_result', result: parsed.record as GymResult };
  if (parsed.kind === 'batch_end') return { kind: 'batch_end', end: parsed.end };
  throw new Error(`not a row-completed line: ${parsed.kind}`);
}

describe('shared row-completed vectors written by TypeScript', () => {
  test.each(VECTORS)('the checked-in $name vector is what avsc writes', ({ name, event }) => {
    const avro = codec.encodeFramed(event, 1);
    const json = `${jsonLine(event)}\n`;
    if (UPDATE) {
      mkdirSync(DIR, { recursive: true });
      writeFileSync(join(DIR, `${name}.avro`), avro);
      writeFileSync(join(DIR, `${name}.json`), json);
    }
    expect(existsSync(join(DIR, `${name}.avro`)), `${name}.avro is checked in (UPDATE_VECTORS=1 writes it)`).toBe(true);
    expect(readFileSync(join(DIR, `${name}.avro`)).equals(avro), `${name}.avro bytes`).toBe(true);
    expect(readFileSync(join(DIR, `${name}.json`), 'utf8')).toBe(json);
    // The JSON description encodes to the same bytes: it is a faithful description of the value.
    expect(codec.encodeFramed(eventFromJson(json), 1).equals(avro)).toBe(true);
  });

  test('the version-1 gym-result vector still decodes to the same values (written before binary columns)', () => {
    const event = codec.decodeBody(readFileSync(join(DIR, 'gym-result.avro')), HEADER_BYTES, V1_RESOLVER);
    expect(`${jsonLine(event)}\n`).toBe(readFileSync(join(DIR, 'gym-result.json'), 'utf8'));
    expect(jsonLine(event)).toBe(jsonLine({ kind: 'gym_result', result: gymResult() }));
    // The same rollout as version 2: other bytes, the same assembled value and content identity.
    const v2 = codec.decodeBody(readFileSync(join(DIR, 'gym-result-v2.avro')), HEADER_BYTES);
    expect(jsonLine(v2)).toBe(jsonLine(event));
    const result = (e: RowCompletedEvent) => (e.kind === 'gym_result' ? e.result : null);
    expect(gymResultDigest(result(v2))).toBe(gymResultDigest(result(event)));
  });

  test('version 2 moves what passes the column rules and keeps the rest in the JSON text', () => {
    const text = readFileSync(join(DIR, 'gym-result-v2-routes.avro')).toString('latin1');
    // Stayed: ids outside int32, a "NaN" string, an unpadded envelope, a ragged list, null routes.
    for (const s of ['[2147483648]', '["NaN"]', '"nrlre1:int16:1x1x1:AQA"', '[[[1],[2,3]]]', '"routed_experts":null']) expect(text, s).toContain(s);
    // Moved: no id list of the first item, no canonical envelope, no regular nested list in the text.
    for (const s of ['[1,2,3]', '[[[1,2]]', 'AQD//w==', '[7]', '[-0.5']) expect(text, s).not.toContain(s);
  });

  test('the row vector covers what differs between the two JSON writers', () => {
    const json = readFileSync(join(DIR, 'row-multi-turn.json'), 'utf8');
    const avro = readFileSync(join(DIR, 'row-multi-turn.avro')).toString('latin1');
    // JS spellings Python's json.dumps would not produce, inside the Avro JSON text.
    for (const s of ['0.30000000000000004', '1e+21', '0.00001', '1e-7', '10000000000000000', '9007199254740994', ',0,', '\\ud800']) {
      expect(avro, s).toContain(s);
    }
    expect(json).toContain('"agent_ref":{"1":"integer-like keys come first","name":"math-agent","version":2}');
    for (const field of ['routed_experts', 'media', 'pixel_values', 'has_malformed_thinking', 'is_invalid_tool_call', '"timing"']) {
      expect(json).toContain(field);
    }
  });
});

function pythonVectorNames(): string[] {
  if (!existsSync(DIR)) return [];
  return readdirSync(DIR)
    .filter((f) => f.startsWith('py-') && f.endsWith('.avro'))
    .map((f) => f.slice(0, -'.avro'.length))
    .sort();
}

describe('shared row-completed vectors written by Python', () => {
  test('the Python vectors are checked in', () => {
    expect(pythonVectorNames(), 'run `.venv/bin/python python/tests/make_py_vectors.py`').toEqual(
      expect.arrayContaining(['py-batch-end', 'py-gym-result', 'py-row-lists', 'py-row-numpy', 'py-row-torch']),
    );
  });

  // test.each with an empty list fails loudly in vitest; the test above names what is missing.
  test.each(pythonVectorNames())('%s decodes to its JSON and both re-encode to its bytes', (name) => {
    const avro = readFileSync(join(DIR, `${name}.avro`));
    const json = readFileSync(join(DIR, `${name}.json`), 'utf8');
    const { event: decoded, v1 } = decodeVector(avro, json);
    expect(avro.readUInt32BE(1)).toBe(1);
    expect(`${jsonLine(decoded)}\n`).toBe(json);
    if (v1) {
      // A version-1 GymResult: today's writers write version 2 of the same value.
      expect(decoded.kind).toBe('gym_result');
      // Reassembled keys follow the item's other keys: the same object, maybe another key order.
      const again = codec.decodeBody(codec.encodeFramed(decoded, 1), HEADER_BYTES);
      expect(JSON.parse(jsonLine(again))).toEqual(JSON.parse(jsonLine(decoded)));
      const result = (e: RowCompletedEvent) => (e.kind === 'gym_result' ? e.result : null);
      expect(gymResultDigest(result(again))).toBe(gymResultDigest(result(decoded)));
      return;
    }
    expect(codec.encodeFramed(decoded, 1).equals(avro), 'decoded record re-encodes to the same bytes').toBe(true);
    expect(codec.encodeFramed(eventFromJson(json), 1).equals(avro), 'the JSON description encodes to the same bytes').toBe(true);
  });
});

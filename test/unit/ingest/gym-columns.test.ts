/**
 * GymResult version 2 (binary columns): the split a writer makes, the
 * reassembly a reader makes, what stays JSON, the content identity of the
 * versions, and every malformed columns entry as `invalid_row` naming its
 * field (never an exception out of decoding).
 */
import avro from 'avsc';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { formatJsonLine, parseJsonLine } from '../../../json-form/form.js';
import { gymResultDigest } from '../../../processors/content-digest.js';
import { accumulateGymResult, createAccumulatorState } from '../../../processors/group-accumulator.js';
import { jsonGymResult, splitGymColumns } from '../../../processors/gym-columns.js';
import { ingestGymResult } from '../../../processors/gym-ingest.js';
import { encodeRoutedExperts } from '../../../processors/routed-experts-envelope.js';
import type { GymResult, JsonObject, JsonValue } from '../../../processors/types.js';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import { GYM_RESULT_BRANCH, gymResultFromAvro, gymResultToAvro } from '../../../streams/codecs/record-mapping.js';
import { HEADER_BYTES } from '../../../streams/codecs/wire-format.js';
import { accumulateConfig } from '../accumulate/fixtures.js';
import { gymRecord, ingestCfg } from './builders.js';

const codec = new AvroBodyCodec('rowCompleted');
const V1_TYPE = avro.Type.forSchema(JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'vectors', 'row-completed', 'row-completed-v1.avsc'), 'utf8')) as avro.Schema, {
  wrapUnions: 'auto',
});
const V1_RESOLVER = codec.type.createResolver(V1_TYPE);

/** Through the Avro body of today's writer (version 2) and back. */
const viaV2 = (g: GymResult): GymResult => {
  const e = codec.decodeBody(codec.encodeBody({ kind: 'gym_result', result: g }));
  if (e.kind !== 'gym_result') throw new Error(e.kind);
  return e.result;
};

/** The record a version-1 writer made of `g` (all of gym_result as JSON text), read by today's reader. */
const viaV1 = (g: GymResult): GymResult => {
  const { columns: _columns, ...v1 } = gymResultToAvro(g);
  v1.gym_result = JSON.stringify(jsonGymResult(g.gym_result));
  const e = codec.decodeBody(V1_TYPE.toBuffer({ event: { [GYM_RESULT_BRANCH]: v1 } }), 0, V1_RESOLVER);
  if (e.kind !== 'gym_result') throw new Error(e.kind);
  return e.result;
};

/** A JSON line of `g` read back as `produce` and `offline` read it. */
const viaJsonLine = (g: GymResult): GymResult => {
  const l = parseJsonLine(formatJsonLine({ kind: 'gym_result', record: g }));
  if (l.kind !== 'gym_result') throw new Error(l.kind);
  return l.record as GymResult;
};

const itemsOf = (g: { gym_result: JsonObject }) => (g.gym_result.response as JsonObject).output as JsonObject[];

/** `g` with its output items' token lists as the typed arrays a version-2 reader gives. */
function assembled(g: GymResult): GymResult {
  const output = itemsOf(g).map((item) => {
    const o: Record<string, unknown> = { ...item };
    for (const k of ['prompt_token_ids', 'generation_token_ids'] as const) if (Array.isArray(o[k])) o[k] = Int32Array.from(o[k] as number[]);
    if (Array.isArray(o.generation_log_probs)) o.generation_log_probs = Float64Array.from(o.generation_log_probs as number[]);
    return o;
  });
  // As decoded: absent optional identity fields are null.
  const absent = { task_index: null, instance_label: null, timing: null, produced_at: null };
  return { ...absent, ...g, gym_result: { ...g.gym_result, response: { ...(g.gym_result.response as JsonObject), output: output as JsonObject[] } } };
}

// ------------------------------------------------------------ generated GymResults

type Routes = 'none' | 'lists' | 'int8' | 'int16' | 'int32';
const RANGE = { int8: 127, int16: 32767, int32: 2147483647 } as const;

// No -0: a version-1 writer's JSON text says 0 (the binary column keeps -0, as NeMo-Gym sent it).
const turnSpec = fc.record({
  prompt: fc.array(fc.integer({ min: -2147483648, max: 2147483647 }), { minLength: 0, maxLength: 5 }),
  gen: fc.array(fc.tuple(fc.integer({ min: 0, max: 200_000 }), fc.double({ min: -40, max: 0, noNaN: true }).map((x) => x + 0)), { minLength: 1, maxLength: 5 }),
  tool: fc.boolean(),
});

const resultSpec = fc.record({
  turns: fc.array(turnSpec, { minLength: 1, maxLength: 4 }),
  routes: fc.constantFrom<Routes>('none', 'lists', 'int8', 'int16', 'int32'),
  layers: fc.integer({ min: 1, max: 3 }),
  topk: fc.integer({ min: 1, max: 2 }),
  seed: fc.integer({ min: 0, max: 1000 }),
});

/** A multi-turn tool-calling result: per turn a reasoning item, the generated item (a function call or a message) and, after a call, its output. */
interface ResultSpec {
  turns: Array<{ prompt: number[]; gen: Array<[number, number]>; tool: boolean }>;
  routes: Routes;
  layers: number;
  topk: number;
  seed: number;
}

function generatedResult(spec: ResultSpec): GymResult {
  const seen: number[] = [];
  const output: JsonValue[] = [];
  spec.turns.forEach((t, k) => {
    const prompt = [...seen, ...(k === 0 && t.prompt.length === 0 ? [1] : t.prompt)];
    const gen = t.gen.map((g) => g[0]);
    const item: JsonObject = t.tool
      ? { type: 'function_call', id: `fc_${k}`, call_id: `c${k}`, name: 'search', arguments: '{"q": "x"}' }
      : { type: 'message', id: `msg_${k}`, role: 'assistant', content: [{ type: 'output_text', text: `turn ${k} ✓` }] };
    item.prompt_token_ids = prompt;
    item.generation_token_ids = gen;
    item.generation_log_probs = t.gen.map((g) => g[1]);
    const rows = prompt.length + gen.length;
    const count = rows * spec.layers * spec.topk;
    if (spec.routes === 'lists') {
      item.routed_experts = Array.from({ length: rows }, (_, s) => Array.from({ length: spec.layers }, (_, l) => Array.from({ length: spec.topk }, (_, m) => (s * 7 + l * 3 + m + spec.seed) % 60)));
    } else if (spec.routes !== 'none') {
      const dtype = spec.routes;
      const values = Array.from({ length: count }, (_, i) => ((i * 2654435761 + spec.seed) % (2 * RANGE[dtype])) - RANGE[dtype]);
      const data = dtype === 'int8' ? Int8Array.from(values) : dtype === 'int16' ? Int16Array.from(values) : Int32Array.from(values);
      item.routed_experts = encodeRoutedExperts({ dtype, shape: [rows, spec.layers, spec.topk], data });
    }
    output.push({ type: 'reasoning', id: `rs_${k}`, summary: [{ type: 'summary_text', text: 'thinking' }] });
    output.push(item);
    if (t.tool) output.push({ type: 'function_call_output', call_id: `c${k}`, output: `result ${k}` });
    seen.push(...prompt.slice(seen.length), ...gen);
  });
  return gymRecord({ output, gymResult: { reward: 0.5, usage: { total: 3 } } }) as unknown as GymResult;
}

// dtype of the routes to ingest: int32 holds every generated value.
const INGEST = ingestCfg({ routed_experts_dtype: 'int32' });

function converted(g: unknown) {
  const out = ingestGymResult(g, INGEST);
  return out.ok ? { ok: true, row: out.row } : { ok: false, reason: out.reason, message: out.message };
}

describe('GymResult version 2: round trip (property)', () => {
  test('v2 → the same assembled object, the same JSON form, the same converted row, the same content digest as v1 and a JSON line', () => {
    fc.assert(
      fc.property(resultSpec, (spec) => {
        const g = generatedResult(spec);
        const v2 = viaV2(g);
        expect(v2).toEqual(assembled(g));
        expect(JSON.parse(formatJsonLine({ kind: 'gym_result', record: v2 }))).toEqual(JSON.parse(formatJsonLine({ kind: 'gym_result', record: g })));
        // Every token list and route moved: nothing of them is left in the JSON text.
        const text = gymResultToAvro(g).gym_result as string;
        for (const k of ['prompt_token_ids', 'generation_token_ids', 'generation_log_probs', 'routed_experts']) expect(text).not.toContain(k);
        const row = converted(g);
        expect(row.ok, JSON.stringify(row)).toBe(true);
        expect(converted(v2)).toEqual(row);
        expect(converted(viaV1(g))).toEqual(row);
        const digest = gymResultDigest(g);
        expect(gymResultDigest(v2)).toBe(digest);
        expect(gymResultDigest(viaV1(g))).toBe(digest);
        expect(gymResultDigest(viaJsonLine(v2))).toBe(digest);
      }),
      { numRuns: 150 },
    );
  });

  test('the writer takes typed arrays as well as lists: the same record bytes', () => {
    fc.assert(
      fc.property(resultSpec, (spec) => {
        const g = generatedResult(spec);
        const typed = assembled(g);
        expect(codec.encodeBody({ kind: 'gym_result', result: typed }).equals(codec.encodeBody({ kind: 'gym_result', result: g }))).toBe(true);
      }),
      { numRuns: 50 },
    );
  });

  test('the split leaves the input alone and keeps the other keys of an edited item in order', () => {
    const g = generatedResult({ turns: [{ prompt: [1, 2], gen: [[3, -0.5]], tool: false }], routes: 'int16', layers: 1, topk: 1, seed: 0 });
    const before = structuredClone(g.gym_result);
    const { json, columns } = splitGymColumns(g.gym_result);
    expect(g.gym_result).toEqual(before);
    expect(Object.keys((json.response as JsonObject).output instanceof Array ? ((json.response as JsonObject).output as JsonObject[])[1]! : {})).toEqual(['type', 'id', 'role', 'content']);
    expect(columns.map((c) => c.item)).toEqual([1]);
    expect(columns[0]!.routed_experts!.form).toBe('envelope');
    expect(columns[0]!.routed_experts!.dtype).toBe('int16');
  });
});

// ------------------------------------------------------------ fallbacks

describe('values that fail a column rule stay JSON and convert as before', () => {
  const base = (over: JsonObject) =>
    gymRecord({ output: [{ type: 'message', content: [], prompt_token_ids: [1, 2], generation_token_ids: [3], generation_log_probs: [-0.5], ...over }] }) as unknown as GymResult;

  test.each([
    ['a token id of 2^31', { generation_token_ids: [2 ** 31] }, 'generation_token_ids'],
    ['a fractional prompt id', { prompt_token_ids: [1, 2.5] }, 'prompt_token_ids'],
    ['a "NaN" logprob', { generation_log_probs: ['NaN'] }, 'generation_log_probs'],
    ['a string logprob', { generation_log_probs: ['x'] }, 'generation_log_probs'],
    ['an unpadded envelope', { routed_experts: 'nrlre1:int8:3x1x1:AQID'.replace('AQID', 'AQI') }, 'routed_experts'],
    ['an envelope with URL-safe base64', { routed_experts: `nrlre1:int8:3x1x1:${Buffer.from([251, 255, 254]).toString('base64url')}` }, 'routed_experts'],
    ['an envelope with a leading-zero dim', { routed_experts: 'nrlre1:int8:03x1x1:AQID' }, 'routed_experts'],
    ['an envelope of the wrong size', { routed_experts: 'nrlre1:int8:4x1x1:AQID' }, 'routed_experts'],
    ['an envelope with an unknown dtype', { routed_experts: 'nrlre1:uint8:3x1x1:AQID' }, 'routed_experts'],
    ['a ragged lists route', { routed_experts: [[[1]], [[2], [3]], [[4]]] }, 'routed_experts'],
    ['a lists route of rank 2', { routed_experts: [[1], [2], [3]] }, 'routed_experts'],
    ['a lists route with a float', { routed_experts: [[[1]], [[2.5]], [[3]]] }, 'routed_experts'],
    ['null routes', { routed_experts: null }, 'routed_experts'],
  ] as Array<[string, JsonObject, string]>)('%s', (_name, over, key) => {
    const g = base(over);
    const text = gymResultToAvro(g).gym_result as string;
    expect(text).toContain(`"${key}":${JSON.stringify(over[key])}`);
    const v2 = viaV2(g);
    expect(itemsOf(v2)[0]![key]).toEqual(over[key]);
    expect(converted(v2)).toEqual(converted(g));
    expect(gymResultDigest(v2)).toBe(gymResultDigest(g));
  });

  test('a non-trainable item keeps its lists in full_result (not typed arrays)', () => {
    const g = gymRecord({
      output: [
        { type: 'message', content: [], prompt_token_ids: [1, 2], generation_token_ids: [], generation_log_probs: [] },
        { type: 'message', content: [], prompt_token_ids: [1, 2], generation_token_ids: [3], generation_log_probs: [-0.5] },
      ],
    }) as unknown as GymResult;
    const v2 = viaV2(g);
    expect(itemsOf(v2)[0]!.prompt_token_ids).toBeInstanceOf(Int32Array);
    const row = converted(v2);
    expect(row).toEqual(converted(g));
    const kept = ((row as { row: { full_result: JsonObject } }).row.full_result.response as JsonObject).output as JsonObject[];
    expect(kept[0]).toEqual({ type: 'message', content: [], prompt_token_ids: [1, 2], generation_token_ids: [], generation_log_probs: [] });
    expect(Array.isArray(kept[0]!.prompt_token_ids)).toBe(true);
  });
});

// ------------------------------------------------------------ content identity

describe('content identity of GymResult versions', () => {
  const g = generatedResult({ turns: [{ prompt: [5, 6], gen: [[7, -0.25], [8, -1.5]], tool: true }, { prompt: [9], gen: [[10, -3]], tool: false }], routes: 'lists', layers: 2, topk: 1, seed: 3 });

  test('v1, v2, a JSON line and a re-spelled line (key order, 1.0, escaped unicode) share one digest', () => {
    const line = formatJsonLine({ kind: 'gym_result', record: g });
    const respelled = JSON.stringify(JSON.parse(line), (_k, v: unknown) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v))
      .replace('"reward":0.5', '"reward":5e-1')
      .replace('✓', '\\u2713')
      .replace('"generation_token_ids":[7,8]', '"generation_token_ids":[7.0,8]');
    expect(respelled).not.toBe(line);
    const parsed = parseJsonLine(respelled);
    const digest = gymResultDigest(g);
    for (const copy of [viaV1(g), viaV2(g), viaJsonLine(g), parsed.kind === 'gym_result' ? parsed.record : null]) expect(gymResultDigest(copy)).toBe(digest);
  });

  test('logprobs are content by value: -0 is 0 (a version-1 text says 0) and every NaN is one NaN', () => {
    const withLogprobs = (lp: unknown) =>
      gymRecord({ output: [{ type: 'message', content: [], prompt_token_ids: [1], generation_token_ids: [2, 3], generation_log_probs: lp as JsonValue }] }) as unknown as GymResult;
    const negZero = withLogprobs([-0, -1]);
    expect(gymResultDigest(viaV2(negZero))).toBe(gymResultDigest(viaV1(negZero)));
    expect(gymResultDigest(withLogprobs(Float64Array.from([-0, -1])))).toBe(gymResultDigest(withLogprobs([0, -1])));
    const otherNaN = new Float64Array(2);
    new DataView(otherNaN.buffer).setBigUint64(0, 0x7ff8000000000001n, true);
    otherNaN[1] = -1;
    expect(Number.isNaN(otherNaN[0])).toBe(true);
    expect(gymResultDigest(withLogprobs(otherNaN))).toBe(gymResultDigest(withLogprobs(Float64Array.from([Number.NaN, -1]))));
    expect(gymResultDigest(withLogprobs([0.5, -1]))).not.toBe(gymResultDigest(withLogprobs([0, -1])));
  });

  test('a changed token id, logprob or route is another digest, and duplicate_row_index in accumulate; a re-send of v1 as v2 is a replay', () => {
    const edit = (f: (item: JsonObject) => void): GymResult => {
      const copy = structuredClone(g);
      f(itemsOf(copy).at(-1)!);
      return copy;
    };
    const changes = [
      edit((i) => ((i.generation_token_ids as number[])[0] = 70)),
      edit((i) => ((i.prompt_token_ids as number[])[4] = 60)),
      edit((i) => ((i.generation_log_probs as number[])[0] = -3.0000000000000004)),
      edit((i) => ((i.routed_experts as number[][][])[0]![1]![0]! += 1)),
    ];
    const cfg = accumulateConfig();
    const ingest = INGEST;
    const send = (state: ReturnType<typeof createAccumulatorState>, r: GymResult, bytes: Uint8Array) =>
      accumulateGymResult(state, { record: r, payload: bytes, digest: gymResultDigest(r) }, cfg, ingest, 0);
    for (const changed of changes) {
      expect(gymResultDigest(viaV2(changed))).not.toBe(gymResultDigest(viaV1(g)));
      const state = createAccumulatorState();
      const open = { ...g, num_generations: 2 };
      expect(send(state, viaV1(open), new Uint8Array([1])).deadLetters).toEqual([]);
      const again = send(state, viaV2({ ...changed, num_generations: 2 }), new Uint8Array([2]));
      expect(again.deadLetters.map((d) => d.reason)).toEqual(['duplicate_row_index']);
    }
    const state = createAccumulatorState();
    const open = { ...g, num_generations: 2 };
    send(state, viaV1(open), new Uint8Array([1]));
    const replay = send(state, viaV2({ ...open, produced_at: 5 }), new Uint8Array([2]));
    expect(replay.deadLetters).toEqual([]);
    expect(replay.replays).toBe(1);
  });
});

// ------------------------------------------------------------ malformed columns

type AvroColumns = Array<Record<string, unknown>>;

/** The Avro object of a two-item result, with its columns edited by `f`. */
function tampered(f: (columns: AvroColumns, avroObject: Record<string, unknown>) => void): Buffer {
  const g = gymRecord({
    output: [
      { type: 'message', content: [], prompt_token_ids: [1, 2], generation_token_ids: [3, 4], generation_log_probs: [-0.5, -1], routed_experts: 'nrlre1:int8:4x1x1:AQIDBA==' },
      'not an object',
    ],
  }) as unknown as GymResult;
  const o = gymResultToAvro(g);
  f(o.columns as AvroColumns, o);
  return codec.type.toBuffer({ event: { [GYM_RESULT_BRANCH]: o } });
}

const I = 'gym_result.response.output';

describe('a malformed columns entry is invalid_row naming the field', () => {
  test.each([
    ['an item past the output', (c: AvroColumns) => (c[0]!.item = 5), `${I}[5].prompt_token_ids`, /output has 2 items/],
    ['a negative item', (c: AvroColumns) => (c[0]!.item = -1), `${I}[-1].prompt_token_ids`, /output has 2 items/],
    ['an item that is not an object', (c: AvroColumns) => (c[0]!.item = 1), `${I}[1].prompt_token_ids`, /is not an object/],
    [
      'a key also in the JSON',
      (_c: AvroColumns, o: Record<string, unknown>) => (o.gym_result = (o.gym_result as string).replace('"content":[]', '"content":[],"generation_token_ids":[3,4]')),
      `${I}[0].generation_token_ids`,
      /both in the JSON text and a binary column/,
    ],
    ['prompt ids of 7 bytes', (c: AvroColumns) => (c[0]!.prompt_token_ids = Buffer.alloc(7)), `${I}[0].prompt_token_ids`, /7 bytes, not a whole number of int32/],
    ['generated ids of 3 bytes', (c: AvroColumns) => (c[0]!.generation_token_ids = Buffer.alloc(3)), `${I}[0].generation_token_ids`, /3 bytes/],
    ['logprobs of 12 bytes', (c: AvroColumns) => (c[0]!.generation_log_probs = Buffer.alloc(12)), `${I}[0].generation_log_probs`, /12 bytes, not a whole number of float64/],
    [
      'route data shorter than its shape',
      (c: AvroColumns) => ((c[0]!.routed_experts as Record<string, unknown>).data = Buffer.alloc(3)),
      `${I}[0].routed_experts`,
      /3 bytes of data; shape \[4, 1, 1\] of int8 needs 4/,
    ],
    ['a route dtype that is not int8/16/32', (c: AvroColumns) => ((c[0]!.routed_experts as Record<string, unknown>).dtype = 'float32'), `${I}[0].routed_experts`, /dtype "float32"/],
    ['a route shape of rank 2', (c: AvroColumns) => ((c[0]!.routed_experts as Record<string, unknown>).shape = [4, 1]), `${I}[0].routed_experts`, /shape \[4, 1\]/],
    ['a negative route dim', (c: AvroColumns) => ((c[0]!.routed_experts as Record<string, unknown>).shape = [-4, -1, 1]), `${I}[0].routed_experts`, /shape \[-4, -1, 1\]/],
    ['two entries for one key', (c: AvroColumns) => c.push({ ...c[0]!, prompt_token_ids: null, generation_log_probs: null, routed_experts: null }), `${I}[0].generation_token_ids`, /two binary column entries/],
  ] as Array<[string, (c: AvroColumns, o: Record<string, unknown>) => void, string, RegExp]>)('%s', (_name, f, field, detail) => {
    const body = tampered(f);
    const e = codec.decodeBody(body); // never throws
    expect(e.kind).toBe('gym_result');
    const out = ingestGymResult((e as { result: GymResult }).result, INGEST);
    expect(out.ok).toBe(false);
    if (out.ok) return;
    expect(out.reason).toBe('invalid_row');
    expect(out.message.startsWith(field), out.message).toBe(true);
    expect(out.message).toMatch(detail);
    // In accumulate: a row-level dead letter with the record's bytes.
    const acc = accumulateGymResult(createAccumulatorState(), { record: (e as { result: GymResult }).result, payload: body }, accumulateConfig(), INGEST, 0);
    expect(acc.deadLetters.map((d) => [d.reason, d.message])).toEqual([['invalid_row', out.message]]);
  });

  test('the untampered record converts (the cases above fail for their edit alone)', () => {
    const e = codec.decodeBody(tampered(() => {}));
    expect(converted((e as { result: GymResult }).result).ok).toBe(true);
  });

  test('a problem leaves the JSON as sent: nothing half put back', () => {
    const e = codec.decodeBody(tampered((c) => c.push({ item: 1, prompt_token_ids: Buffer.alloc(4), generation_token_ids: null, generation_log_probs: null, routed_experts: null })));
    const first = itemsOf((e as { result: GymResult }).result)[0]!;
    expect(Object.keys(first)).toEqual(['type', 'content']);
  });

  test('the columns problem is no content: a JSON line cannot spell it and the JSON form does not print it', () => {
    const e = codec.decodeBody(tampered((c) => (c[0]!.item = 5)));
    const line = formatJsonLine({ kind: 'gym_result', record: (e as { result: GymResult }).result });
    expect(line).not.toMatch(/problem/);
    const spelled = gymRecord({ fields: { columns_problem: 'x' } });
    expect(ingestGymResult(spelled, INGEST).ok).toBe(true);
  });
});

test('framed v1 and v2 values of one rollout decode to the same converted row', () => {
  const g = generatedResult({ turns: [{ prompt: [1], gen: [[2, -1]], tool: false }], routes: 'int8', layers: 1, topk: 2, seed: 1 });
  const v2 = codec.encodeFramed({ kind: 'gym_result', result: g }, 1);
  const e = codec.decodeBody(v2, HEADER_BYTES);
  expect(converted((e as { result: GymResult }).result)).toEqual(converted(viaV1(g)));
  expect(gymResultFromAvro(gymResultToAvro(g))).toEqual(assembled(g));
});

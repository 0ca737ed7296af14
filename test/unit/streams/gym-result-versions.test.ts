/**
 * GymResult version 1 (all JSON text) and version 2 (binary columns) of the
 * same rollouts give the same packed bytes, in the offline runner and through
 * the real stages on the topology driver; a copy re-sent in the other
 * version is a replay, and a malformed columns entry ends as an `invalid_row`
 * dead letter in the stage (not a crash).
 */
import avro from 'avsc';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { runOffline } from '../../../cli/offline.js';
import { configSchema } from '../../../config/schema.js';
import { formatJsonLine, parseJsonLine } from '../../../json-form/form.js';
import { asGymResultEvents, generateEvents } from '../../../loadgen/index.js';
import { jsonGymResult } from '../../../processors/gym-columns.js';
import type { GymResult } from '../../../processors/types.js';
import { AvroBodyCodec, type RecordTypes } from '../../../streams/codecs/codec.js';
import { GYM_RESULT_BRANCH, gymResultToAvro } from '../../../streams/codecs/record-mapping.js';
import { HEADER_BYTES, writeHeader } from '../../../streams/codecs/wire-format.js';
import { avroSchema } from '../../../schemas/index.js';
import { subjectOf } from '../../../streams/topics/names.js';
import { TopologyTestDriver } from '../../../streams/testing/topology-driver.js';

const config = configSchema.parse({ accumulate: { batch_end_grace_ms: 0 } });
const PARTITIONS = 2;
const V1_SCHEMA = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'vectors', 'row-completed', 'row-completed-v1.avsc'), 'utf8')) as object;
const V1_TYPE = avro.Type.forSchema(V1_SCHEMA as avro.Schema, { wrapUnions: 'auto' });

let driver: TopologyTestDriver | null = null;
afterEach(async () => {
  await driver?.close();
  driver = null;
});

/** Loadgen GymResults with routes (int16 envelopes), tool turns and BatchEnds. */
const events = () => [
  ...asGymResultEvents(
    generateEvents({
      batches: 2,
      groupsPerBatch: 4,
      generations: 3,
      seed: 11,
      profile: 'default',
      runId: 'ver',
      shape: { media: null, routes: { layers: 2, topk: 2, numExperts: 8, dtype: 'int16' }, turns: { max: 3, continueProbability: 0.6 } },
    }),
  ),
];

const results = (): Array<RecordTypes['rowCompleted']> =>
  events().flatMap((e): Array<RecordTypes['rowCompleted']> => (e.kind === 'gym_result' ? [{ kind: 'gym_result', result: e.result }] : e.kind === 'batch_end' ? [{ kind: 'batch_end', end: e.end }] : []));

/** The body a version-1 writer made: gym_result all JSON text (lists, NaN as "NaN"), no columns. */
function v1Body(g: GymResult): Buffer {
  const { columns: _columns, ...v1 } = gymResultToAvro(g);
  v1.gym_result = JSON.stringify(jsonGymResult(g.gym_result));
  return V1_TYPE.toBuffer({ event: { [GYM_RESULT_BRANCH]: v1 } });
}

function framed(id: number, body: Buffer): Buffer {
  const out = Buffer.alloc(HEADER_BYTES + body.length);
  writeHeader(out, id);
  body.copy(out, HEADER_BYTES);
  return out;
}

/** Packed bytes (after the header) by group of an offline `all` run over `lines`. */
async function offlinePacked(lines: string[]): Promise<Map<string, Buffer>> {
  const out: string[] = [];
  await runOffline('all', config, lines, (l) => void out.push(l));
  const body = new AvroBodyCodec('packed');
  const packed = new Map<string, Buffer>();
  for (const l of out.map(parseJsonLine)) if (l.kind === 'packed') packed.set(l.packed.group_id, body.encodeFramed(l.packed, 0).subarray(HEADER_BYTES));
  return packed;
}

const rowCodec = new AvroBodyCodec('rowCompleted');
const decodedLines = (decode: (g: GymResult) => RecordTypes['rowCompleted']): string[] =>
  results().map((r) => {
    const d = r.kind === 'gym_result' ? decode(r.result) : r;
    return d.kind === 'gym_result' ? formatJsonLine({ kind: 'gym_result', record: d.result }) : d.kind === 'batch_end' ? formatJsonLine({ kind: 'batch_end', end: d.end }) : '';
  });
const V1_RESOLVER = rowCodec.type.createResolver(V1_TYPE);
const fromV1 = (g: GymResult) => rowCodec.decodeBody(v1Body(g), 0, V1_RESOLVER);
const fromV2 = (g: GymResult) => rowCodec.decodeBody(rowCodec.encodeBody({ kind: 'gym_result', result: g }));

async function wanted(): Promise<Map<string, Buffer>> {
  const want = await offlinePacked(decodedLines(fromV2));
  expect(want.size).toBe(8);
  return want;
}

function expectPacked(d: TopologyTestDriver, want: Map<string, Buffer>): void {
  const got = d.committedRecords('packed');
  expect(got.map((r) => r.key!.toString()).sort()).toEqual([...want.keys()].sort());
  for (const r of got) expect(r.value!.subarray(HEADER_BYTES).equals(want.get(r.key!.toString())!), `packed bytes of ${r.key}`).toBe(true);
}

describe('GymResult v1 and v2 give the same packed bytes', () => {
  test('offline: the JSON lines of v1 and v2 decodings pack the same', async () => {
    const want = await wanted();
    const fromV1Lines = await offlinePacked(decodedLines(fromV1));
    expect([...fromV1Lines.keys()].sort()).toEqual([...want.keys()].sort());
    for (const [k, v] of want) expect(fromV1Lines.get(k)!.equals(v), k).toBe(true);
  });

  test('topology driver: v1 records (an older registered schema) and v2 records pack as offline; a re-send in the other version is a replay', async () => {
    const want = await wanted();
    const rs = results();
    for (const version of ['v1', 'v2'] as const) {
      const d = (driver = await TopologyTestDriver.create({ partitions: PARTITIONS, config }));
      const v1Id = await d.registry.register(subjectOf(d.topics.rowCompleted), V1_SCHEMA);
      await d.startInstance(version);
      const asV1 = (g: GymResult) => ({ key: g.group_id, value: framed(v1Id, v1Body(g)) });
      const gyms = rs.flatMap((r) => (r.kind === 'gym_result' ? [r.result] : []));
      const ends = rs.flatMap((r) => (r.kind === 'batch_end' ? [r] : []));
      if (version === 'v1') d.produceRaw('rowCompleted', gyms.map(asV1));
      else d.produce('rowCompleted', gyms.map((result) => ({ kind: 'gym_result' as const, result })));
      // Each first result again, in the other version: replays, no dead letter.
      const again = gyms.filter((g) => g.row_index === 0);
      if (version === 'v1') d.produce('rowCompleted', again.map((result) => ({ kind: 'gym_result' as const, result: { ...result, produced_at: 1 } })));
      else d.produceRaw('rowCompleted', again.map(asV1));
      d.produce('rowCompleted', ends);
      await d.runUntilIdle();
      expectPacked(d, want);
      expect(d.committedRecords('deadLetter')).toEqual([]);
      await d.close();
      driver = null;
    }
  });

  test('a malformed columns entry is an invalid_row dead letter of the accumulate stage, naming the field; the stage stays healthy', async () => {
    const d = (driver = await TopologyTestDriver.create({ partitions: PARTITIONS, config }));
    const rowId = await d.registry.register(subjectOf(d.topics.rowCompleted), avroSchema('rowCompleted'));
    await d.startInstance('a');
    const g = results().find((r) => r.kind === 'gym_result')!;
    const result = (g as { result: GymResult }).result;
    const o = gymResultToAvro(result);
    (o.columns as Array<Record<string, unknown>>)[0]!.generation_token_ids = Buffer.alloc(6);
    d.produceRaw('rowCompleted', [{ key: result.group_id, value: framed(rowId, rowCodec.type.toBuffer({ event: { [GYM_RESULT_BRANCH]: o } })) }]);
    await d.runUntilIdle();
    const dead = await d.committedValues('deadLetter');
    expect(dead.map((x) => [x.reason, x.stage])).toEqual([['invalid_row', 'accumulate']]);
    expect(dead[0]!.message).toMatch(/^gym_result\.response\.output\[\d+\]\.generation_token_ids has 6 bytes, not a whole number of int32 values/);
    expect(d.health('a').status).toBe(200);
  });
});

/**
 * `loadgen --format gym-result`: every generated row as the NeMo-Gym result
 * it converts back from. The real §2.1 conversion (`ingestGymResult`) must
 * give back the row's generated tokens, logprobs and routes, through the JSON
 * form and through Avro, and the real accumulator must see every injected
 * fault exactly as in the row path.
 */
import { describe, expect, test } from 'vitest';
import { accumulateConfigSchema, ingestConfigSchema } from '../../../config/schema.js';
import {
  asGymResultEvents,
  collectExpectations,
  generateEvents,
  gymResultFromRow,
  parseFaultSpec,
  routedExpertsEnvelope,
  type LoadgenOptions,
} from '../../../loadgen/index.js';
import { accumulateBatchEnd, accumulateGymResult, createAccumulatorState } from '../../../processors/group-accumulator.js';
import { gymResultDigest } from '../../../processors/content-digest.js';
import { normalizedGymColumns } from '../../../processors/gym-columns.js';
import { ingestGymResult } from '../../../processors/gym-ingest.js';
import { resolveIngestConfig } from '../../../processors/ingest-config.js';
import { decodeRoutedExperts } from '../../../processors/routed-experts-envelope.js';
import { validateRow } from '../../../processors/row-validation.js';
import type { GymResult, JsonObject, RolloutRow } from '../../../processors/types.js';
import { formatJsonLine, parseJsonLine } from '../../../json-form/form.js';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import { replayIdentity } from '../../../streams/codecs/wire-format.js';
import { COMPACT, isGenerated, rows } from './row-helpers.js';
import { expectedKey, realKey } from './dead-letter-keys.js';

const INGEST = resolveIngestConfig(ingestConfigSchema.parse({}), { configDir: '/nonexistent' });

function ingest(record: unknown): RolloutRow {
  const out = ingestGymResult(record, INGEST);
  if (!out.ok) throw new Error(`${out.reason}: ${out.message}`);
  return out.row;
}

/** The row's message tokens, roles, generated logprobs and generated routes, as plain values. */
function generatedTurns(row: RolloutRow) {
  return row.message_log.map((m) => ({
    role: m.role,
    tokens: Array.from(m.token_ids),
    logprobs: isGenerated(m) ? Array.from(m.generation_logprobs!) : null,
    routes: isGenerated(m) && m.routed_experts ? { shape: m.routed_experts.shape, values: Array.from(m.routed_experts.data as Int8Array) } : null,
  }));
}

const routerRows = (): RolloutRow[] =>
  rows({
    profile: 'default',
    shape: { ...COMPACT, media: null, routes: { layers: 3, topk: 2, numExperts: 16, dtype: 'int8' }, turns: { max: 4, continueProbability: 0.6 } },
  });

describe('GymResults from generated rows', () => {
  test.each([
    ['small', () => rows({ profile: 'small', shape: { turns: { max: 4, continueProbability: 0.6 } } })],
    ['default (no media)', () => rows({ shape: { media: null, turns: { max: 4, continueProbability: 0.5 } } })],
    ['router-replay-like', routerRows],
  ])('the §2.1 conversion of a %s GymResult gives back the row its generator built', (_name, make) => {
    const all = make();
    expect(all.length).toBeGreaterThan(50);
    expect(all.some((r) => r.message_log.length > 2)).toBe(true);
    for (const row of all) {
      const back = ingest(gymResultFromRow(row));
      const where = `${row.group_id}/${row.row_index}`;
      expect(generatedTurns(back), where).toEqual(generatedTurns(row));
      expect(back.input_message_log.map((m) => Array.from(m.token_ids)), where).toEqual([Array.from(row.message_log[0]!.token_ids)]);
      expect(back.request, where).toEqual(row.request);
      expect(back.agent_ref, where).toEqual(row.agent_ref);
      expect(back.task_index ?? null, where).toBe(row.task_index ?? null);
      expect(back.full_result.reward, where).toBe(row.full_result.reward);
      const { batch_id, group_id, group_index, row_index, num_generations, prompt_idx, weight_version, instance_label, produced_at } = back;
      expect({ batch_id, group_id, group_index, row_index, num_generations, prompt_idx, weight_version, instance_label, produced_at }).toEqual({
        batch_id: row.batch_id,
        group_id: row.group_id,
        group_index: row.group_index,
        row_index: row.row_index,
        num_generations: row.num_generations,
        prompt_idx: row.prompt_idx,
        weight_version: row.weight_version,
        instance_label: row.instance_label,
        produced_at: row.produced_at,
      });
    }
  });

  test('each generated turn rides on one output item whose prompt is every token before it', () => {
    const row = routerRows().find((r) => r.message_log.length >= 6)!;
    const g = gymResultFromRow(row);
    const output = (g.gym_result.response as JsonObject).output as JsonObject[];
    // Token ids and logprobs as typed arrays: they travel as binary columns (GymResult version 2).
    const trainable = output.filter((i) => (i.generation_token_ids as unknown) instanceof Int32Array);
    expect(trainable).toHaveLength(row.message_log.length / 2);
    let before: number[] = [];
    trainable.forEach((item, k) => {
      const user = row.message_log[2 * k]!;
      const gen = row.message_log[2 * k + 1]!;
      before = [...before, ...user.token_ids];
      expect(item.prompt_token_ids).toEqual(Int32Array.from(before));
      expect(item.generation_token_ids).toEqual(Int32Array.from(gen.token_ids));
      expect(item.generation_log_probs).toEqual(Float64Array.from(gen.generation_logprobs!));
      const routes = item.routed_experts as string;
      expect(routes).toMatch(new RegExp(`^nrlre1:int8:${before.length + gen.token_ids.length}x3x2:[A-Za-z0-9+/]+=*$`));
      before = [...before, ...gen.token_ids];
    });
    // The other items (function_call_output, a reasoning item before a message, …) are kept, untrained.
    expect(output.length).toBeGreaterThan(trainable.length);
    expect(output.filter((i) => i.type === 'function_call_output').every((i) => i.generation_token_ids === undefined)).toBe(true);
    // The task row as sent, and NeMo-Gym's echo of the request.
    expect(g.gym_row.responses_create_params).toEqual(row.request);
    expect(g.gym_row.agent_ref).toEqual(row.agent_ref);
    expect(g.gym_result.responses_create_params).toEqual(row.request);
  });

  test('a NaN logprob is written as the string "NaN" and still reaches validation as nan_logprobs', () => {
    const events = [...generateEvents({ batches: 2, groupsPerBatch: 8, generations: 4, seed: 3, profile: 'small', faults: parseFaultSpec('nan=0.2') })];
    const nanRows = events.flatMap((e) => (e.kind === 'row' && e.expect?.fault === 'nan' ? [e.row] : []));
    expect(nanRows.length).toBeGreaterThan(0);
    for (const row of nanRows) {
      const line = formatJsonLine({ kind: 'gym_result', record: gymResultFromRow(row) });
      expect(line).toContain('"NaN"');
      const items = (JSON.parse(line).gym_result.response.output as JsonObject[]).filter((i) => i.generation_log_probs);
      // JSON.stringify(NaN) would have written null.
      expect(items.flatMap((i) => i.generation_log_probs as unknown[]).filter((x) => x === null)).toEqual([]);
      const parsed = parseJsonLine(line);
      expect(parsed.kind).toBe('gym_result');
      const back = ingest(parsed.kind === 'gym_result' ? parsed.record : null);
      const v = validateRow(back);
      expect(v.ok ? 'ok' : v.reason).toBe('nan_logprobs');
      const lp = back.message_log.filter(isGenerated).flatMap((m) => Array.from(m.generation_logprobs!));
      const want = row.message_log.filter(isGenerated).flatMap((m) => Array.from(m.generation_logprobs!));
      expect(lp.map(String)).toEqual(want.map(String));
    }
  });

  test('a GymResult survives the JSON form and the Avro body unchanged, and converts the same', () => {
    const codec = new AvroBodyCodec('rowCompleted');
    for (const row of routerRows().slice(0, 40)) {
      const g = gymResultFromRow(row);
      const viaJson = parseJsonLine(formatJsonLine({ kind: 'gym_result', record: g }));
      // The JSON form leaves absent optional fields out, and prints the typed arrays as lists: the same content.
      const present = Object.fromEntries(Object.entries(g).filter(([, v]) => v !== null));
      const fromJson = viaJson.kind === 'gym_result' ? (viaJson.record as GymResult) : null;
      expect(fromJson && { ...fromJson, gym_result: normalizedGymColumns(fromJson.gym_result) }).toEqual(present);
      expect(gymResultDigest(fromJson)).toBe(gymResultDigest(g));
      const viaAvro = codec.decodeBody(codec.encodeBody({ kind: 'gym_result', result: g }));
      expect(viaAvro).toEqual({ kind: 'gym_result', result: g });
      expect(generatedTurns(ingest((viaAvro as { result: GymResult }).result))).toEqual(generatedTurns(row));
    }
  });

  test('identical rows give byte-identical GymResults, so a duplicate stays a silent replay', () => {
    const [a, b] = [rows(), rows()];
    const codec = new AvroBodyCodec('rowCompleted');
    for (let i = 0; i < 20; i++) {
      expect(codec.encodeBody({ kind: 'gym_result', result: gymResultFromRow(a[i]!) })).toEqual(codec.encodeBody({ kind: 'gym_result', result: gymResultFromRow(b[i]!) }));
    }
  });

  test('the row is not modified', () => {
    const row = routerRows()[0]!;
    const before = structuredClone(row);
    gymResultFromRow(row);
    expect(row).toEqual(before);
  });

  test('the routes envelope is little-endian base64 of the row-major array, as the decoder reads it', () => {
    const data = new Int16Array([1, -2, 300, 4, 5, 6]);
    const env = routedExpertsEnvelope({ dtype: 'int16', shape: [1, 3, 2], data });
    expect(env).toBe(`nrlre1:int16:1x3x2:${Buffer.from([1, 0, 0xfe, 0xff, 0x2c, 1, 4, 0, 5, 0, 6, 0]).toString('base64')}`);
    const back = decodeRoutedExperts(env, 'int32');
    expect(back.ok && Array.from(back.tensor.data as Int32Array)).toEqual([1, -2, 300, 4, 5, 6]);
    expect(() => routedExpertsEnvelope({ dtype: 'int64', shape: [1, 1, 1], data: new BigInt64Array(1) })).toThrow(/int8, int16 or int32/);
  });
});

describe('gym-result events', () => {
  const opts: LoadgenOptions = {
    batches: 6,
    groupsPerBatch: 16,
    generations: 8,
    seed: 21,
    profile: 'small',
    faults: parseFaultSpec('dup=0.04,conflict=0.04,out_of_range=0.04,nan=0.04,missing=0.04,garbage=0.04,mixed_agents=0.12,task_mismatch=0.12'),
  };

  test('keep the order, delays, garbage, batch ends and expected outcomes of the row events', () => {
    const rowEvents = [...generateEvents(opts)];
    const gymEvents = [...asGymResultEvents(generateEvents(opts))];
    expect(gymEvents.map((e) => [e.kind === 'gym_result' ? 'row' : e.kind, e.delayMs])).toEqual(rowEvents.map((e) => [e.kind, e.delayMs]));
    gymEvents.forEach((e, i) => {
      const r = rowEvents[i]!;
      if (e.kind === 'gym_result' && r.kind === 'row') {
        expect([e.result.group_id, e.result.row_index, e.expect]).toEqual([r.row.group_id, r.row.row_index, r.expect]);
      } else {
        expect(e).toEqual(r);
      }
    });
    expect(collectExpectations(gymEvents)).toEqual(collectExpectations(rowEvents));
  });

  test('every fault yields exactly its expected dead letter in the real accumulator, and the other groups are emitted', () => {
    const events = [...asGymResultEvents(generateEvents(opts))];
    const codec = new AvroBodyCodec('rowCompleted');
    const config = accumulateConfigSchema.parse({ batch_end_grace_ms: 0 });
    const state = createAccumulatorState();
    const deadLetters: string[] = [];
    const emitted: string[] = [];
    let replays = 0;
    events.forEach((ev, now) => {
      if (ev.kind === 'garbage') return;
      let result;
      if (ev.kind === 'gym_result') {
        const payload = codec.encodeBody({ kind: 'gym_result', result: ev.result });
        const decoded = codec.decodeBody(payload);
        const record = decoded.kind === 'gym_result' ? decoded.result : null;
        // What the stage hashes: the body without its trailing produced_at (a 5-byte header stands in for the frame).
        const framed = Buffer.concat([Buffer.alloc(5), payload]);
        result = accumulateGymResult(state, { record, payload, identity: replayIdentity(framed, ev.result.produced_at) }, config, INGEST, now);
      } else {
        result = accumulateBatchEnd(state, ev.end, config, now);
      }
      replays += result.replays;
      deadLetters.push(...result.deadLetters.map(realKey));
      emitted.push(...result.groups.map((g) => g.group.group_id));
    });
    const expected = collectExpectations(events);
    const rowLevel = expected.deadLetters.filter((e) => e.reason !== 'undecodable');
    const kinds = new Set(rowLevel.map((e) => e.fault));
    expect([...kinds].sort()).toEqual(['conflict', 'missing', 'mixed_agents', 'nan', 'out_of_range', 'task_mismatch']);
    expect(deadLetters.sort()).toEqual(rowLevel.map(expectedKey).sort());
    expect(replays).toBe(expected.silentlyDropped.length);
    expect(replays).toBeGreaterThan(0);
    expect(emitted.sort()).toEqual([...expected.completeGroups.keys()].sort());
  });
});


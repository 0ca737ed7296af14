import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { packGroup } from '../../../processors/pack.js';
import { cutPromptPrefix, promptTokenCount } from '../../../processors/prompt-prefix.js';
import type { Message } from '../../../processors/types.js';
import { unpackRows } from '../../../processors/unpack.js';
import { cfg, field, group, nums } from './builders.js';

interface MsgSpec {
  role: string;
  ids: number[];
  hasLp: boolean;
  hasRoutes: boolean;
  invalid: boolean;
  malformed: boolean;
}

const msgSpec = fc.record({
  role: fc.constantFrom('user', 'assistant', 'system', 'tool'),
  ids: fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 6 }),
  hasLp: fc.boolean(),
  hasRoutes: fc.boolean(),
  invalid: fc.boolean(),
  malformed: fc.boolean(),
});

const groupSpec = fc.record({
  rows: fc.array(fc.array(msgSpec, { maxLength: 5 }), { minLength: 1, maxLength: 4 }),
  layers: fc.integer({ min: 1, max: 3 }),
  topk: fc.integer({ min: 1, max: 2 }),
  promptMessages: fc.integer({ min: 0, max: 3 }),
});

// Values derived from the ids so that every token's logprob and routes differ
// from its neighbours' and a misplaced copy shows up.
const lpOf = (id: number) => -((id >>> 0) % 1000) / 16;
const routeOf = (id: number, l: number, k: number) => ((id >>> 0) + l * 5 + k) % 120;

function build(s: MsgSpec, layers: number, topk: number): Message {
  const m: Message = { role: s.role, token_ids: Int32Array.from(s.ids), is_invalid_tool_call: s.invalid, has_malformed_thinking: s.malformed };
  if (s.hasLp) m.generation_logprobs = Float32Array.from(s.ids, lpOf);
  if (s.hasRoutes) {
    const data = new Int32Array(s.ids.length * layers * topk);
    s.ids.forEach((id, j) => {
      for (let l = 0; l < layers; l++) for (let k = 0; k < topk; k++) data[(j * layers + l) * topk + k] = routeOf(id, l, k);
    });
    m.routed_experts = { dtype: 'int32', shape: [s.ids.length, layers, topk], data };
  }
  return m;
}

/** What a row's per-token columns must be, computed message by message the naive way. */
function expectedRow(specs: MsgSpec[], layers: number, topk: number, anyRoutes: boolean) {
  const out = { input_ids: [] as number[], lp: [] as number[], mask: [] as number[], invalid: [] as number[], malformed: [] as number[], routes: [] as number[] };
  for (const s of specs) {
    const generated = s.role === 'assistant' && s.hasLp;
    for (const id of s.ids) {
      out.input_ids.push(id);
      out.lp.push(s.hasLp ? lpOf(id) : 0);
      out.mask.push(generated ? 1 : 0);
      out.invalid.push(generated && s.invalid ? 1 : 0);
      out.malformed.push(generated && s.malformed ? 1 : 0);
      if (!anyRoutes) continue;
      for (let l = 0; l < layers; l++) for (let k = 0; k < topk; k++) out.routes.push(s.hasRoutes ? routeOf(id, l, k) : -1);
    }
  }
  return out;
}

describe('pack round trip (property)', () => {
  test('packing then unpacking gives back every row\'s tokens, logprobs, masks and routes', () => {
    fc.assert(
      fc.property(groupSpec, ({ rows, layers, topk, promptMessages }) => {
        const logs = rows.map((r) => r.map((s) => build(s, layers, topk)));
        const anyRoutes = rows.some((r) => r.some((s) => s.hasRoutes));
        const packed = packGroup(group(logs, { prompt: logs[0]!.slice(0, promptMessages) }), cfg({ include_message_violation_fields: true }));
        const back = unpackRows(packed);
        expect(back).toHaveLength(rows.length);
        back.forEach((row, i) => {
          const want = expectedRow(rows[i]!, layers, topk, anyRoutes);
          expect(nums(row.tokens['input_ids']!)).toEqual(want.input_ids);
          expect(nums(row.tokens['generation_logprobs']!)).toEqual(want.lp);
          expect(nums(row.tokens['token_mask']!)).toEqual(want.mask);
          expect(nums(row.tokens['invalid_tool_call_mask']!)).toEqual(want.invalid);
          expect(nums(row.tokens['malformed_thinking_mask']!)).toEqual(want.malformed);
          if (anyRoutes) expect(nums(row.tokens['routed_experts']!)).toEqual(want.routes);
          else expect(row.tokens['routed_experts']).toBeUndefined();
          expect(nums(row.dense['input_lengths']!)).toEqual([want.input_ids.length]);
          expect(row.sample_id).toBe(`g-7_g${i}`);
        });
      }),
    );
  });

  test('offsets start at 0, never decrease, step by input_lengths and end at the total token count', () => {
    fc.assert(
      fc.property(groupSpec, ({ rows, layers, topk }) => {
        const logs = rows.map((r) => r.map((s) => build(s, layers, topk)));
        const packed = packGroup(group(logs), cfg());
        const offsets = nums(field(packed, 'input_ids').offsets!);
        const lengths = nums(field(packed, 'input_lengths').values);
        const total = rows.flat().reduce((acc, s) => acc + s.ids.length, 0);
        expect(offsets).toHaveLength(rows.length + 1);
        expect(offsets[0]).toBe(0);
        offsets.slice(1).forEach((o, i) => expect(o - offsets[i]!).toBe(lengths[i]));
        expect(offsets[rows.length]).toBe(total);
        expect(field(packed, 'input_ids').values.length).toBe(total);
      }),
    );
  });

  test('each prompt_ids_for_adv row is that row\'s cut prefix followed by padding', () => {
    fc.assert(
      fc.property(groupSpec, fc.integer({ min: -5, max: 5 }), ({ rows, layers, topk, promptMessages }, pad) => {
        const logs = rows.map((r) => r.map((s) => build(s, layers, topk)));
        const prompt = logs[0]!.slice(0, promptMessages);
        const ids = field(packGroup(group(logs, { prompt }), cfg({ pad_values: { token_ids: pad } })), 'prompt_ids_for_adv');
        const p = promptTokenCount(prompt);
        const prefixes = logs.map((log) => log.slice(0, cutPromptPrefix(log, p).messages).flatMap((m) => Array.from(m.token_ids)));
        const width = Math.max(...prefixes.map((x) => x.length));
        expect(ids.shape).toEqual([rows.length, width]);
        expect(nums(ids.values)).toEqual(prefixes.flatMap((x) => [...x, ...new Array<number>(width - x.length).fill(pad)]));
      }),
    );
  });

  test('packing into recycled memory full of garbage gives the same fields as packing into fresh memory', () => {
    const garbage = (bytes: number) => {
      const b = new ArrayBuffer(bytes);
      new Uint8Array(b).fill(0xa5);
      return b;
    };
    fc.assert(
      fc.property(groupSpec, ({ rows, layers, topk, promptMessages }) => {
        const logs = rows.map((r) => r.map((s) => build(s, layers, topk)));
        const g = group(logs, { prompt: logs[0]!.slice(0, promptMessages) });
        const c = cfg({ include_message_violation_fields: true, pad_values: { token_ids: 7 } });
        const flat = (p: ReturnType<typeof packGroup>) => p.fields.map((f) => [f.name, nums(f.values)]);
        expect(flat(packGroup(g, c, garbage))).toEqual(flat(packGroup(g, c)));
      }),
    );
  });
});

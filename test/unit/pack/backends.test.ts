import * as tf from '@tensorflow/tfjs-core';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import type { PackConfig } from '../../../config/schema.js';
import { recordToTrainBatchWith } from '../../../processors/backend-train-batch.js';
import { packGroup } from '../../../processors/pack.js';
import { type PackBackend, typedPackBackend } from '../../../processors/pack-backend.js';
import type { SlabSource } from '../../../processors/slab.js';
import { activeTfjsBackend, selectTfjsBackend, tfjsPackBackend } from '../../../processors/tfjs-pack.js';
import { recordToTrainBatch } from '../../../processors/train-batch.js';
import type { DType, Message, PackedGroup, PenalizedGroup, Tensor, TypedArray } from '../../../processors/types.js';
import { cfg, f32, group, msg } from './builders.js';

/** A recycled-looking slab: every byte 0xAA, so an element a backend forgets to write shows up. */
const dirtySlab: SlabSource = (bytes) => {
  const b = new ArrayBuffer(bytes);
  new Uint8Array(b).fill(0xaa);
  return b;
};

const bytesOf = (a: TypedArray) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/** Packs `g` with both backends and asserts the same fields, dtypes, shapes, offsets, tags and value bytes. */
function expectSameWithBothBackends(g: PenalizedGroup, c: PackConfig): PackedGroup {
  const typed = packGroup(g, { ...c, backend: 'typed' }, dirtySlab);
  const viaTfjs = packGroup(g, { ...c, backend: 'tfjs' }, dirtySlab);
  expect(viaTfjs).toEqual(typed);
  expect(viaTfjs.fields.map((f) => [f.name, f.dtype, f.layout, f.shape, f.values.constructor.name])).toEqual(
    typed.fields.map((f) => [f.name, f.dtype, f.layout, f.shape, f.values.constructor.name]),
  );
  viaTfjs.fields.forEach((f, i) => {
    const t = typed.fields[i]!;
    expect(bytesOf(f.values), f.name).toEqual(bytesOf(t.values));
    expect(f.offsets === null ? null : Array.from(f.offsets), f.name).toEqual(t.offsets === null ? null : Array.from(t.offsets));
  });
  return typed;
}

function tensor(dtype: DType, shape: number[], data: TypedArray): Tensor {
  return { dtype, shape, data };
}

const textRows = (): Message[][] => [
  [msg('system', [1, 2]), msg('user', [3, 4, 5]), msg('assistant', [6, 7], { lp: [-0.5, -1.25] }), msg('tool', [8])],
  [msg('system', [1, 2]), msg('user', [3, 4, 5]), msg('assistant', [9, -2147483648, 2147483647], { lp: [-0, -3, -7.5] })],
];

describe('pack backends', () => {
  test('tfjs packs a text-only group exactly as typed, rewards, masks and row fields included', () => {
    const rows = textRows();
    const g = group(rows, {
      prompt: rows[0]!.slice(0, 2),
      rewards: [1.5, -2],
      truncated: [false, true],
      maskSample: [true, false],
      components: [{ a: 1 }, null],
      componentNames: ['a', 'b'],
    });
    expectSameWithBothBackends(g, cfg());
    expectSameWithBothBackends(g, cfg({ pad_values: { token_ids: -7 } }));
  });

  test('tfjs packs routed experts exactly as typed: backfill, int16/int32/int64/uint8 blocks, every output dtype', () => {
    const rows: Message[][] = [
      [msg('user', [1, 2]), msg('assistant', [3, 4], { lp: [-1, -2], routes: { layers: 2, topk: 2, values: [0, 1, 127, -128, 5, 6, 100, -1] } })],
      [msg('user', [1, 2]), msg('assistant', [5], { lp: [-1], routes: { layers: 2, topk: 2, dtype: 'int16', values: [9, -9, 127, -128] } })],
      [
        msg('user', [1, 2]),
        { role: 'assistant', token_ids: Int32Array.of(6), generation_logprobs: Float32Array.of(-2), routed_experts: tensor('int64', [1, 2, 2], BigInt64Array.of(70n, -1n, 127n, -128n)) },
        { role: 'assistant', token_ids: Int32Array.of(7), generation_logprobs: Float32Array.of(-2), routed_experts: tensor('uint8', [1, 2, 2], Uint8Array.of(0, 12, 20, 127)) },
        msg('tool', [8, 9]),
      ],
    ];
    for (const dtype of ['auto', 'int8', 'int16', 'int32'] as const) {
      const packed = expectSameWithBothBackends(group(rows), cfg({ routed_experts_dtype: dtype }));
      expect(packed.fields.some((f) => f.name === 'routed_experts')).toBe(true);
    }
  });

  test('tfjs packs media fields of every dtype exactly as typed, uniform and dynamic shapes', () => {
    const nanBits = new Float32Array(new Uint32Array([0x7fc00123]).buffer)[0]!;
    const rows: Message[][] = [
      [
        msg('user', [1], {
          media: {
            pixel_values: f32([2, 2], [1, nanBits, -0, 4]),
            ids64: tensor('int64', [2], BigInt64Array.of(-(2n ** 62n), 2n ** 50n + 1n)),
            wide: tensor('float64', [1, 2], Float64Array.of(Math.PI, -1e300)),
          },
        }),
        msg('assistant', [2], { lp: [-1] }),
      ],
      [
        msg('user', [1], {
          media: {
            pixel_values: f32([1, 3], [5, 6, 7]),
            small: tensor('int16', [3], Int16Array.of(-32768, 0, 32767)),
            bytes: tensor('uint8', [2], Uint8Array.of(0, 255)),
            signed: tensor('int8', [2], Int8Array.of(-128, 127)),
            flags: tensor('bool', [2], Uint8Array.of(1, 0)),
            ints: tensor('int32', [2], Int32Array.of(-5, 2147483647)),
          },
        }),
      ],
    ];
    const packed = expectSameWithBothBackends(group(rows), cfg());
    expect(packed.fields.filter((f) => f.layout === 'jagged').length).toBeGreaterThan(4);
  });

  test('tfjs packs the message-violation masks exactly as typed', () => {
    const rows: Message[][] = [
      [msg('user', [1]), msg('assistant', [2, 3], { lp: [-1, -1], invalid: true }), msg('assistant', [4], { lp: [-1], malformed: true })],
      [msg('user', [1]), msg('assistant', [5, 6], { invalid: true, malformed: true }), msg('assistant', [7], { lp: [-2], invalid: true, malformed: true })],
    ];
    expectSameWithBothBackends(group(rows, { counts: [{ num_invalid_tool_calls: 1 }, { num_malformed_thinking: 2 }] }), cfg({ include_message_violation_fields: true }));
  });

  test('tfjs packs empty rows, empty messages and an empty prompt exactly as typed', () => {
    const rows: Message[][] = [[], [msg('user', [])], [msg('user', [1, 2]), msg('assistant', [], { lp: [] })], []];
    expectSameWithBothBackends(group(rows, { prompt: [] }), cfg({ include_message_violation_fields: true }));
    expectSameWithBothBackends(group([[], []], { prompt: [] }), cfg({ include_message_violation_fields: true }));
    expectSameWithBothBackends(group(rows, { prompt: [msg('user', [1, 2, 3])] }), cfg());
  });

  test('a pad value outside int32 reaches prompt_ids_for_adv through tfjs unchanged', () => {
    const rows: Message[][] = [[msg('user', [1, 2, 3])], [msg('user', [1])], []];
    for (const pad of [2 ** 40, -(2 ** 40), 2 ** 31, -(2 ** 31) - 1]) {
      expectSameWithBothBackends(group(rows, { prompt: [msg('user', [1, 2, 3])] }), cfg({ pad_values: { token_ids: pad } }));
    }
  });

  test('the generic builder with the typed backend gives recordToTrainBatch\'s batch', () => {
    const rows = textRows();
    rows[1]!.push(msg('assistant', [11], { lp: [-1], routes: { layers: 1, topk: 2 }, media: { pv: f32([1, 1], [3]) } }));
    const c = cfg({ include_message_violation_fields: true });
    expect(recordToTrainBatchWith(group(rows), c, typedPackBackend, dirtySlab)).toEqual(recordToTrainBatch(group(rows), c, dirtySlab));
  });

  test('the backends agree op by op on wrapping, wide fills and bit copies', () => {
    const run = (b: PackBackend) => {
      const i64 = new BigInt64Array(7);
      b.int64(i64, [Int32Array.of(-1, 2), { value: 2 ** 45, length: 2 }, { value: -3, length: 1 }, new Int32Array(0), Int32Array.of(2147483647, -2147483648)]);
      const i8 = new Int8Array(6);
      b.integers(i8, [BigInt64Array.of(2n ** 40n + 300n, -129n), Uint8Array.of(200, 127), { value: -1, length: 2 }]);
      const bools = new Uint8Array(4);
      b.bools(bools, [{ value: 2, length: 2 }, { value: 0, length: 1 }, { value: 1, length: 1 }]);
      const f = new Float32Array(4);
      b.float32(f, [Float32Array.of(-0, NaN), { value: 0, length: 2 }]);
      const f64 = new Float64Array(3);
      b.concat(f64, [Float64Array.of(-0, NaN), new Float64Array(0), Float64Array.of(1e-310)]);
      return [i64, i8, bools, f, f64].map((a) => Array.from(bytesOf(a)));
    };
    expect(run(tfjsPackBackend)).toEqual(run(typedPackBackend));
  });

  test('tests run tfjs on its CPU backend, and selectTfjsBackend falls back to it without tfjs-node-gpu', async () => {
    packGroup(group(textRows()), cfg({ backend: 'tfjs' }));
    expect(activeTfjsBackend()).toBe('cpu');
    expect(tf.getBackend()).toBe('cpu');
    expect(await selectTfjsBackend()).toBe('cpu');
    expect(tf.getBackend()).toBe('cpu');
  });
});

// ---- property: random groups ----

const routeDTypes = ['int16', 'int32', 'int64', 'uint8'] as const;

const msgSpec = fc.record({
  role: fc.constantFrom('user', 'assistant', 'system', 'tool'),
  ids: fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 6 }),
  lp: fc.option(fc.float({ noDefaultInfinity: false }), { nil: undefined }),
  routes: fc.option(fc.constantFrom(...routeDTypes), { nil: undefined }),
  media: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
  invalid: fc.boolean(),
  malformed: fc.boolean(),
});

const groupSpec = fc.record({
  rows: fc.array(fc.array(msgSpec, { maxLength: 4 }), { minLength: 1, maxLength: 4 }),
  layers: fc.integer({ min: 1, max: 3 }),
  topk: fc.integer({ min: 1, max: 2 }),
  promptMessages: fc.integer({ min: 0, max: 3 }),
  pad: fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom(2 ** 40, -(2 ** 35))),
  violation: fc.boolean(),
  routesDType: fc.constantFrom('auto', 'int8', 'int16', 'int32') as fc.Arbitrary<'auto' | 'int8' | 'int16' | 'int32'>,
});

type MsgSpec = typeof msgSpec extends fc.Arbitrary<infer T> ? T : never;

function build(s: MsgSpec, layers: number, topk: number): Message {
  const m: Message = { role: s.role, token_ids: Int32Array.from(s.ids), is_invalid_tool_call: s.invalid, has_malformed_thinking: s.malformed };
  if (s.lp !== undefined) m.generation_logprobs = Float32Array.from(s.ids, (id) => (s.lp as number) + (id % 5));
  if (s.routes !== undefined) {
    const size = s.ids.length * layers * topk;
    // Expert ids as routers emit them (0..127, so every packed dtype holds them; out-of-range ids are refused, routed-experts.test.ts).
    const vals = Array.from({ length: size }, (_, i) => (((s.ids[Math.floor(i / (layers * topk))]! + i * 977) % 128) + 128) % 128);
    const data: TypedArray =
      s.routes === 'int64' ? BigInt64Array.from(vals, (v) => BigInt(v)) : s.routes === 'int16' ? Int16Array.from(vals) : s.routes === 'uint8' ? Uint8Array.from(vals) : Int32Array.from(vals);
    m.routed_experts = { dtype: s.routes, shape: [s.ids.length, layers, topk], data };
  }
  if (s.media !== undefined) m.media = { pv: f32([s.media, 2], Array.from({ length: s.media * 2 }, (_, i) => s.ids.length * 10 + i)) };
  return m;
}

describe('pack backends (property)', () => {
  test('for random groups the tfjs backend packs exactly what the typed backend packs', () => {
    fc.assert(
      fc.property(groupSpec, ({ rows, layers, topk, promptMessages, pad, violation, routesDType }) => {
        const logs = rows.map((r) => r.map((s) => build(s, layers, topk)));
        const g = group(logs, { prompt: logs[0]!.slice(0, promptMessages) });
        expectSameWithBothBackends(g, cfg({ include_message_violation_fields: violation, routed_experts_dtype: routesDType, pad_values: { token_ids: pad } }));
      }),
      { numRuns: 80 },
    );
  });
});

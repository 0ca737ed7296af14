import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { postprocessConfigSchema } from '../../../config/schema.js';
import { accumulateRow, createAccumulatorState } from '../../../processors/group-accumulator.js';
import { ingestGymResult } from '../../../processors/gym-ingest.js';
import { packGroup } from '../../../processors/pack.js';
import { postprocessGroup, resolvePostprocessConfig } from '../../../processors/postprocess.js';
import { encodeRoutedExperts } from '../../../processors/routed-experts-envelope.js';
import type { JsonObject, JsonValue, PromptGroup } from '../../../processors/types.js';
import { accumulateConfig } from '../accumulate/fixtures.js';
import { cfg as packCfg, field, nums } from '../pack/builders.js';
import { FIXTURES_DIR } from '../postprocess/row-builders.js';
import { ingestCfg } from './builders.js';

/** One output item: a trainable turn (new prompt tokens, generated tokens, logprobs) or a non-trainable item. */
type StepSpec =
  | { kind: 'turn'; prompt: number[]; gen: number[]; logprobs: number[] }
  | { kind: 'other'; item: 'function_call_output' | 'reasoning' | 'empty_generation' };

const tokenId = fc.integer({ min: 0, max: 150_000 });
// Logprobs the float32 column holds exactly, so the packed values compare with ===.
const logprob = fc.float({ min: -30, max: 0, noNaN: true }).map(Math.fround);

const turn = (minPrompt: number) =>
  fc
    .record({
      prompt: fc.array(tokenId, { minLength: minPrompt, maxLength: 5 }),
      gen: fc.array(fc.tuple(tokenId, logprob), { minLength: 1, maxLength: 6 }),
    })
    .map(({ prompt, gen }): StepSpec => ({ kind: 'turn', prompt, gen: gen.map((g) => g[0]), logprobs: gen.map((g) => g[1]) }));

const other = fc
  .constantFrom('function_call_output', 'reasoning', 'empty_generation')
  .map((item): StepSpec => ({ kind: 'other', item: item as 'function_call_output' | 'reasoning' | 'empty_generation' }));

interface RowSpec {
  before: StepSpec[];
  first: StepSpec;
  rest: StepSpec[];
  routes: 'none' | 'nested' | 'envelope';
}

/** A row's output: at least one trainable turn, the first one with at least one prompt token. */
const rowSpec: fc.Arbitrary<RowSpec> = fc.record({
  before: fc.array(other, { maxLength: 2 }),
  first: turn(1),
  rest: fc.array(fc.oneof(turn(0), other), { maxLength: 5 }),
  routes: fc.constantFrom('none' as const, 'nested' as const, 'envelope' as const),
});

const groupSpec = fc.record({
  rows: fc.array(rowSpec, { minLength: 1, maxLength: 4 }),
  arrival: fc.array(fc.nat(), { minLength: 4, maxLength: 4 }),
});

const LAYERS = 2;
const TOPK = 1;

function routesFor(rows: number, form: 'nested' | 'envelope'): JsonValue {
  const values = Array.from({ length: rows * LAYERS * TOPK }, (_, i) => i % 64);
  if (form === 'envelope') return encodeRoutedExperts({ dtype: 'int16', shape: [rows, LAYERS, TOPK], data: Int16Array.from(values) });
  return Array.from({ length: rows }, (_, s) => Array.from({ length: LAYERS }, (_, l) => [values[s * LAYERS + l]!]));
}

/** The NeMo-Gym output items of a row, and what it generated, in order. */
function buildOutput(spec: RowSpec) {
  const steps = [...spec.before, spec.first, ...spec.rest];
  const seen: number[] = [];
  const output: JsonValue[] = [];
  const generated = { ids: [] as number[], logprobs: [] as number[] };
  for (const step of steps) {
    if (step.kind === 'other') {
      if (step.item === 'function_call_output') output.push({ type: 'function_call_output', call_id: 'c', output: 'tool says hi' });
      else if (step.item === 'reasoning') output.push({ type: 'reasoning', summary: [{ type: 'summary_text', text: 'hmm' }] });
      else output.push({ type: 'message', content: [{ type: 'output_text', text: '' }], prompt_token_ids: [...seen], generation_token_ids: [] });
      continue;
    }
    const prompt = [...seen, ...step.prompt];
    const item: JsonObject = {
      type: 'message',
      role: 'assistant',
      content: [{ type: 'output_text', text: 'answer' }],
      prompt_token_ids: prompt,
      generation_token_ids: step.gen,
      generation_log_probs: step.logprobs,
    };
    if (spec.routes !== 'none') item.routed_experts = routesFor(prompt.length + step.gen.length, spec.routes);
    output.push(item);
    seen.push(...step.prompt, ...step.gen);
    generated.ids.push(...step.gen);
    generated.logprobs.push(...step.logprobs);
  }
  return { output, generated, all: seen };
}

/** Row `row` of a jagged packed field. */
function jagged(values: ArrayLike<number | bigint>, offsets: ArrayLike<number | bigint>, row: number): number[] {
  return nums(values).slice(Number(offsets[row]!), Number(offsets[row + 1]!));
}

describe('GymResult ingest through the whole pipeline (property)', () => {
  test('ingest → accumulate → postprocess → pack gives back exactly the generated tokens and logprobs of every trainable item, in order', () => {
    const ingest = ingestCfg();
    const post = resolvePostprocessConfig(postprocessConfigSchema.parse({}), { configDir: FIXTURES_DIR });
    fc.assert(
      fc.property(groupSpec, ({ rows, arrival }) => {
        const n = rows.length;
        const built = rows.map(buildOutput);
        const records = built.map(({ output }, i) => ({
          batch_id: 'b-prop',
          group_id: 'g-prop',
          group_index: 0,
          row_index: i,
          num_generations: n,
          prompt_idx: 5,
          weight_version: 1,
          gym_row: { responses_create_params: { input: [{ role: 'user', content: 'q' }] }, agent_ref: { name: 'agent' } },
          gym_result: { reward: i / 2, response: { output } },
        }));
        // Completion order, not row order.
        const order = records.map((_, i) => i).sort((a, b) => (arrival[a]! % 7) - (arrival[b]! % 7) || a - b);

        const state = createAccumulatorState();
        let group: PromptGroup | null = null;
        for (const i of order) {
          const converted = ingestGymResult(records[i], ingest);
          if (!converted.ok) throw new Error(`${converted.reason}: ${converted.message}`);
          const payload = new TextEncoder().encode(JSON.stringify(records[i]));
          const acc = accumulateRow(state, { record: converted.row, payload }, accumulateConfig(), 0);
          expect(acc.deadLetters).toEqual([]);
          if (acc.groups.length > 0) group = acc.groups[0]!.group;
        }
        expect(group).not.toBeNull();
        const penalized = postprocessGroup(group!, post);
        if (!penalized.ok) throw new Error(penalized.deadLetter.message);
        const packed = packGroup(penalized.penalized, packCfg());

        const ids = field(packed, 'input_ids');
        const lp = field(packed, 'generation_logprobs');
        const mask = field(packed, 'token_mask');
        built.forEach(({ generated, all }, row) => {
          const rowIds = jagged(ids.values, ids.offsets!, row);
          const rowLp = jagged(lp.values, lp.offsets!, row);
          const rowMask = jagged(mask.values, mask.offsets!, row);
          // The row's tokens are the whole conversation: the last prompt plus its generation.
          expect(rowIds).toEqual(all);
          const trained = rowMask.flatMap((m, t) => (m === 1 ? [t] : []));
          expect(trained.map((t) => rowIds[t])).toEqual(generated.ids);
          expect(trained.map((t) => rowLp[t])).toEqual(generated.logprobs);
        });
        if (rows.some((r) => r.routes !== 'none')) {
          const routes = field(packed, 'routed_experts');
          expect(nums(routes.offsets!)).toEqual(nums(ids.offsets!));
        }
      }),
      { numRuns: 200 },
    );
  });
});

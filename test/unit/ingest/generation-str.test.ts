import { describe, expect, test } from 'vitest';
import { ingestConfigSchema, postprocessConfigSchema } from '../../../config/schema.js';
import { accumulateRow, createAccumulatorState } from '../../../processors/group-accumulator.js';
import { resolveIngestConfig, type ResolvedIngestConfig } from '../../../processors/ingest-config.js';
import { postprocessGroup, resolvePostprocessConfig } from '../../../processors/postprocess.js';
import type { JsonObject, PromptGroup, RolloutRow } from '../../../processors/types.js';
import { accumulateConfig } from '../accumulate/fixtures.js';
import { FIXTURES_DIR } from '../postprocess/row-builders.js';
import { genItem, gymRecord, ingestCfg, ingestOk, ingestRejected } from './builders.js';

// fixtures/tokenizer.json (WordLevel, no decoder, so tokens join with spaces):
// [UNK]=0 <s>=1 <=2 >=3 </=4 reason=5 hello=6 <think>=7 </think>=8.
const withTokenizer: ResolvedIngestConfig = resolveIngestConfig(ingestConfigSchema.parse({ tokenizer_path: 'tokenizer.json' }), {
  configDir: FIXTURES_DIR,
});

const items = (row: RolloutRow) => (row.full_result.response as JsonObject).output as JsonObject[];

/** Postprocesses a one-row group built from `row` by the real accumulator. */
function penalize(row: RolloutRow, rewardPenalties: Record<string, unknown>) {
  const payload = new TextEncoder().encode(JSON.stringify({ gym: row.group_id }));
  const acc = accumulateRow(createAccumulatorState(), { record: row, payload }, accumulateConfig(), 0);
  expect(acc.deadLetters).toEqual([]);
  const group: PromptGroup = acc.groups[0]!.group;
  const cfg = resolvePostprocessConfig(postprocessConfigSchema.parse({ reward_penalties: rewardPenalties }), { configDir: FIXTURES_DIR });
  const out = postprocessGroup(group, cfg);
  if (!out.ok) throw new Error(out.deadLetter.message);
  return out;
}

describe('prompt_str and generation_str (SPEC §2.1 rule 5)', () => {
  test('with a tokenizer each trainable item gains the decoded text of its whole prompt and its generation', () => {
    const row = ingestOk(gymRecord({ output: [genItem([1, 6], [7, 6, 8]), { type: 'function_call_output', output: 'x' }, genItem([1, 6, 7, 6, 8, 2, 5, 3], [6])] }), withTokenizer);
    const [first, tool, last] = items(row);
    // Special tokens (<s>, <think>) are kept.
    expect([first!.prompt_str, first!.generation_str]).toEqual(['<s> hello', '<think> hello </think>']);
    expect([last!.prompt_str, last!.generation_str]).toEqual(['<s> hello <think> hello </think> < reason >', 'hello']);
    expect(tool).not.toHaveProperty('prompt_str');
  });

  test('the strings come after the item\'s other keys, which keep their order', () => {
    const row = ingestOk(gymRecord({ output: [genItem([1], [6], { id: 'msg-1' })] }), withTokenizer);
    expect(Object.keys(items(row)[0]!)).toEqual(['type', 'role', 'content', 'id', 'prompt_str', 'generation_str']);
  });

  test('without a tokenizer the items gain no strings', () => {
    const row = ingestOk(gymRecord({ output: [genItem([1], [6])] }));
    expect(items(row)[0]).not.toHaveProperty('generation_str');
  });

  test('a decoder that fails is invalid_row naming the item', () => {
    const cfg = ingestCfg({}, { decode: () => { throw new Error('id 99 out of vocabulary'); } });
    const out = ingestRejected(gymRecord({ output: [genItem([1], [99])] }), cfg);
    expect([out.reason, out.message]).toEqual([
      'invalid_row',
      'gym_result.response.output[0] token ids cannot be decoded by the ingest tokenizer: id 99 out of vocabulary',
    ]);
  });

  test('generation_str feeds the malformed-think penalty: a think tag spelled in the generation zeroes the reward by check (c)', () => {
    // The answer text shows no tag (check a: no malformed-thinking flag) and no
    // think ids are configured (check b off); only the decoded generation has one.
    const record = gymRecord({ output: [genItem([1, 6], [7, 6], { content: [{ type: 'output_text', text: 'hello' }] })] });
    const penalties = { penalize_malformed_think_tag: true };

    const row = ingestOk(record, withTokenizer);
    expect(row.message_log[1]!.has_malformed_thinking).toBe(false);
    expect(items(row)[0]!.generation_str).toBe('<think> hello');
    const penalized = penalize(row, penalties);
    expect(penalized.penalized.rows[0]!.original_reward).toBe(1);
    expect(penalized.penalized.rows[0]!.total_reward).toBe(0);
    expect(penalized.metrics['malformed_think_tag_rate']).toBe(1);

    // The same result converted without a tokenizer has no generation_str: nothing fires.
    const plain = penalize(ingestOk(record), penalties);
    expect(plain.penalized.rows[0]!.total_reward).toBe(1);
    expect(plain.metrics['malformed_think_tag_rate']).toBe(0);
  });
});

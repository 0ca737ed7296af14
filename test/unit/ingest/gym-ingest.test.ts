import { describe, expect, test } from 'vitest';
import { gymResultProblem, ingestGymResult } from '../../../processors/gym-ingest.js';
import { validateRow } from '../../../processors/row-validation.js';
import type { JsonObject } from '../../../processors/types.js';
import { functionCallItem, functionCallOutputItem, genItem, gymRecord, ids, ingestCfg, ingestOk, ingestRejected } from './builders.js';

/** A three-turn tool-using conversation: prompt [1,2], call, tool output, answer. */
function toolConversation(): JsonObject[] {
  return [
    { type: 'reasoning', summary: [{ type: 'summary_text', text: 'think first' }] },
    genItem([1, 2], [10, 11], { type: 'function_call', content: null, name: 'search', arguments: '{}', call_id: 'c1' }),
    functionCallOutputItem('found it'),
    genItem([1, 2, 10, 11, 20, 21], [30, 31, 32]),
  ];
}

describe('GymResult → RolloutRow messages (SPEC §2.1 rules 1, 2, 7)', () => {
  test('a single-turn result becomes a user message of the prompt and an assistant message of the generation', () => {
    const row = ingestOk(gymRecord({ output: [genItem([1, 2, 3], [4, 5], { generation_log_probs: [-0.5, -1.5] })] }));
    expect(row.message_log).toHaveLength(2);
    const [user, assistant] = row.message_log;
    expect(user).toEqual({ role: 'user', content: '', token_ids: Int32Array.from([1, 2, 3]) });
    expect(assistant).toEqual({
      role: 'assistant',
      content: '',
      token_ids: Int32Array.from([4, 5]),
      generation_logprobs: Float32Array.from([-0.5, -1.5]),
      is_invalid_tool_call: false,
      has_malformed_thinking: false,
    });
    expect(row.input_message_log).toEqual([user]);
    expect(row.input_message_log[0]).toBe(user);
  });

  test('each later turn adds only the prompt tokens not seen before, and non-trainable items add no message', () => {
    const row = ingestOk(gymRecord({ output: toolConversation() }));
    expect(row.message_log.map((m) => [m.role, ids(m.token_ids)])).toEqual([
      ['user', [1, 2]],
      ['assistant', [10, 11]],
      ['user', [20, 21]],
      ['assistant', [30, 31, 32]],
    ]);
    expect(row.input_message_log.map((m) => ids(m.token_ids))).toEqual([[1, 2]]);
  });

  test('items whose generation_token_ids is missing, null or empty are not trainable', () => {
    const output = [
      genItem([1], [2]),
      { type: 'message', role: 'assistant', content: [{ text: 'x' }], generation_token_ids: [], prompt_token_ids: [9] },
      { type: 'message', generation_token_ids: null },
      'not an object',
      genItem([1, 2, 3], [4]),
    ];
    const row = ingestOk(gymRecord({ output }));
    expect(row.message_log.map((m) => ids(m.token_ids))).toEqual([[1], [2], [3], [4]]);
    // The skipped items stay in full_result as they were.
    const kept = (row.full_result.response as JsonObject).output as unknown[];
    expect(kept[1]).toBe(output[1]);
    expect(kept[3]).toBe('not an object');
  });

  test('a later turn may add zero prompt tokens: its user message is empty and keeps int32 token ids', () => {
    const row = ingestOk(gymRecord({ output: [genItem([1, 2], [3]), genItem([1, 2, 3], [4])] }));
    const user = row.message_log[2]!;
    expect(user.role).toBe('user');
    expect(user.token_ids).toBeInstanceOf(Int32Array);
    expect(user.token_ids.length).toBe(0);
    expect(validateRow(row).ok).toBe(true);
  });

  test('the first trainable item must add at least one prompt token', () => {
    const out = ingestRejected(gymRecord({ output: [genItem([], [3])] }));
    expect(out.reason).toBe('invalid_row');
    expect(out.message).toBe('gym_result.response.output[0] is the first trainable item and adds no prompt token');
  });

  test('a prompt that does not begin with the tokens seen so far is non_contiguous_tokens naming the item', () => {
    const output = [genItem([1, 2], [3, 4]), functionCallOutputItem(), genItem([1, 2, 3, 9, 5], [6])];
    const out = ingestRejected(gymRecord({ output }));
    expect(out.reason).toBe('non_contiguous_tokens');
    expect(out.message).toMatch(/^gym_result\.response\.output\[2\]\.prompt_token_ids does not begin with the 4 tokens .*position 3/);
    expect([out.group_id, out.batch_id, out.row_index]).toEqual(['g-0', 'b-0', 0]);
  });

  test('a prompt shorter than the tokens seen so far is non_contiguous_tokens', () => {
    const out = ingestRejected(gymRecord({ output: [genItem([1, 2], [3, 4]), genItem([1, 2, 3], [5])] }));
    expect(out.reason).toBe('non_contiguous_tokens');
    expect(out.message).toMatch(/output\[1\]/);
  });

  test('a trainable item without prompt_token_ids is invalid_row', () => {
    const item = genItem([1], [2]);
    delete item.prompt_token_ids;
    const out = ingestRejected(gymRecord({ output: [item] }));
    expect(out.reason).toBe('invalid_row');
    expect(out.message).toBe('gym_result.response.output[0] has generation_token_ids but no prompt_token_ids');
  });

  test('no trainable item at all is no_generation_data, listing the item types', () => {
    const out = ingestRejected(gymRecord({ output: [{ type: 'reasoning', summary: [] }, functionCallItem()] }));
    expect(out.reason).toBe('no_generation_data');
    expect(out.message).toMatch(/no item with generation_token_ids \(2 items, types \[reasoning, function_call\]\)/);
    expect(ingestRejected(gymRecord({ output: [] })).reason).toBe('no_generation_data');
  });

  test('logprobs of a different length than the generated tokens are invalid_row (Deviation)', () => {
    const short = ingestRejected(gymRecord({ output: [genItem([1], [2, 3], { generation_log_probs: [-1] })] }));
    expect(short.reason).toBe('invalid_row');
    expect(short.message).toBe('gym_result.response.output[0].generation_log_probs has 1 entries for 2 generated tokens');
    const long = ingestRejected(gymRecord({ output: [genItem([1], [2], { generation_log_probs: [-1, -2] })] }));
    expect(long.reason).toBe('invalid_row');
    const missing = genItem([1], [2]);
    delete missing.generation_log_probs;
    expect(ingestRejected(gymRecord({ output: [missing] })).message).toMatch(/missing gym_result\.response\.output\[0\]\.generation_log_probs/);
  });

  test('the JSON-form strings "NaN", "Infinity" and "-Infinity" become non-finite logprobs', () => {
    const row = ingestOk(gymRecord({ output: [genItem([1], [2, 3, 4], { generation_log_probs: ['-Infinity', 'Infinity', -0.125] })] }));
    expect(Array.from(row.message_log[1]!.generation_logprobs!)).toEqual([-Infinity, Infinity, -0.125]);
    expect(validateRow(row).ok).toBe(true);
  });

  test('a NaN logprob converts, then the row validation rejects the row as nan_logprobs', () => {
    const row = ingestOk(gymRecord({ output: [genItem([1], [2, 3], { generation_log_probs: [-0.5, 'NaN'] })] }));
    expect(Number.isNaN(row.message_log[1]!.generation_logprobs![1])).toBe(true);
    const checked = validateRow(row);
    expect(checked.ok ? null : checked.reason).toBe('nan_logprobs');
  });

  test('malformed token columns are invalid_row naming the field and position', () => {
    const cases: [JsonObject, RegExp][] = [
      [genItem([1, 1.5], [2]), /output\[0\]\.prompt_token_ids\[1\] is 1\.5; token ids must be int32/],
      [genItem([1], [2, '3' as never]), /output\[0\]\.generation_token_ids\[1\] is the string "3"/],
      [genItem([1], [2 ** 31]), /generation_token_ids\[0\] is 2147483648/],
      [genItem([1], [2], { generation_log_probs: [null] }), /generation_log_probs\[0\] is null; logprobs must be numbers/],
      [genItem([1], [2], { generation_log_probs: ['nan'] }), /generation_log_probs\[0\] is the string "nan"/],
      [genItem([1], [2], { generation_log_probs: 'x' }), /generation_log_probs must be a list/],
      [{ ...genItem([1], [2]), generation_token_ids: 'abc' }, /output\[0\]\.generation_token_ids must be a list of token ids/],
      [{ ...genItem([1], [2]), prompt_token_ids: 5 }, /output\[0\]\.prompt_token_ids must be a list of token ids/],
    ];
    for (const [item, message] of cases) {
      const out = ingestRejected(gymRecord({ output: [item] }));
      expect(out.reason).toBe('invalid_row');
      expect(out.message).toMatch(message);
    }
  });
});

describe('GymResult → RolloutRow fields (SPEC §2.1 rules 5, 7)', () => {
  test('request, agent_ref and identity come from the line and its task row', () => {
    const record = gymRecord({
      gymRow: { agent_ref: { name: 'tools', version: 2 }, extra_verifier_field: 'x' },
      fields: { instance_label: 'actor-3', timing: { gen: 1.5 }, produced_at: 1700000000000, task_index: 5 },
    });
    const row = ingestOk(record);
    const gymRow = record.gym_row as JsonObject;
    expect(row.request).toBe(gymRow.responses_create_params);
    expect(row.agent_ref).toEqual({ name: 'tools', version: 2 });
    expect(row).toMatchObject({
      batch_id: 'b-0',
      group_id: 'g-0',
      group_index: 0,
      row_index: 0,
      num_generations: 1,
      prompt_idx: 42,
      task_index: 5,
      weight_version: 3,
      instance_label: 'actor-3',
      timing: { gen: 1.5 },
      produced_at: 1700000000000,
    });
    expect(validateRow(row).ok).toBe(true);
  });

  test("task_index is the line's, else gym_row._ng_task_index; the copy inside gym_result is never read", () => {
    const fromRow = ingestOk(gymRecord({ gymRow: { _ng_task_index: 7 }, gymResult: { _ng_task_index: 99 } }));
    expect(fromRow.task_index).toBe(7);
    const fromLine = ingestOk(gymRecord({ gymRow: { _ng_task_index: 7 }, fields: { task_index: 3 } }));
    expect(fromLine.task_index).toBe(3);
    const none = ingestOk(gymRecord({ gymResult: { _ng_task_index: 99 } }));
    expect(none.task_index).toBeUndefined();
    expect(none.full_result._ng_task_index).toBe(99);
    const bad = ingestRejected(gymRecord({ gymRow: { _ng_task_index: 'seven' } }));
    expect([bad.reason, bad.message]).toEqual(['invalid_row', 'gym_row._ng_task_index must be an integer when present']);
  });

  test('full_result is gym_result whose trainable items lost their token columns and routes', () => {
    const output = toolConversation();
    output[3]!.routed_experts = null;
    const record = gymRecord({ output, gymResult: { reward: 0.5, responses_create_params: { input: [] }, verdict: 'ok' } });
    const row = ingestOk(record);
    const items = (row.full_result.response as JsonObject).output as JsonObject[];
    expect(row.full_result.reward).toBe(0.5);
    expect(row.full_result.verdict).toBe('ok');
    expect(row.full_result.responses_create_params).toEqual({ input: [] });
    for (const i of [1, 3]) {
      expect(Object.keys(items[i]!)).not.toContain('prompt_token_ids');
      expect(Object.keys(items[i]!)).not.toContain('generation_token_ids');
      expect(Object.keys(items[i]!)).not.toContain('generation_log_probs');
      expect(Object.keys(items[i]!)).not.toContain('routed_experts');
      expect(Object.keys(items[i]!)).not.toContain('prompt_str');
    }
    expect(items[1]).toEqual({ type: 'function_call', role: 'assistant', content: null, name: 'search', arguments: '{}', call_id: 'c1' });
    expect(items[0]).toBe(output[0]);
    expect(items[2]).toBe(output[2]);
  });

  test('the input record is not changed', () => {
    const record = gymRecord({ output: toolConversation() });
    const before = structuredClone(record);
    ingestOk(record);
    ingestOk(record, ingestCfg({}, { decode: (a) => Array.from(a).join(',') }));
    expect(record).toEqual(before);
  });

  test('a converted row passes the row validation', () => {
    expect(validateRow(ingestOk(gymRecord({ output: toolConversation() }))).ok).toBe(true);
  });
});

describe('GymResult structure (identity of §2, gym_row, gym_result)', () => {
  test('a record that is not an object is undecodable', () => {
    for (const v of [null, 'x', 3, [gymRecord()]]) {
      const out = ingestGymResult(v, ingestCfg());
      expect(out.ok ? null : [out.reason, out.group_id, out.row_index]).toEqual(['undecodable', null, null]);
    }
  });

  test('row index problems have their own reasons, as for rows', () => {
    expect(ingestRejected(gymRecord({ fields: { row_index: 'zero' } })).reason).toBe('row_index_type');
    expect(ingestRejected(gymRecord({ fields: { row_index: 1.5 } })).reason).toBe('row_index_type');
    const out = ingestRejected(gymRecord({ fields: { row_index: 5, num_generations: 2, group_index: 1 } }));
    expect(out.reason).toBe('row_index_out_of_range');
    expect(out.message).toMatch(/row_index 5 is outside \[2, 4\)/);
    expect(out.row_index).toBe(5);
    expect(ingestRejected(gymRecord({ fields: { row_index: -1 } })).reason).toBe('row_index_out_of_range');
  });

  test('identity and JSON problems are invalid_row naming the field', () => {
    const cases: [Record<string, unknown>, string][] = [
      [gymRecord({ fields: { row_index: undefined } }), 'missing required field row_index'],
      [gymRecord({ fields: { batch_id: '' } }), 'batch_id must be a non-empty string'],
      [gymRecord({ fields: { num_generations: 0 } }), 'num_generations must be an integer >= 1'],
      [gymRecord({ fields: { weight_version: undefined } }), 'missing required field weight_version'],
      [gymRecord({ fields: { task_index: 'a' } }), 'task_index must be an integer when present'],
      [gymRecord({ fields: { timing: { gen: 'slow' } } }), 'timing.gen must be a number'],
      [gymRecord({ fields: { gym_row: undefined } }), 'missing required field gym_row'],
      [gymRecord({ fields: { gym_row: [] } }), 'gym_row must be a JSON object'],
      [gymRecord({ gymRow: { agent_ref: null } }), 'missing required field gym_row.agent_ref'],
      [gymRecord({ gymRow: { agent_ref: { name: 3 } } }), 'gym_row.agent_ref.name must be a string'],
      [gymRecord({ gymRow: { responses_create_params: 'hi' } }), 'gym_row.responses_create_params must be a JSON object'],
      [gymRecord({ fields: { gym_result: undefined } }), 'missing required field gym_result'],
      [gymRecord({ gymResult: { response: null } }), 'missing required field gym_result.response'],
      [gymRecord({ gymResult: { response: {} } }), 'missing required field gym_result.response.output'],
      [gymRecord({ gymResult: { response: { output: {} } } }), 'gym_result.response.output must be a list of output items'],
    ];
    for (const [record, message] of cases) {
      const out = ingestRejected(record);
      expect([out.reason, out.message]).toEqual(['invalid_row', message]);
      expect(gymResultProblem(record)).toBe(message);
    }
  });

  test('the publisher check passes a valid record and does not look inside the output items', () => {
    expect(gymResultProblem(gymRecord())).toBeNull();
    expect(gymResultProblem(gymRecord({ output: [genItem([1], [2, 3], { generation_log_probs: [] })] }))).toBeNull();
    expect(gymResultProblem('x')).toBe('record is not an object');
    expect(gymResultProblem(gymRecord({ fields: { row_index: 9 } }))).toMatch(/row_index 9 is outside/);
  });
});

import { describe, expect, test } from 'vitest';
import { validateRow } from '../../../processors/row-validation.js';
import type { RolloutRow } from '../../../processors/types.js';
import { formatJsonLine, groupToJson, parseJsonLine, rowFromJson, rowToJson } from '../../../json-form/form.js';
import { makeRow } from '../accumulate/fixtures.js';

function richRow(): RolloutRow {
  const row = makeRow({ position: 1, task_index: 3 });
  row.instance_label = 'actor-2';
  row.timing = { generate: 1.25 };
  row.produced_at = 1_700_000_000_123;
  row.message_log = [
    { role: 'user', token_ids: Int32Array.from([1, 2]), content: 'hi' },
    {
      role: 'assistant',
      token_ids: Int32Array.from([7, 8]),
      generation_logprobs: Float32Array.from([-0.1, -Infinity]),
      routed_experts: { dtype: 'int32', shape: [2, 1, 2], data: Int32Array.from([0, 1, 2, 3]) },
      has_malformed_thinking: false,
      is_invalid_tool_call: true,
      media: { image: { dtype: 'float32', shape: [1, 2], data: Float32Array.from([0.5, Number.NaN]) } },
    },
    {
      role: 'user',
      token_ids: new Int32Array(0),
      routed_experts: { dtype: 'int16', shape: [0, 1, 2], data: new Int16Array(0) },
    },
  ];
  return row;
}

describe('JSON form of rows (SPEC §9)', () => {
  test('a row survives JSON text and back, NaN and infinities and empty tensors included', () => {
    const row = richRow();
    const parsed = parseJsonLine(formatJsonLine({ kind: 'row', record: row }));
    expect(parsed.kind).toBe('row');
    expect(parsed.kind === 'row' && parsed.record).toEqual(row);
    expect(parsed.kind === 'row' && validateRow(parsed.record).ok).toBe(true);
  });

  test('tensors are JSON arrays, nested for routed experts, with non-finite values as strings', () => {
    const json = rowToJson(richRow()) as { message_log: Array<Record<string, unknown>> };
    const generated = json.message_log[1]!;
    expect(generated.token_ids).toEqual([7, 8]);
    expect(generated.generation_logprobs).toEqual([-0.1, '-Infinity']);
    expect(generated.routed_experts).toEqual([[[0, 1]], [[2, 3]]]);
    expect(generated.media).toEqual({ image: [[0.5, 'NaN']] });
  });

  test('a tensor that nested arrays cannot describe exactly is written with its dtype and shape', () => {
    const json = rowToJson(richRow()) as { message_log: Array<Record<string, unknown>> };
    expect(json.message_log[2]!.routed_experts).toEqual({ dtype: 'int16', shape: [0, 1, 2], values: [] });
  });

  test('float32 values are printed with the fewest digits that read back to the same float32', () => {
    const row = makeRow();
    row.message_log[1]!.generation_logprobs = Float32Array.from([-0.1, 1 / 3, -1e-8]);
    const json = rowToJson(row) as { message_log: Array<{ generation_logprobs: number[] }> };
    expect(json.message_log[1]!.generation_logprobs).toEqual([-0.1, 0.33333334, -1e-8]);
  });

  test('reading a row does not judge scalar fields: a row_index of 1.5 reaches validateRow', () => {
    const json = { ...rowToJson(makeRow({ position: 1 })), row_index: 1.5, num_generations: 'four' };
    const parsed = parseJsonLine(JSON.stringify(json));
    expect(parsed.kind === 'row' && (parsed.record as Record<string, unknown>).row_index).toBe(1.5);
    const verdict = parsed.kind === 'row' ? validateRow(parsed.record) : null;
    expect(verdict).toMatchObject({ ok: false, reason: 'row_index_type' });
  });

  test('a token list that does not fit int32 stays a plain list and the row is invalid_row', () => {
    const json = rowToJson(makeRow()) as { message_log: Array<Record<string, unknown>> };
    json.message_log[1]!.token_ids = [1, 2.5];
    const record = rowFromJson(json) as { message_log: Array<{ token_ids: unknown }> };
    expect(record.message_log[1]!.token_ids).toEqual([1, 2.5]);
    expect(validateRow(record)).toMatchObject({ ok: false, reason: 'invalid_row' });
  });

  test('ragged routed experts stay a plain list and the row is invalid_row', () => {
    const json = rowToJson(makeRow()) as { message_log: Array<Record<string, unknown>> };
    json.message_log[1]!.routed_experts = [[[1, 2]], [[3]], [[4, 5]]];
    expect(validateRow(rowFromJson(json))).toMatchObject({ ok: false, reason: 'invalid_row' });
  });

  test('produced_at may be an ISO-8601 string and is read as epoch milliseconds', () => {
    const json = { ...rowToJson(makeRow()), produced_at: '2024-01-02T03:04:05.678Z' };
    expect((rowFromJson(json) as RolloutRow).produced_at).toBe(Date.UTC(2024, 0, 2, 3, 4, 5, 678));
  });

  test('a batch_end line is read as a BatchEnd', () => {
    expect(parseJsonLine('{"batch_end": {"batch_id": "b7", "num_rows": 16}}')).toEqual({
      kind: 'batch_end',
      end: { batch_id: 'b7', num_rows: 16 },
    });
  });

  test('a group line keeps its rows in order and round-trips', () => {
    const rows = [makeRow({ position: 0, num_generations: 2 }), makeRow({ position: 1, num_generations: 2 })];
    const group = { group_id: 'g0', batch_id: 'b0', group_index: 0, num_generations: 2, prompt_idx: 100, task_index: null, rows };
    const line = formatJsonLine({ kind: 'group', group });
    expect(Object.keys(JSON.parse(line))).toEqual(['group']);
    expect(JSON.parse(line).group).toEqual(JSON.parse(JSON.stringify(groupToJson(group))));
    expect(parseJsonLine(line)).toEqual({ kind: 'group', group });
  });

  test('text that is not a JSON object is refused with JsonFormError', () => {
    expect(() => parseJsonLine('{"row_index": 1')).toThrow(/not valid JSON/);
    expect(() => parseJsonLine('[1, 2]')).toThrow(/JSON object/);
    expect(() => parseJsonLine('{"group": 5}')).toThrow(/group must be a JSON object/);
  });
});

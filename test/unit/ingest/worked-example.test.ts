/**
 * The worked example of docs/formats.md ("GymResult lines"): each line of
 * docs/examples/gym-result.jsonl, converted with the default ingest config,
 * must be the row on the same line of gym-result.rows.jsonl.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { ingestGymResult } from '../../../processors/gym-ingest.js';
import { validateRow } from '../../../processors/row-validation.js';
import type { JsonObject, RolloutRow } from '../../../processors/types.js';
import { gymResultFromJson, rowFromJson, rowToJson } from '../../../json-form/messages.js';
import { ingestCfg } from './builders.js';

const dir = new URL('../../../docs/examples/', import.meta.url);
const lines = (name: string) => readFileSync(new URL(name, dir), 'utf8').split('\n').filter((l) => l !== '');
const gymLines = lines('gym-result.jsonl');
const rowLines = lines('gym-result.rows.jsonl');

function convert(line: string): RolloutRow {
  const out = ingestGymResult(gymResultFromJson(JSON.parse(line)), ingestCfg());
  if (!out.ok) throw new Error(`${out.reason}: ${out.message}`);
  return out.row;
}

describe('the GymResult worked example (docs/examples/gym-result.jsonl)', () => {
  test('has one expected row per GymResult line', () => {
    expect(gymLines.length).toBeGreaterThan(0);
    expect(rowLines).toHaveLength(gymLines.length);
  });

  test.each(gymLines.map((line, i) => [i + 1, line, rowLines[i]!] as const))(
    'line %i converts to the expected row',
    (_, gymLine, rowLine) => {
      const row = convert(gymLine);
      expect(row).toEqual(rowFromJson(JSON.parse(rowLine)));
      // Also in its written form, so dtypes and key order of the file are pinned.
      expect(JSON.stringify(rowToJson(row))).toBe(rowLine);
      expect(validateRow(row).ok).toBe(true);
    },
  );

  test('the example shows what the docs walk through: a tool call, routes as an envelope, the last-route overwrite', () => {
    const gym = JSON.parse(gymLines[0]!) as { gym_result: { response: { output: JsonObject[] } } };
    const items = gym.gym_result.response.output;
    expect(items.map((i) => i.type)).toEqual(['reasoning', 'function_call', 'function_call_output', 'message']);
    expect(String(items[1]!.routed_experts)).toMatch(/^nrlre1:int16:7x2x2:/);
    const row = convert(gymLines[0]!);
    const lastRoute = row.message_log[1]!.routed_experts!;
    // Row 6 of the first item's routes (60..63) was replaced by row 6 of the second item's (160..163).
    expect(Array.from(lastRoute.data.slice(8) as Int16Array)).toEqual([160, 161, 162, 163]);
  });
});

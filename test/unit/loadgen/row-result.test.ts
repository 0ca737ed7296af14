import { describe, expect, test } from 'vitest';
import type { JsonObject, RolloutRow } from '../../../processors/types.js';
import { EOS_TOKEN_ID } from '../../../loadgen/index.js';
import { itemText, output, reason, rows } from './row-helpers.js';

describe('synthetic requests and verifier results', () => {
  test('reward components sum to the reward on the rows that carry them', () => {
    const all = rows({ batches: 4 });
    const withComponents = all.filter((r) => r.full_result.reward_components != null);
    expect(withComponents.length).toBeGreaterThan(0);
    expect(withComponents.length).toBeLessThan(all.length);
    for (const row of withComponents) {
      const parts = Object.values(row.full_result.reward_components as Record<string, number>);
      expect(parts.length).toBeGreaterThanOrEqual(2);
      const sum = parts.reduce((a, b) => a + b, 0);
      expect(Math.abs(sum - (row.full_result.reward as number))).toBeLessThanOrEqual(1e-9);
    }
  });

  test('rewards are binary or graded in [0, 1], and some groups give every row the same reward', () => {
    const groups = new Map<string, number[]>();
    for (const row of rows({ batches: 4 })) {
      const r = row.full_result.reward as number;
      expect(r).toBeGreaterThanOrEqual(0);
      expect(r).toBeLessThanOrEqual(1);
      groups.set(row.group_id, [...(groups.get(row.group_id) ?? []), r]);
    }
    const allEqual = [...groups.values()].filter((rs) => new Set(rs).size === 1);
    expect(allEqual.length).toBeGreaterThan(0);
    expect(allEqual.length).toBeLessThan(groups.size);
    const graded = [...groups.values()].filter((rs) => rs.some((r) => r !== 0 && r !== 1));
    expect(graded.length).toBeGreaterThan(0);
  });

  test('the configured low-effort marker ends the last user message of some requests', () => {
    const marker = 'LOW-EFFORT-XYZ';
    const all = rows({ batches: 4, shape: { lowEffort: { marker, groupRate: 0.5 } } });
    const groups = new Map<string, boolean>();
    for (const row of all) {
      const input = row.request.input as JsonObject[];
      const lastUser = [...input].reverse().find((m) => m.role === 'user')!;
      groups.set(row.group_id, String(lastUser.content).includes(marker));
      expect(input.filter((m) => m.role !== 'user').some((m) => String(m.content).includes(marker))).toBe(false);
      expect(row.request.max_output_tokens).toBe(400);
    }
    const share = [...groups.values()].filter(Boolean).length / groups.size;
    expect(share).toBeGreaterThan(0.25);
    expect(share).toBeLessThan(0.75);
  });

  test('full_result holds Responses output items of every kind NeMo-Gym writes', () => {
    const all = rows({ batches: 4 });
    const types = new Set<string>();
    let stringContent = 0;
    let generationStr = 0;
    for (const row of all) {
      const items = output(row);
      const calls = new Set<string>();
      for (const item of items) {
        types.add(item.type as string);
        if (item.type === 'reasoning') expect(typeof ((item.summary as JsonObject[])[0] as JsonObject).text).toBe('string');
        if (item.type === 'message') {
          expect(itemText(item)).not.toBeNull();
          if (typeof item.content === 'string') stringContent++;
        }
        if (item.type === 'function_call') {
          calls.add(item.call_id as string);
          expect(() => JSON.parse(item.arguments as string)).not.toThrow();
        }
        if (item.type === 'function_call_output') expect(calls.has(item.call_id as string)).toBe(true);
        if (typeof item.generation_str === 'string') generationStr++;
      }
      expect(typeof row.full_result.reward).toBe('number');
      expect(row.agent_ref.name).toMatch(/_agent$/);
    }
    expect([...types].sort()).toEqual(['function_call', 'function_call_output', 'message', 'reasoning']);
    expect(stringContent).toBeGreaterThan(0);
    expect(generationStr).toBeGreaterThan(0);
  });

  test('an empty-answer rate of one blanks every final answer', () => {
    for (const row of rows({ shape: { flags: { emptyAnswerRate: 1 }, turns: { max: 1 } } })) {
      if (reason(row) === 'length' || reason(row) === 'max_output_tokens') continue;
      const last = output(row).at(-1)!;
      expect(last.type).toBe('message');
      expect(itemText(last)!.trim()).toBe('');
    }
  });

  test('a duplicated-reasoning rate of one repeats the reasoning summary as the answer', () => {
    const all = rows({ shape: { thinkingGroupRate: 1, flags: { duplicatedReasoningRate: 1, emptyAnswerRate: 0 }, turns: { max: 1 } } });
    let checked = 0;
    for (const row of all) {
      if (reason(row) === 'length' || reason(row) === 'max_output_tokens') continue;
      const items = output(row);
      const [reasoning, answer] = items.slice(-2) as [JsonObject, JsonObject];
      expect(reasoning.type).toBe('reasoning');
      const summary = ((reasoning.summary as JsonObject[])[0] as JsonObject).text as string;
      expect(itemText(answer)!.trim()).toBe(summary.trim());
      expect(summary.trim()).not.toBe('');
      checked++;
    }
    expect(checked).toBeGreaterThan(50);
  });

  test('without injected duplicates no answer repeats its reasoning', () => {
    for (const row of rows({ batches: 4, shape: { flags: { duplicatedReasoningRate: 0 } } })) {
      const items = output(row);
      items.forEach((item, i) => {
        const next = items[i + 1];
        if (item.type !== 'reasoning' || next === undefined) return;
        const summary = (((item.summary as JsonObject[])[0] as JsonObject).text as string).trim();
        expect(itemText(next)?.trim() ?? null).not.toBe(summary);
      });
    }
  });

  test('length-cut rows stop within the context budget, many exactly at it, and report "length"', () => {
    const budget = 150;
    const all = rows({
      shape: { maxTotalTokens: budget, promptTokens: { median: 30, max: 60 }, generatedTokens: { median: 120, sigma: 0.3, max: 1000 } },
    });
    const cut = all.filter((r) => reason(r) === 'length');
    expect(cut.length).toBeGreaterThan(all.length / 4);
    const total = (r: RolloutRow): number => r.message_log.reduce((n, m) => n + m.token_ids.length, 0);
    expect(all.every((r) => total(r) <= budget)).toBe(true);
    expect(cut.filter((r) => total(r) === budget).length).toBeGreaterThan(cut.length / 2);
    for (const row of cut) {
      const last = row.message_log.at(-1)!.token_ids;
      expect(last[last.length - 1]).not.toBe(EOS_TOKEN_ID);
      expect((row.full_result.response as JsonObject).status).toBe('incomplete');
    }
  });

  test('rows that hit the output cap report "max_output_tokens" with exactly the cap generated', () => {
    const all = rows({ shape: { generatedTokens: { median: 60, sigma: 1.5, max: 100 }, maxTotalTokens: 65_536 } });
    const capped = all.filter((r) => reason(r) === 'max_output_tokens');
    expect(capped.length).toBeGreaterThan(0);
    for (const row of capped) {
      const generated = row.message_log.filter((m) => m.role === 'assistant').reduce((n, m) => n + m.token_ids.length, 0);
      expect(generated).toBe(100);
    }
  });

  test('mask_sample flags appear in full_result and in instance_config, with varied truthy and falsy values', () => {
    const all = rows({ batches: 4, shape: { flags: { maskSampleRate: 0.5 } } });
    const top = all.map((r) => r.full_result.mask_sample);
    const nested = all.map((r) => (r.full_result.instance_config as JsonObject | undefined)?.mask_sample);
    expect(top.every((v) => typeof v === 'boolean')).toBe(true);
    expect(top.filter((v) => v === true).length).toBeGreaterThan(0);
    const truthyNested = nested.filter((v) => Boolean(v));
    expect(new Set(truthyNested.map((v) => typeof v))).toEqual(new Set(['boolean', 'number', 'string']));
    expect(nested).toContain(0);
    expect(nested).toContain(false);
    expect(nested).toContain(undefined);
  });

  test('task_index is set on some groups only', () => {
    const all = rows({ batches: 4 });
    expect(all.some((r) => r.task_index == null)).toBe(true);
    expect(all.some((r) => Number.isInteger(r.task_index))).toBe(true);
  });
});

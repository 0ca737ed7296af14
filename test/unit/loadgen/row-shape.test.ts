import { describe, expect, test } from 'vitest';
import {
  deriveRng,
  EOS_TOKEN_ID,
  generateEvents,
  planGroup,
  planRow,
  PROFILES,
  resolveShape,
  THINK_CLOSE_TAG,
  THINK_CLOSE_TOKEN_ID,
  THINK_OPEN_TAG,
  THINK_OPEN_TOKEN_ID,
  type LoadgenOptions,
  type ShapeOverrides,
} from '../../../loadgen/index.js';
import type { JsonObject, Message, RolloutRow } from '../../../processors/types.js';

/** Short default-profile rows: every feature of the profile, a fraction of the tokens. */
const COMPACT: ShapeOverrides = {
  promptTokens: { median: 30, max: 200 },
  userTurnTokens: { median: 20, max: 100 },
  generatedTokens: { median: 60, max: 400 },
  textCharsPerToken: 1,
};

function rows(opts: Partial<LoadgenOptions> & { shape?: ShapeOverrides } = {}): RolloutRow[] {
  const events = generateEvents({
    batches: 3,
    groupsPerBatch: 8,
    generations: 4,
    seed: 5,
    profile: 'default',
    ...opts,
    shape: { ...COMPACT, ...opts.shape },
  });
  return [...events].flatMap((e) => (e.kind === 'row' ? [e.row] : []));
}

const isGenerated = (m: Message): boolean => m.role === 'assistant' && m.generation_logprobs != null;
const count = (ids: Int32Array, id: number): number => ids.reduce((n, x) => n + (x === id ? 1 : 0), 0);
const output = (row: RolloutRow): JsonObject[] => (row.full_result.response as JsonObject).output as JsonObject[];
const reason = (row: RolloutRow): string | null =>
  (((row.full_result.response as JsonObject).incomplete_details as JsonObject | null)?.reason as string | undefined) ?? null;
const itemText = (item: JsonObject): string | null => {
  const c = item.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c) && c.length > 0) return ((c[0] as JsonObject).text as string) ?? null;
  return null;
};

describe('synthetic row shape', () => {
  test('message logs alternate user and assistant, start with the prompt and end with a generated turn', () => {
    const all = rows();
    const turns = new Set<number>();
    for (const row of all) {
      const log = row.message_log;
      expect(log.length % 2).toBe(0);
      log.forEach((m, i) => expect(m.role).toBe(i % 2 === 0 ? 'user' : 'assistant'));
      expect(log.filter(isGenerated)).toHaveLength(log.length / 2);
      expect(row.input_message_log).toHaveLength(1);
      expect(Array.from(row.input_message_log[0]!.token_ids)).toEqual(Array.from(log[0]!.token_ids));
      expect(row.full_result.num_turns).toBe(log.length / 2);
      turns.add(log.length / 2);
    }
    expect(Math.min(...turns)).toBe(1);
    expect(Math.max(...turns)).toBeGreaterThanOrEqual(3);
    expect(Math.max(...turns)).toBeLessThanOrEqual(8);
  });

  test('generated messages carry finite logprobs ≤ 0 of their own length and both violation flags', () => {
    for (const row of rows()) {
      for (const m of row.message_log.filter(isGenerated)) {
        expect(m.generation_logprobs).toBeInstanceOf(Float32Array);
        expect(m.generation_logprobs!.length).toBe(m.token_ids.length);
        expect(m.generation_logprobs!.every((x) => Number.isFinite(x) && x <= 0)).toBe(true);
        expect(typeof m.is_invalid_tool_call).toBe('boolean');
        expect(typeof m.has_malformed_thinking).toBe('boolean');
      }
      for (const m of row.message_log.filter((x) => x.role === 'user')) expect(m.generation_logprobs).toBeUndefined();
    }
  });

  test('token ids are regular ids of the configured vocab or one of the exposed special ids', () => {
    const special = new Set([THINK_OPEN_TOKEN_ID, THINK_CLOSE_TOKEN_ID, EOS_TOKEN_ID]);
    let specials = 0;
    const outside: number[] = [];
    for (const row of rows({ shape: { vocab: { min: 1000, max: 2000 } } })) {
      for (const m of row.message_log) {
        expect(m.token_ids).toBeInstanceOf(Int32Array);
        for (const id of m.token_ids) {
          if (special.has(id)) specials++;
          else if (id < 1000 || id >= 2000) outside.push(id);
        }
      }
    }
    expect(outside).toEqual([]);
    expect(specials).toBeGreaterThan(0);
  });

  test.each([
    ['int8', 16, Int8Array],
    ['int16', 300, Int16Array],
  ] as const)('routed experts are %s blocks [tokens, layers, topk] of distinct experts on generated messages', (dtype, experts, ctor) => {
    const all = rows({ batches: 1, shape: { routes: { layers: 3, topk: 4, numExperts: experts, dtype } } });
    for (const row of all) {
      for (const m of row.message_log) {
        if (!isGenerated(m)) {
          expect(m.routed_experts).toBeUndefined();
          continue;
        }
        const r = m.routed_experts!;
        expect(r.dtype).toBe(dtype);
        expect(r.shape).toEqual([m.token_ids.length, 3, 4]);
        expect(r.data).toBeInstanceOf(ctor);
        expect(r.data.length).toBe(m.token_ids.length * 12);
        let bad = 0;
        for (let k = 0; k < r.data.length; k += 4) {
          const tuple = Array.from(r.data.subarray(k, k + 4) as Int8Array);
          if (new Set(tuple).size !== 4 || !tuple.every((e) => e >= 0 && e < experts)) bad++;
        }
        expect(bad).toBe(0);
      }
    }
  });

  test('thinking rows end every user turn with <think> and close it once in every uncut assistant turn', () => {
    const all = rows({ shape: { thinkingGroupRate: 1, flags: { malformedThinkingRate: 0 } } });
    let cut = 0;
    for (const row of all) {
      const log = row.message_log;
      for (let i = 0; i < log.length; i += 2) {
        const user = log[i]!.token_ids;
        const reply = log[i + 1]!.token_ids;
        expect(user[user.length - 1]).toBe(THINK_OPEN_TOKEN_ID);
        expect([count(user, THINK_OPEN_TOKEN_ID), count(user, THINK_CLOSE_TOKEN_ID)]).toEqual([1, 0]);
        expect(count(reply, THINK_OPEN_TOKEN_ID)).toBe(0);
        if (reply[reply.length - 1] === EOS_TOKEN_ID) expect(count(reply, THINK_CLOSE_TOKEN_ID)).toBe(1);
        else {
          cut++;
          expect(i).toBe(log.length - 2); // only the last turn can be length-cut
          expect(count(reply, THINK_CLOSE_TOKEN_ID)).toBeLessThanOrEqual(1);
        }
        expect(log[i + 1]!.has_malformed_thinking).toBe(false);
      }
      for (const item of output(row)) {
        const g = item.generation_str;
        if (typeof g !== 'string') continue;
        expect(g.includes(THINK_OPEN_TAG)).toBe(false);
        expect(g.split(THINK_CLOSE_TAG).length - 1).toBeLessThanOrEqual(1);
      }
      expect(output(row).some((item) => item.type === 'reasoning')).toBe(true);
    }
    expect(cut).toBeLessThan(all.length);
  });

  test('plain rows have no think ids and no reasoning items', () => {
    for (const row of rows({ shape: { thinkingGroupRate: 0, flags: { malformedThinkingRate: 0 } } })) {
      for (const m of row.message_log) {
        expect(count(m.token_ids, THINK_OPEN_TOKEN_ID) + count(m.token_ids, THINK_CLOSE_TOKEN_ID)).toBe(0);
      }
      expect(output(row).some((item) => item.type === 'reasoning')).toBe(false);
    }
  });

  test('injected malformed thinking trips one of the three reference checks: flag, token balance or tag text', () => {
    const all = rows({ shape: { thinkingGroupRate: 1, flags: { malformedThinkingRate: 1 } } });
    const seen = { flag: 0, tokens: 0, text: 0 };
    for (const row of all) {
      const log = row.message_log;
      const flag = log.some((m) => m.has_malformed_thinking === true);
      let tokens = false;
      for (let i = 0; i < log.length; i += 2) {
        const reply = log[i + 1]!.token_ids;
        const uncut = reply[reply.length - 1] === EOS_TOKEN_ID;
        if (count(reply, THINK_OPEN_TOKEN_ID) > 0 || (uncut && count(reply, THINK_CLOSE_TOKEN_ID) !== 1)) tokens = true;
      }
      const text = output(row).some((item) => typeof item.generation_str === 'string' && item.generation_str.includes(THINK_OPEN_TAG));
      expect(flag || tokens || text).toBe(true);
      seen.flag += flag ? 1 : 0;
      seen.tokens += tokens ? 1 : 0;
      seen.text += text ? 1 : 0;
    }
    expect(Object.values(seen).every((n) => n > 0)).toBe(true);
  });

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

describe('profiles', () => {
  test('published-max averages about 3.3k tokens per row (197k tokens/s at 59 rows/s)', () => {
    const shape = resolveShape(PROFILES['published-max']);
    let tokens = 0;
    let count = 0;
    for (let g = 0; g < 500; g++) {
      const rng = deriveRng(2024, 'test-group', g);
      const group = planGroup(shape, rng);
      for (let i = 0; i < 16; i++, count++) tokens += planRow(shape, group, rng).totalTokens;
    }
    expect(tokens / count).toBeGreaterThan((197_000 / 59) * 0.95);
    expect(tokens / count).toBeLessThan((197_000 / 59) * 1.05);
    expect(PROFILES['published-max'].rowsPerSecond).toBe(59);
    expect(PROFILES['published-max'].generations).toBe(16);
    expect(shape.routes).toBeNull();
  });

  test('built published-max rows have the planned sizes', () => {
    const events = [...generateEvents({ batches: 1, groupsPerBatch: 8, generations: 16, seed: 3, profile: 'published-max' })];
    const built = events.flatMap((e) => (e.kind === 'row' ? [e.row] : []));
    const mean = built.reduce((n, r) => n + r.message_log.reduce((k, m) => k + m.token_ids.length, 0), 0) / built.length;
    expect(mean).toBeGreaterThan(3339 * 0.7);
    expect(mean).toBeLessThan(3339 * 1.3);
    expect(built.every((r) => r.num_generations === 16)).toBe(true);
  });

  test('router-replay carries 48×8 int8 routes: 384 bytes per generated token', () => {
    const events = generateEvents({
      batches: 1,
      groupsPerBatch: 1,
      generations: 2,
      seed: 1,
      profile: 'router-replay',
      shape: { generatedTokens: { median: 300, max: 2000 } },
    });
    for (const ev of events) {
      if (ev.kind !== 'row') continue;
      for (const m of ev.row.message_log.filter(isGenerated)) {
        expect(m.routed_experts!.shape).toEqual([m.token_ids.length, 48, 8]);
        expect(m.routed_experts!.data.byteLength).toBe(384 * m.token_ids.length);
      }
    }
  });

  test('the small profile makes rows of tens of tokens', () => {
    const events = [...generateEvents({ batches: 4, groupsPerBatch: 4, generations: 4, seed: 1, profile: 'small' })];
    const sizes = events.flatMap((e) => (e.kind === 'row' ? [e.row.message_log.reduce((n, m) => n + m.token_ids.length, 0)] : []));
    const mean = sizes.reduce((a, b) => a + b, 0) / sizes.length;
    expect(mean).toBeGreaterThan(10);
    expect(mean).toBeLessThan(100);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(256);
  });

  test('a 64k-token row with 48×8 routes is built in a fraction of a second', () => {
    const started = performance.now();
    const events = generateEvents({
      batches: 1,
      groupsPerBatch: 1,
      generations: 1,
      seed: 9,
      profile: 'router-replay',
      shape: { generatedTokens: { median: 60_000, sigma: 0, min: 60_000, max: 60_000 }, turns: { max: 1 } },
    });
    const row = [...events].flatMap((e) => (e.kind === 'row' ? [e.row] : []))[0]!;
    const elapsed = performance.now() - started;
    const reply = row.message_log[1]!;
    expect(reply.token_ids.length).toBe(60_000);
    expect(reply.routed_experts!.data.byteLength).toBe(60_000 * 384);
    // Generous for a shared 2-core machine; an allocation per token would take seconds.
    expect(elapsed).toBeLessThan(3000);
  });
});

import { describe, expect, test } from 'vitest';
import {
  EOS_TOKEN_ID,
  THINK_CLOSE_TAG,
  THINK_CLOSE_TOKEN_ID,
  THINK_OPEN_TAG,
  THINK_OPEN_TOKEN_ID,
  UNWANTED_TOKEN_ID,
} from '../../../loadgen/index.js';
import { count, isGenerated, output, rows } from './row-helpers.js';

describe('synthetic message logs', () => {
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
    const special = new Set([THINK_OPEN_TOKEN_ID, THINK_CLOSE_TOKEN_ID, EOS_TOKEN_ID, UNWANTED_TOKEN_ID]);
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

  test('a stray-token rate of one puts <|endoftext|> into generated messages only, and a rate of zero nowhere', () => {
    let generated = 0;
    let hit = 0;
    for (const row of rows({ shape: { flags: { strayTokenRate: 1 } } })) {
      for (const m of row.message_log) {
        if (m.role === 'user') expect(m.token_ids.includes(UNWANTED_TOKEN_ID)).toBe(false);
        else {
          generated++;
          hit += count(m.token_ids, UNWANTED_TOKEN_ID) === 1 ? 1 : 0;
        }
      }
    }
    // A draw that lands on a structural id (</think>, EOS) is skipped, which is rare.
    expect(hit / generated).toBeGreaterThan(0.9);
    for (const row of rows({ shape: { flags: { strayTokenRate: 0 } } })) {
      expect(row.message_log.some((m) => m.token_ids.includes(UNWANTED_TOKEN_ID))).toBe(false);
    }
  });
});

/**
 * Seeded synthetic penalized groups for the pack benchmark: N rows sharing
 * one prompt, each row a multi-turn conversation (generated assistant turns
 * with logprobs alternating with tool/user turns) cut to a target length,
 * optionally with routed experts on the generated turns.
 */
import type { Message, PenalizedGroup, PenalizedRow } from '../processors/types.js';

export interface SynthOptions {
  rows: number;
  minTokens: number;
  maxTokens: number;
  /** `[layers, topk]` of routed experts on generated turns, or null for none. */
  routes: [number, number] | null;
}

/** mulberry32: small, fast, seedable; good enough to vary shapes reproducibly. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const between = (r: () => number, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));

function tokens(r: () => number, n: number): Int32Array {
  const ids = new Int32Array(n);
  for (let i = 0; i < n; i++) ids[i] = (r() * 151_936) | 0;
  return ids;
}

function generated(r: () => number, n: number, routes: [number, number] | null): Message {
  const lp = new Float32Array(n);
  for (let i = 0; i < n; i++) lp[i] = -r() * 4;
  const m: Message = {
    role: 'assistant',
    token_ids: tokens(r, n),
    generation_logprobs: lp,
    is_invalid_tool_call: r() < 0.05,
    has_malformed_thinking: r() < 0.05,
  };
  if (routes !== null) {
    const [layers, topk] = routes;
    const data = new Int16Array(n * layers * topk);
    for (let i = 0; i < data.length; i++) data[i] = (r() * 128) | 0;
    m.routed_experts = { dtype: 'int16', shape: [n, layers, topk], data };
  }
  return m;
}

/** One group; `index` makes its ids unique and, with the seed, its shapes reproducible. */
export function synthesizeGroup(seed: number, index: number, o: SynthOptions): PenalizedGroup {
  const r = rng(seed * 1_000_003 + index);
  const prompt: Message = { role: 'user', token_ids: tokens(r, between(r, 256, 2048)) };
  const rows: PenalizedRow[] = [];
  for (let i = 0; i < o.rows; i++) {
    const target = Math.max(between(r, o.minTokens, o.maxTokens), prompt.token_ids.length + 1);
    // Each row decodes its own copy of the prompt, as rows arrive separately.
    const log: Message[] = [{ role: 'user', token_ids: prompt.token_ids.slice() }];
    let total = prompt.token_ids.length;
    let turn = 0;
    while (total < target) {
      const isGen = turn % 2 === 0;
      const n = Math.min(target - total, isGen ? between(r, 128, 4096) : between(r, 32, 1024));
      log.push(isGen ? generated(r, n, o.routes) : { role: r() < 0.5 ? 'tool' : 'user', token_ids: tokens(r, n) });
      total += n;
      turn++;
    }
    const reward = r() < 0.5 ? 1 : 0;
    rows.push({
      row_index: index * o.rows + i,
      total_reward: reward,
      original_reward: reward,
      truncated: total >= o.maxTokens,
      mask_sample: false,
      reward_components: { accuracy: reward },
      violation_counts: { num_invalid_tool_calls: 0, num_malformed_thinking: 0, num_assistant_messages: turn >> 1, num_routed_experts_backfilled: 0 },
      agent_ref: { name: 'bench' },
      weight_version: 1,
      message_log: log,
    });
  }
  return {
    group_id: `bench-${seed}-${index}`,
    batch_id: `bench-${seed}`,
    group_index: index,
    num_generations: o.rows,
    prompt_idx: index,
    weight_version: 1,
    task_index: null,
    prompt: [prompt],
    reward_component_names: ['accuracy'],
    rows,
    metrics: {},
  };
}

/**
 * Seeded synthetic penalized groups for the pack benchmark: N rows sharing
 * one prompt, each row a multi-turn conversation (generated assistant turns
 * with logprobs alternating with tool/user turns) cut to a target length,
 * optionally with routed experts on the generated turns.
 */
import type { Message, PenalizedGroup, PenalizedRow, Tensor } from '../processors/types.js';

export interface SynthOptions {
  rows: number;
  minTokens: number;
  maxTokens: number;
  /** `[layers, topk]` of routed experts on generated turns, or null for none. */
  routes: [number, number] | null;
  /**
   * Media on each row's prompt and on some tool/user turns: `pixel_values` float32 `[items, 3]` and
   * `image_grid_thw` int64 `[1, 3]`, plus, on every other row, `audio`
   * float32 with a varying trailing dim (dynamic shapes). Off when absent, and
   * then no random draws are spent on it, so the other options' groups are
   * unchanged.
   */
  media?: boolean;
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

function mediaOf(r: () => number, row: number): Record<string, Tensor> {
  const items = between(r, 1, 4);
  const pixels = new Float32Array(items * 3);
  for (let i = 0; i < pixels.length; i++) pixels[i] = r();
  const media: Record<string, Tensor> = {
    pixel_values: { dtype: 'float32', shape: [items, 3], data: pixels },
    image_grid_thw: { dtype: 'int64', shape: [1, 3], data: BigInt64Array.of(1n, BigInt(between(r, 1, 64)), BigInt(between(r, 1, 64))) },
  };
  if (row % 2 === 1) {
    const width = between(r, 1, 5);
    const audio = new Float32Array(2 * width);
    for (let i = 0; i < audio.length; i++) audio[i] = -r();
    media['audio'] = { dtype: 'float32', shape: [2, width], data: audio };
  }
  return media;
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
    if (o.media === true) log[0]!.media = mediaOf(r, i);
    let total = prompt.token_ids.length;
    let turn = 0;
    while (total < target) {
      const isGen = turn % 2 === 0;
      const n = Math.min(target - total, isGen ? between(r, 128, 4096) : between(r, 32, 1024));
      const m: Message = isGen ? generated(r, n, o.routes) : { role: r() < 0.5 ? 'tool' : 'user', token_ids: tokens(r, n) };
      if (o.media === true && !isGen && r() < 0.5) m.media = mediaOf(r, i);
      log.push(m);
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

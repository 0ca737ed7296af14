/** Small builders for pack tests: messages, penalized groups, config, field lookup. */
import { type PackConfig, packConfigSchema } from '../../../config/schema.js';
import type { Message, PackedField, PackedGroup, PenalizedGroup, PenalizedRow, Tensor } from '../../../processors/types.js';

export interface MsgOptions {
  lp?: number[];
  routes?: { layers: number; topk: number; values?: number[]; dtype?: 'int16' | 'int32' };
  invalid?: boolean;
  malformed?: boolean;
  media?: Record<string, Tensor>;
}

export function msg(role: string, ids: number[], o: MsgOptions = {}): Message {
  const m: Message = { role, token_ids: Int32Array.from(ids) };
  if (o.lp !== undefined) m.generation_logprobs = Float32Array.from(o.lp);
  if (o.routes !== undefined) {
    const { layers, topk } = o.routes;
    const size = ids.length * layers * topk;
    const values = o.routes.values ?? Array.from({ length: size }, (_, i) => i % 7);
    const dtype = o.routes.dtype ?? 'int32';
    m.routed_experts = {
      dtype,
      shape: [ids.length, layers, topk],
      data: dtype === 'int16' ? Int16Array.from(values) : Int32Array.from(values),
    };
  }
  if (o.invalid !== undefined) m.is_invalid_tool_call = o.invalid;
  if (o.malformed !== undefined) m.has_malformed_thinking = o.malformed;
  if (o.media !== undefined) m.media = o.media;
  return m;
}

export function f32(shape: number[], values: number[]): Tensor {
  return { dtype: 'float32', shape, data: Float32Array.from(values) };
}

export interface GroupOptions {
  prompt?: Message[];
  rewards?: number[];
  truncated?: boolean[];
  maskSample?: (boolean | null)[];
  components?: (Record<string, number> | null)[];
  componentNames?: string[];
  counts?: Partial<PenalizedRow['violation_counts']>[];
}

/** A group whose rows are `logs`; the prompt defaults to the first message of row 0. */
export function group(logs: Message[][], o: GroupOptions = {}): PenalizedGroup {
  const rows: PenalizedRow[] = logs.map((log, i) => ({
    row_index: 8 + i,
    total_reward: o.rewards?.[i] ?? 0,
    original_reward: o.rewards?.[i] ?? 0,
    truncated: o.truncated?.[i] ?? false,
    mask_sample: o.maskSample?.[i] ?? null,
    reward_components: o.components?.[i] ?? null,
    violation_counts: {
      num_invalid_tool_calls: 0,
      num_malformed_thinking: 0,
      num_assistant_messages: 0,
      num_routed_experts_backfilled: 0,
      ...o.counts?.[i],
    },
    agent_ref: { name: 'agent' },
    weight_version: 41,
    message_log: log,
  }));
  return {
    group_id: 'g-7',
    batch_id: 'b-1',
    group_index: 2,
    num_generations: logs.length,
    prompt_idx: 1234,
    weight_version: 42,
    task_index: null,
    prompt: o.prompt ?? (logs[0]?.slice(0, 1) ?? []),
    reward_component_names: o.componentNames ?? [],
    rows,
    metrics: {},
  };
}

export function cfg(overrides: Record<string, unknown> = {}): PackConfig {
  return packConfigSchema.parse(overrides);
}

export function field(packed: PackedGroup, name: string): PackedField {
  const f = packed.fields.find((x) => x.name === name);
  if (f === undefined) throw new Error(`no field ${name}; have ${packed.fields.map((x) => x.name).join(', ')}`);
  return f;
}

/** Typed array → plain numbers (bigints converted) for readable assertions. */
export function nums(a: ArrayLike<number | bigint>): number[] {
  return Array.from(a as ArrayLike<number | bigint>, (v) => Number(v));
}

/** The error `fn` throws; fails the test when it returns normally. */
export function thrownBy(fn: () => unknown): Error {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a throw');
}

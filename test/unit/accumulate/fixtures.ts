/**
 * Builders of valid rollout rows for tests. A row's payload is its JSON-form
 * line, so two rows built from equal values have byte-identical payloads.
 */
import { accumulateConfigSchema, type AccumulateConfig } from '../../../config/schema.js';
import type { RowInput } from '../../../processors/group-accumulator.js';
import type { Message, RolloutRow } from '../../../processors/types.js';
import { rowToJson } from '../../../json-form/form.js';

export const defaultAccumulateConfig: AccumulateConfig = accumulateConfigSchema.parse({});

export function accumulateConfig(overrides: Partial<AccumulateConfig> = {}): AccumulateConfig {
  return { ...defaultAccumulateConfig, ...overrides };
}

export function userMessage(tokens: number[]): Message {
  return { role: 'user', token_ids: Int32Array.from(tokens) };
}

export function generatedMessage(tokens: number[], logprobs?: number[]): Message {
  return {
    role: 'assistant',
    token_ids: Int32Array.from(tokens),
    generation_logprobs: Float32Array.from(logprobs ?? tokens.map(() => -0.5)),
  };
}

export interface RowSpec {
  group_id?: string;
  batch_id?: string;
  group_index?: number;
  num_generations?: number;
  /** Position inside the group (0..N-1); the global row_index is derived. */
  position?: number;
  prompt_idx?: number;
  agent?: string;
  task_index?: number | null;
  reward?: number;
}

/** A valid row; `row_index = group_index * N + position`. */
export function makeRow(spec: RowSpec = {}): RolloutRow {
  const n = spec.num_generations ?? 4;
  const groupIndex = spec.group_index ?? 0;
  const position = spec.position ?? 0;
  const rowIndex = groupIndex * n + position;
  const prompt = userMessage([1, 2, 3]);
  const row: RolloutRow = {
    batch_id: spec.batch_id ?? 'b0',
    group_id: spec.group_id ?? `g${groupIndex}`,
    group_index: groupIndex,
    row_index: rowIndex,
    num_generations: n,
    prompt_idx: spec.prompt_idx ?? 100 + groupIndex,
    agent_ref: { name: spec.agent ?? 'math' },
    weight_version: 7,
    request: { input: [{ role: 'user', content: 'add 1 and 2' }] },
    input_message_log: [prompt],
    message_log: [prompt, generatedMessage([10 + position, 11, 12])],
    full_result: { reward: spec.reward ?? position / 2, response: { output: [] } },
  };
  if (spec.task_index !== undefined) row.task_index = spec.task_index;
  return row;
}

/** All N rows of one group, in row order. */
export function makeGroup(spec: Omit<RowSpec, 'position'> = {}): RolloutRow[] {
  const n = spec.num_generations ?? 4;
  return Array.from({ length: n }, (_, position) => makeRow({ ...spec, position }));
}

/** The accumulator input of a row: the row object and its JSON-form bytes. */
export function rowInput(record: RolloutRow | Record<string, unknown>): RowInput {
  const json = 'message_log' in record && Array.isArray(record.message_log) && isRow(record)
    ? rowToJson(record)
    : record;
  return { record, payload: new TextEncoder().encode(JSON.stringify(json)) };
}

function isRow(r: object): r is RolloutRow {
  const log = (r as RolloutRow).message_log;
  return log.every((m) => m && m.token_ids instanceof Int32Array);
}

/** The same value with every object's keys in reverse order (another publisher's spelling of the same content). */
export const reversed = (v: unknown): unknown =>
  v === null || typeof v !== 'object' || ArrayBuffer.isView(v)
    ? v
    : Array.isArray(v)
      ? v.map(reversed)
      : Object.fromEntries(Object.entries(v as object).reverse().map(([k, x]) => [k, reversed(x)]));

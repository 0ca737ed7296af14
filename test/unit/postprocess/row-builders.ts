/**
 * Small builders for postprocess tests: messages, rows, groups and resolved
 * configs with only the fields a test cares about spelled out.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { postprocessConfigSchema } from '../../../config/schema.js';
import { resolvePostprocessConfig, type ResolvedPostprocessConfig } from '../../../processors/postprocess.js';
import type { JsonObject, JsonValue, Message, PromptGroup, RolloutRow } from '../../../processors/types.js';

export const FIXTURES_DIR = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');
/** Ids in fixtures/tokenizer.json: `<think>` = 7, `</think>` = 8 (single tokens); `<reason>` encodes to 3 ids. */
export const TOKENIZER_JSON = join(FIXTURES_DIR, 'tokenizer.json');

export function user(tokens: number[], extra: Partial<Message> = {}): Message {
  return { role: 'user', token_ids: Int32Array.from(tokens), ...extra };
}

/** A generated assistant turn: carries logprobs. */
export function gen(tokens: number[], extra: Partial<Message> = {}): Message {
  return {
    role: 'assistant',
    token_ids: Int32Array.from(tokens),
    generation_logprobs: new Float32Array(tokens.length),
    ...extra,
  };
}

/** An assistant turn without logprobs (prompt history). */
export function history(tokens: number[]): Message {
  return { role: 'assistant', token_ids: Int32Array.from(tokens) };
}

/** n distinct filler token ids (100, 101, ...), never 7 or 8. */
export function tokens(n: number): number[] {
  return Array.from({ length: n }, (_, i) => 100 + i);
}

export function reasoningItem(text: string, extra: JsonObject = {}): JsonObject {
  return { type: 'reasoning', summary: [{ type: 'summary_text', text }], ...extra };
}

export function messageItem(text: string, extra: JsonObject = {}): JsonObject {
  return { type: 'message', role: 'assistant', content: [{ type: 'output_text', text }], ...extra };
}

export interface RowSpec {
  reward?: number;
  output?: JsonValue[];
  fullResult?: JsonObject;
  messageLog?: Message[];
  prompt?: string;
  agent?: string;
  rowIndex?: number;
  weightVersion?: number;
}

/** A row of group `g-0` (batch `b-0`, N = 1 unless the group builder renumbers). */
export function row(spec: RowSpec = {}): RolloutRow {
  const messageLog = spec.messageLog ?? [user([1, 2]), gen([3, 4, 5])];
  return {
    batch_id: 'b-0',
    group_id: 'g-0',
    group_index: 0,
    row_index: spec.rowIndex ?? 0,
    num_generations: 1,
    prompt_idx: 42,
    task_index: null,
    agent_ref: { name: spec.agent ?? 'math' },
    weight_version: spec.weightVersion ?? 3,
    request: { input: [{ role: 'user', content: spec.prompt ?? 'solve it' }] },
    input_message_log: messageLog.slice(0, 1),
    message_log: messageLog,
    full_result: {
      reward: spec.reward ?? 1.0,
      response: { output: spec.output ?? [messageItem('42')] },
      ...spec.fullResult,
    },
  };
}

/** A complete group of `rows`, renumbered 0..N-1 with N = rows.length. */
export function group(rows: RolloutRow[], groupId = 'g-0'): PromptGroup {
  const n = rows.length;
  return {
    group_id: groupId,
    batch_id: 'b-0',
    group_index: 0,
    num_generations: n,
    prompt_idx: 42,
    task_index: null,
    rows: rows.map((r, i) => ({ ...r, group_id: groupId, row_index: i, num_generations: n })),
  };
}

/** Parses a raw `postprocess` block through the real schema, then resolves it. */
export function config(raw: Record<string, unknown> = {}): ResolvedPostprocessConfig {
  return resolvePostprocessConfig(postprocessConfigSchema.parse(raw), { configDir: FIXTURES_DIR });
}

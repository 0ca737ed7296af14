/**
 * Builders for ingest tests: NeMo-Gym output items, GymResult records with
 * only the fields a test cares about spelled out, and resolved ingest
 * configs parsed through the real schema.
 */
import { ingestConfigSchema } from '../../../config/schema.js';
import { ingestGymResult, type IngestOutcome } from '../../../processors/gym-ingest.js';
import { resolveIngestConfig, type ResolvedIngestConfig, type TokenDecoder } from '../../../processors/ingest-config.js';
import type { JsonObject, JsonValue, RolloutRow } from '../../../processors/types.js';

/** A generated `message` item: the model wrote `text` from `prompt` and produced `gen`. */
export function genItem(prompt: number[], gen: number[], extra: JsonObject = {}): JsonObject {
  return {
    type: 'message',
    role: 'assistant',
    content: [{ type: 'output_text', text: 'an answer' }],
    prompt_token_ids: prompt,
    generation_token_ids: gen,
    generation_log_probs: gen.map((_, i) => -0.25 * (i + 1)),
    ...extra,
  };
}

export function functionCallItem(name = 'search', extra: JsonObject = {}): JsonObject {
  return { type: 'function_call', call_id: 'call-1', name, arguments: '{"q":"x"}', ...extra };
}

export function functionCallOutputItem(output = 'result', extra: JsonObject = {}): JsonObject {
  return { type: 'function_call_output', call_id: 'call-1', output, ...extra };
}

export interface GymSpec {
  output?: JsonValue[];
  gymRow?: JsonObject;
  gymResult?: JsonObject;
  fields?: Record<string, unknown>;
}

/** A GymResult of group `g-0` (batch `b-0`, N = 1) whose response has `output`. */
export function gymRecord(spec: GymSpec = {}): Record<string, unknown> {
  return {
    batch_id: 'b-0',
    group_id: 'g-0',
    group_index: 0,
    row_index: 0,
    num_generations: 1,
    prompt_idx: 42,
    weight_version: 3,
    gym_row: {
      responses_create_params: { input: [{ role: 'user', content: 'solve it' }] },
      agent_ref: { name: 'math' },
      ...spec.gymRow,
    },
    gym_result: {
      reward: 1.0,
      response: { output: spec.output ?? [genItem([1, 2], [3, 4])] },
      ...spec.gymResult,
    },
    ...spec.fields,
  };
}

/** Parses a raw `ingest` block through the real schema, then resolves it. */
export function ingestCfg(raw: Record<string, unknown> = {}, decoder: TokenDecoder | null = null): ResolvedIngestConfig {
  return resolveIngestConfig(ingestConfigSchema.parse(raw), { configDir: '/nonexistent', decoder });
}

/** Converts and insists on success. */
export function ingestOk(record: unknown, cfg: ResolvedIngestConfig = ingestCfg()): RolloutRow {
  const out = ingestGymResult(record, cfg);
  if (!out.ok) throw new Error(`expected a row, got ${out.reason}: ${out.message}`);
  return out.row;
}

/** Converts and insists on a rejection. */
export function ingestRejected(record: unknown, cfg: ResolvedIngestConfig = ingestCfg()): Extract<IngestOutcome, { ok: false }> {
  const out = ingestGymResult(record, cfg);
  if (out.ok) throw new Error('expected a rejection, got a row');
  return out;
}

export const ids = (a: ArrayLike<number> | null | undefined): number[] => Array.from(a ?? []);

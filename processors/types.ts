/**
 * The records that flow between stages (SPEC §2–§5), as plain TypeScript
 * values. Field names are snake_case on purpose: they are the names of the
 * Avro schemas in `schemas/` and of the JSON form of SPEC §9, so one record
 * has one spelling everywhere (TS, Avro, JSON, Python).
 *
 * Tensors are typed arrays, never arrays of JS numbers. Free-form JSON
 * (`request`, `full_result`, `agent_ref`) is carried parsed here; the codec
 * turns it into a JSON string on the wire.
 */
import type { DeadLetterCode } from '../errors/codes.js';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Element types a tensor may have on the wire and in memory. */
export type DType = 'bool' | 'uint8' | 'int8' | 'int16' | 'int32' | 'int64' | 'float32' | 'float64';

export type TypedArray =
  | Uint8Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Float32Array
  | Float64Array;

/** A dense row-major tensor. `bool` is stored as a Uint8Array of 0/1, `int64` as a BigInt64Array. */
export interface Tensor {
  dtype: DType;
  shape: number[];
  data: TypedArray;
}

/**
 * One message of a conversation. A message is *generated* when its role is
 * `assistant` and it has `generation_logprobs`; other assistant messages are
 * prompt history.
 */
export interface Message {
  role: string;
  token_ids: Int32Array;
  generation_logprobs?: Float32Array | null;
  /** `[tokens, layers, topk]`, integer dtype chosen by the producer. */
  routed_experts?: Tensor | null;
  has_malformed_thinking?: boolean | null;
  is_invalid_tool_call?: boolean | null;
  content?: string | null;
  /** Named media tensors (images, audio features…), first dim is the item count. */
  media?: Record<string, Tensor> | null;
}

/** One finished rollout row as a rollout worker publishes it (SPEC §2). */
export interface RolloutRow {
  batch_id: string;
  group_id: string;
  group_index: number;
  row_index: number;
  num_generations: number;
  prompt_idx: number;
  task_index?: number | null;
  agent_ref: JsonObject;
  weight_version: number;
  instance_label?: string | null;
  request: JsonObject;
  input_message_log: Message[];
  message_log: Message[];
  full_result: JsonObject;
  timing?: Record<string, number> | null;
  /** Epoch milliseconds. */
  produced_at?: number | null;
}

/**
 * A raw NeMo-Gym result for one task row with the stream identity of §2
 * (SPEC §2.1). Accumulate converts it into the RolloutRow NeMo-RL's NeMo-Gym
 * actor would build (`processors/gym-ingest.ts`) before the §3 rules.
 */
export interface GymResult {
  batch_id: string;
  group_id: string;
  group_index: number;
  row_index: number;
  num_generations: number;
  prompt_idx: number;
  task_index?: number | null;
  weight_version: number;
  instance_label?: string | null;
  /** The task row as sent: `responses_create_params` (with `input`), `agent_ref`, verifier fields. */
  gym_row: JsonObject;
  /** NeMo-Gym's result: `response.output[]` items (token ids on generated ones), `reward`, verifier fields. */
  gym_result: JsonObject;
  timing?: Record<string, number> | null;
  /** Epoch milliseconds. */
  produced_at?: number | null;
}

/** Written once to every partition of the input topic when a producer finished a batch. */
export interface BatchEnd {
  batch_id: string;
  num_rows: number;
}

/** A complete prompt group, rows in row-index order (SPEC §3). */
export interface PromptGroup {
  group_id: string;
  batch_id: string;
  group_index: number;
  num_generations: number;
  prompt_idx: number;
  task_index: number | null;
  rows: RolloutRow[];
}

export interface ViolationCounts {
  num_invalid_tool_calls: number;
  num_malformed_thinking: number;
  num_assistant_messages: number;
  num_routed_experts_backfilled: number;
}

/** One row after postprocess (SPEC §4). */
export interface PenalizedRow {
  row_index: number;
  /** Final reward after effort shaping, penalties and length penalty. */
  total_reward: number;
  /** The verifier's reward before any shaping. */
  original_reward: number;
  truncated: boolean;
  /** Absent (null) when `mask_env_flagged_samples` is off. */
  mask_sample: boolean | null;
  /** `reward/<name>` values by name, or null when the row had none. */
  reward_components: Record<string, number> | null;
  violation_counts: ViolationCounts;
  agent_ref: JsonObject;
  weight_version: number;
  message_log: Message[];
}

/** A postprocessed group (SPEC §4): rows in row order plus group metrics. */
export interface PenalizedGroup {
  group_id: string;
  batch_id: string;
  group_index: number;
  num_generations: number;
  prompt_idx: number;
  weight_version: number;
  task_index: number | null;
  /** The prompt: `input_message_log` of the first row. */
  prompt: Message[];
  /** Sorted union of reward component names (the `reward/<name>` columns). */
  reward_component_names: string[];
  rows: PenalizedRow[];
  metrics: Record<string, number>;
}

/** Trainer-side dtype of a packed field (SPEC §5). */
export type TrainerDType = DType | 'object';

/**
 * One field of a packed group. Jagged fields hold one `values` buffer with
 * `offsets` (N+1 entries) over the rows; dense fields hold the full shape.
 */
export interface PackedField {
  name: string;
  /** dtype the trainer sees after decoding. */
  dtype: TrainerDType;
  layout: 'jagged' | 'dense';
  /** Jagged only: row offsets in elements of the first dim, N+1 entries, offsets[0] = 0. */
  offsets: BigInt64Array | null;
  /** Dense: full shape. Jagged: per-token trailing dims (`inner_shape`). */
  shape: number[];
  /** Values in the trainer dtype (the codec may narrow them on the wire). */
  values: TypedArray;
}

export interface PackedRowTags {
  weight_version: number;
  prompt_idx: number;
  group_id: string;
  num_invalid_tool_calls: number;
  num_malformed_thinking: number;
  num_assistant_messages: number;
  num_routed_experts_backfilled: number;
  /** `<field>__row_shapes`: per media field, this row's shapes. */
  row_shapes: Record<string, number[][]>;
}

/** The packed payload of one group (SPEC §5), ready for the trainer's `put_samples`. */
export interface PackedGroup {
  group_id: string;
  batch_id: string;
  sample_ids: string[];
  tags: PackedRowTags[];
  fields: PackedField[];
}

/** Machine-readable dead-letter reasons (SPEC §3, §4, runtime): the poison codes listed in errors/codes.ts. */
export type DeadLetterReason = DeadLetterCode;

/**
 * A dead-letter decision as a value, never an exception. `payloads` holds the
 * original bytes of the affected input records as the processor received them
 * (accumulate keeps them in its state), so nothing is lost; the runtime adds
 * source coordinates.
 */
export interface DeadLetterDecision {
  reason: DeadLetterReason;
  message: string;
  group_id: string | null;
  batch_id: string | null;
  row_indices: number[];
  missing_row_indices: number[];
  payloads: Uint8Array[];
}

export interface MetricsRecord {
  scope: 'group' | 'batch';
  group_id: string | null;
  batch_id: string;
  values: Record<string, number>;
}

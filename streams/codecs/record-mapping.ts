/**
 * In-memory records (processors/types.ts) ↔ the plain objects avsc reads and
 * writes for the schemas in `schemas/`. Tensors become byte views, free-form
 * JSON becomes JSON text. No copies of tensor data in either direction except
 * for unaligned views (see tensor-bytes.ts).
 */
import type {
  BatchEnd,
  GymResult,
  JsonObject,
  Message,
  PenalizedRow,
  RolloutRow,
  Tensor,
} from '../../processors/types.js';
import { assembleGymColumns, type GymItemColumns, markColumnsProblem, splitGymColumns } from '../../processors/gym-columns.js';
import type { GroupRecord, PenalizedRecord, RowRef } from './row-refs.js';
import { bytesOf, float32From, int32From, isDType, typedArrayFrom } from './tensor-bytes.js';
import { UndecodableError } from './wire-format.js';

const NS = 'dev.rolloutstream.v1';
export const ROW_BRANCH = `${NS}.RolloutRow`;
export const BATCH_END_BRANCH = `${NS}.BatchEnd`;
export const GYM_RESULT_BRANCH = `${NS}.GymResult`;

/* eslint-disable @typescript-eslint/no-explicit-any */
type AvroObject = Record<string, any>;

function parseJsonObject(text: string, field: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    throw new UndecodableError(`${field} is not valid JSON`, { cause });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new UndecodableError(`${field} must be a JSON object`);
  }
  return value as JsonObject;
}

function tensorToAvro(t: Tensor): AvroObject {
  return { dtype: t.dtype, shape: t.shape, data: bytesOf(t.data) };
}

function tensorFromAvro(o: AvroObject): Tensor {
  if (!isDType(o.dtype)) throw new UndecodableError(`unknown tensor dtype ${JSON.stringify(o.dtype)}`);
  return { dtype: o.dtype, shape: o.shape.map(Number), data: typedArrayFrom(o.dtype, o.data) };
}

function mediaToAvro(media: Record<string, Tensor> | null | undefined): AvroObject | null {
  if (!media) return null;
  const out: AvroObject = {};
  for (const [k, v] of Object.entries(media)) out[k] = tensorToAvro(v);
  return out;
}

function mediaFromAvro(media: AvroObject | null): Record<string, Tensor> | null {
  if (!media) return null;
  const out: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(media)) out[k] = tensorFromAvro(v as AvroObject);
  return out;
}

export function messageToAvro(m: Message): AvroObject {
  return {
    role: m.role,
    token_ids: bytesOf(m.token_ids),
    generation_logprobs: m.generation_logprobs ? bytesOf(m.generation_logprobs) : null,
    routed_experts: m.routed_experts ? tensorToAvro(m.routed_experts) : null,
    has_malformed_thinking: m.has_malformed_thinking ?? null,
    is_invalid_tool_call: m.is_invalid_tool_call ?? null,
    content: m.content ?? null,
    media: mediaToAvro(m.media),
  };
}

/** Absent optional fields stay absent (not null): presence carries meaning, e.g. a generated turn has logprobs. */
export function messageFromAvro(o: AvroObject): Message {
  try {
    const m: Message = { role: o.role, token_ids: int32From(o.token_ids) };
    if (o.generation_logprobs !== null) m.generation_logprobs = float32From(o.generation_logprobs);
    if (o.routed_experts !== null) m.routed_experts = tensorFromAvro(o.routed_experts);
    if (o.has_malformed_thinking !== null) m.has_malformed_thinking = o.has_malformed_thinking;
    if (o.is_invalid_tool_call !== null) m.is_invalid_tool_call = o.is_invalid_tool_call;
    if (o.content !== null) m.content = o.content;
    if (o.media !== null) m.media = mediaFromAvro(o.media);
    return m;
  } catch (cause) {
    if (cause instanceof UndecodableError) throw cause;
    throw new UndecodableError(`message tensor bytes are malformed: ${(cause as Error).message}`, { cause });
  }
}

/**
 * The stream identity of SPEC §2 shared by RolloutRow and GymResult, in
 * both directions (avsc writes fields in schema order, so key order here
 * does not matter); absent optionals are null.
 */
function identity(o: AvroObject | RolloutRow | GymResult) {
  return {
    batch_id: o.batch_id,
    group_id: o.group_id,
    group_index: o.group_index,
    row_index: o.row_index,
    num_generations: o.num_generations,
    prompt_idx: o.prompt_idx,
    task_index: o.task_index ?? null,
    weight_version: o.weight_version,
    instance_label: o.instance_label ?? null,
    timing: o.timing ?? null,
    produced_at: o.produced_at ?? null,
  };
}

export function rowToAvro(r: RolloutRow): AvroObject {
  return {
    ...identity(r),
    agent_ref: JSON.stringify(r.agent_ref),
    request: JSON.stringify(r.request),
    input_message_log: r.input_message_log.map(messageToAvro),
    message_log: r.message_log.map(messageToAvro),
    full_result: JSON.stringify(r.full_result),
  };
}

export function rowFromAvro(o: AvroObject): RolloutRow {
  return {
    ...identity(o),
    agent_ref: parseJsonObject(o.agent_ref, 'agent_ref'),
    request: parseJsonObject(o.request, 'request'),
    input_message_log: o.input_message_log.map(messageFromAvro),
    message_log: o.message_log.map(messageFromAvro),
    full_result: parseJsonObject(o.full_result, 'full_result'),
  };
}

function gymColumnsToAvro(c: GymItemColumns): AvroObject {
  const bytes = (b: Uint8Array | null) => (b === null ? null : Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  const r = c.routed_experts;
  return {
    item: c.item,
    prompt_token_ids: bytes(c.prompt_token_ids),
    generation_token_ids: bytes(c.generation_token_ids),
    generation_log_probs: bytes(c.generation_log_probs),
    routed_experts: r === null ? null : { form: r.form, dtype: r.dtype, shape: r.shape, data: bytes(r.data) },
  };
}

function gymColumnsFromAvro(o: AvroObject): GymItemColumns {
  const r = o.routed_experts as AvroObject | null;
  return {
    item: o.item,
    prompt_token_ids: o.prompt_token_ids,
    generation_token_ids: o.generation_token_ids,
    generation_log_probs: o.generation_log_probs,
    routed_experts: r === null ? null : { form: r.form, dtype: r.dtype, shape: r.shape, data: r.data },
  };
}

/**
 * Version 2 (processors/gym-columns.ts): the output items' token ids,
 * logprobs and routes that pass the column rules travel as bytes in
 * `columns` (always a list, possibly empty); the rest as JSON text. Items may
 * hold plain lists or typed arrays.
 */
export function gymResultToAvro(g: GymResult): AvroObject {
  const { json, columns } = splitGymColumns(g.gym_result);
  return { ...identity(g), gym_row: JSON.stringify(g.gym_row), gym_result: JSON.stringify(json), columns: columns.map(gymColumnsToAvro) };
}

/**
 * Version 1 (`columns` null: every number in the JSON text) or 2 (the
 * columns put back: token ids as Int32Array, logprobs as Float64Array).
 * Columns that do not fit the JSON (an item that is not there, a key also in
 * the JSON, a byte count that is not whole values) do not throw: the record
 * decodes with its JSON as sent and carries the problem (`columnsProblem`),
 * which the ingest step reports as `invalid_row` naming the field. An
 * UndecodableError here would make it `undecodable`, a reason for bytes that
 * are not a record at all, and the message would lose the field; assembling
 * lazily in the ingest step instead would leave every other reader (replay
 * identity, `replay`, `trace`) with two forms of one result.
 */
export function gymResultFromAvro(o: AvroObject): GymResult {
  const result: GymResult = { ...identity(o), gym_row: parseJsonObject(o.gym_row, 'gym_row'), gym_result: parseJsonObject(o.gym_result, 'gym_result') };
  if (o.columns == null) return result;
  const problem = assembleGymColumns(result.gym_result, (o.columns as AvroObject[]).map(gymColumnsFromAvro));
  return problem === null ? result : markColumnsProblem(result, problem);
}

export type RowCompletedEvent =
  | { kind: 'row'; row: RolloutRow }
  | { kind: 'gym_result'; result: GymResult }
  | { kind: 'batch_end'; end: BatchEnd };

export function rowCompletedToAvro(e: RowCompletedEvent): AvroObject {
  switch (e.kind) {
    case 'row':
      return { event: { [ROW_BRANCH]: rowToAvro(e.row) } };
    case 'gym_result':
      return { event: { [GYM_RESULT_BRANCH]: gymResultToAvro(e.result) } };
    case 'batch_end':
      return { event: { [BATCH_END_BRANCH]: { batch_id: e.end.batch_id, num_rows: e.end.num_rows } } };
  }
}

export function rowCompletedFromAvro(o: AvroObject): RowCompletedEvent {
  const ev = o.event as AvroObject;
  if (ev[ROW_BRANCH]) return { kind: 'row', row: rowFromAvro(ev[ROW_BRANCH]) };
  if (ev[GYM_RESULT_BRANCH]) return { kind: 'gym_result', result: gymResultFromAvro(ev[GYM_RESULT_BRANCH]) };
  if (ev[BATCH_END_BRANCH]) return { kind: 'batch_end', end: { ...ev[BATCH_END_BRANCH] } as BatchEnd };
  throw new UndecodableError('row-completed event is neither a RolloutRow, a GymResult nor a BatchEnd');
}

/** Offsets are strings in memory and Avro longs on the wire (row-completed offsets stay far below 2^53). */
function refsToAvro(refs: RowRef[] | undefined): AvroObject[] | null {
  return refs ? refs.map((r) => ({ partition: r.partition, offset: Number(r.offset) })) : null;
}

function refsFromAvro(refs: AvroObject[] | null): RowRef[] | null {
  return refs ? refs.map((r) => ({ partition: r.partition, offset: String(r.offset) })) : null;
}

/** A reference record's ingest fingerprint, when it has one (records written before them have none). */
const fingerprintOf = (o: AvroObject): { ingest_fingerprint?: string } => (typeof o.ingest_fingerprint === 'string' ? { ingest_fingerprint: o.ingest_fingerprint } : {});

/** With `row_refs` the reference form: no rows (row-refs.ts). */
export function groupToAvro(g: GroupRecord): AvroObject {
  return {
    group_id: g.group_id,
    batch_id: g.batch_id,
    group_index: g.group_index,
    num_generations: g.num_generations,
    prompt_idx: g.prompt_idx,
    task_index: g.task_index,
    row_refs: refsToAvro(g.row_refs),
    ingest_fingerprint: g.row_refs ? (g.ingest_fingerprint ?? null) : null,
    rows: g.row_refs ? [] : g.rows.map(rowToAvro),
  };
}

export function groupFromAvro(o: AvroObject): GroupRecord {
  const refs = refsFromAvro(o.row_refs ?? null);
  const head = {
    group_id: o.group_id,
    batch_id: o.batch_id,
    group_index: o.group_index,
    num_generations: o.num_generations,
    prompt_idx: o.prompt_idx,
    task_index: o.task_index,
  };
  if (refs) return { ...head, rows: [], row_refs: refs, ...fingerprintOf(o), unresolved: true };
  return { ...head, rows: o.rows.map(rowFromAvro) };
}

/** In reference form a row keeps what postprocess computed; its agent ref and message log stay in its row-completed record. */
function penalizedRowToAvro(r: PenalizedRow, byReference: boolean): AvroObject {
  return {
    row_index: r.row_index,
    total_reward: r.total_reward,
    original_reward: r.original_reward,
    truncated: r.truncated,
    mask_sample: r.mask_sample,
    reward_components: r.reward_components,
    violation_counts: { ...r.violation_counts },
    agent_ref: byReference ? null : JSON.stringify(r.agent_ref),
    weight_version: r.weight_version,
    message_log: byReference ? null : r.message_log.map(messageToAvro),
  };
}

function penalizedRowFromAvro(o: AvroObject): PenalizedRow {
  return {
    row_index: o.row_index,
    total_reward: o.total_reward,
    original_reward: o.original_reward,
    truncated: o.truncated,
    mask_sample: o.mask_sample,
    reward_components: o.reward_components,
    violation_counts: { ...o.violation_counts },
    agent_ref: o.agent_ref === null ? {} : parseJsonObject(o.agent_ref, 'agent_ref'),
    weight_version: o.weight_version,
    message_log: o.message_log === null ? [] : o.message_log.map(messageFromAvro),
  };
}

/** With `row_refs` the reference form (row-refs.ts). */
export function penalizedToAvro(g: PenalizedRecord): AvroObject {
  const byReference = g.row_refs !== undefined;
  return {
    group_id: g.group_id,
    batch_id: g.batch_id,
    group_index: g.group_index,
    num_generations: g.num_generations,
    prompt_idx: g.prompt_idx,
    weight_version: g.weight_version,
    task_index: g.task_index,
    rows: g.rows.map((r) => penalizedRowToAvro(r, byReference)),
    prompt: byReference ? null : g.prompt.map(messageToAvro),
    reward_component_names: g.reward_component_names,
    metrics: g.metrics,
    row_refs: refsToAvro(g.row_refs),
    ingest_fingerprint: byReference ? (g.ingest_fingerprint ?? null) : null,
  };
}

/**
 * A reference record decodes `unresolved`: empty prompt, message logs and
 * agent refs until row-refs.ts `penalizedWithRows` puts its rows' back. A
 * full record written with null in those fields (never by us) is malformed.
 */
export function penalizedFromAvro(o: AvroObject): PenalizedRecord {
  const refs = refsFromAvro(o.row_refs ?? null);
  if (!refs && (o.prompt === null || o.rows.some((r: AvroObject) => r.message_log === null || r.agent_ref === null))) {
    throw new UndecodableError('penalized record without row references lacks its prompt, message logs or agent refs');
  }
  if (refs && refs.length !== o.rows.length) throw new UndecodableError(`penalized record has ${o.rows.length} rows and ${refs.length} row references`);
  const g: PenalizedRecord = {
    group_id: o.group_id,
    batch_id: o.batch_id,
    group_index: o.group_index,
    num_generations: o.num_generations,
    prompt_idx: o.prompt_idx,
    weight_version: o.weight_version,
    task_index: o.task_index,
    rows: o.rows.map(penalizedRowFromAvro),
    prompt: o.prompt === null ? [] : o.prompt.map(messageFromAvro),
    reward_component_names: o.reward_component_names,
    metrics: o.metrics,
  };
  return refs ? { ...g, row_refs: refs, ...fingerprintOf(o), unresolved: true } : g;
}

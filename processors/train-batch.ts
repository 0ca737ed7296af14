/**
 * record_to_train_batch (SPEC §5.1–5.4; REFERENCE-NOTES 29–34): one
 * penalized group → the columns the trainer consumes, already in the jagged
 * layout.
 *
 * The reference flattens into padded [N, S] tensors and strips the padding
 * again when packing. Here every per-token column is sized from the row
 * lengths first, allocated once at its final size, and each message is
 * written once into its place (`TypedArray.set`/`fill`, or a word loop for
 * int32 → int64), so no padded or intermediate copy exists.
 */
import type { PackConfig } from '../config/schema.js';
import { jaggedOffsets } from './jagged-pack.js';
import { isGeneratedAssistant, messageViolationFlags } from './message-violation-masks.js';
import { type MediaPack, packMediaFields } from './media-fields.js';
import { PackError } from './pack-error.js';
import { type PromptIdsForAdv, buildPromptIdsForAdv, cutPromptPrefix, promptTokenCount } from './prompt-prefix.js';
import { MISSING_ROUTE_SENTINEL, type RoutedExpertsBackfill, backfillMissingRoutedExperts } from './routed-experts-backfill.js';
import { type RowFields, buildRowFields } from './row-fields.js';
import { copyElements, int64Words, writeInt32AsInt64 } from './typed-arrays.js';
import type { Message, PenalizedGroup, ViolationCounts } from './types.js';

export type RoutedExpertsDType = PackConfig['routed_experts_dtype'];

export interface RoutedExpertsColumn {
  dtype: RoutedExpertsDType;
  layers: number;
  topk: number;
  /** `[total tokens, layers, topk]` row-major, −1 where a message had no routes. */
  values: Int8Array | Int16Array | Int32Array;
}

export interface TrainBatch extends RowFields {
  n: number;
  /** int32 [N]: tokens per row, all messages. */
  inputLengths: Int32Array;
  /** int64 [N+1]: shared by every per-token column. */
  offsets: BigInt64Array;
  inputIds: BigInt64Array;
  /** float32, zeros over messages without logprobs. */
  generationLogprobs: Float32Array;
  /** int64 (the token ids' dtype), 1 over generated assistant messages. */
  tokenMask: BigInt64Array;
  /** Absent when no message of the group has routes. */
  routedExperts: RoutedExpertsColumn | null;
  /** bool 0/1, only with `include_message_violation_fields`. */
  invalidToolCallMask: Uint8Array | null;
  malformedThinkingMask: Uint8Array | null;
  promptIdsForAdv: PromptIdsForAdv;
  /** Per row, from postprocess, with `num_routed_experts_backfilled` computed here. */
  violationCounts: ViolationCounts[];
  media: MediaPack;
}

/**
 * Converts one penalized group into its train batch: backfill routes, cut
 * each row's prompt prefix against the group's prompt length, then flatten
 * every per-token column over each row's messages. Pure: inputs are not
 * modified and share no memory with the result.
 *
 * @throws PackError `pack_empty_group` when the group has no rows,
 *   `pack_misaligned_logprobs` when a message's logprobs are not one per
 *   token, `pack_bad_routed_experts` / `pack_bad_media` as described by
 *   `backfillMissingRoutedExperts` / `packMediaFields`.
 */
export function recordToTrainBatch(group: PenalizedGroup, cfg: PackConfig): TrainBatch {
  const n = group.rows.length;
  if (n === 0) throw new PackError('pack_empty_group', `group ${group.group_id} has no rows`);
  const logs = group.rows.map((r) => r.message_log);

  // Kept ahead of the prompt cut as in the reference, whose prompt flatten
  // reuses the backfilled message objects; here the cut only reads token counts.
  const backfill = backfillMissingRoutedExperts(logs);
  const promptLength = promptTokenCount(group.prompt);
  const cuts = logs.map((log) => cutPromptPrefix(log, promptLength));
  const promptIdsForAdv = buildPromptIdsForAdv(logs, cuts, cfg.pad_values['token_ids'] ?? 0);

  const inputLengths = new Int32Array(n);
  logs.forEach((log, row) => {
    let len = 0;
    for (const m of log) {
      const lp = m.generation_logprobs;
      if (lp != null && lp.length !== m.token_ids.length) {
        throw new PackError('pack_misaligned_logprobs', `${m.role} message has ${m.token_ids.length} tokens but ${lp.length} logprobs`, row);
      }
      len += m.token_ids.length;
    }
    inputLengths[row] = len;
  });
  const offsets = jaggedOffsets(inputLengths);
  const total = Number(offsets[n]!);

  const columns = allocateColumns(total, backfill, cfg);
  let cursor = 0;
  for (const log of logs) {
    for (const m of log) {
      writeMessage(columns, cursor, m);
      cursor += m.token_ids.length;
    }
  }

  const violationCounts = group.rows.map((r, row) => ({
    ...r.violation_counts,
    num_routed_experts_backfilled: backfill === null ? 0 : backfill.backfilled[row]!,
  }));

  return {
    n,
    inputLengths,
    offsets,
    inputIds: columns.inputIds,
    generationLogprobs: columns.generationLogprobs,
    tokenMask: columns.tokenMask,
    routedExperts: columns.routedExperts,
    invalidToolCallMask: columns.invalidToolCallMask,
    malformedThinkingMask: columns.malformedThinkingMask,
    promptIdsForAdv,
    ...buildRowFields(group),
    violationCounts,
    media: packMediaFields(logs),
  };
}

interface Columns {
  inputIds: BigInt64Array;
  inputIdWords: Int32Array;
  generationLogprobs: Float32Array;
  tokenMask: BigInt64Array;
  routedExperts: RoutedExpertsColumn | null;
  invalidToolCallMask: Uint8Array | null;
  malformedThinkingMask: Uint8Array | null;
}

function allocateColumns(total: number, backfill: RoutedExpertsBackfill | null, cfg: PackConfig): Columns {
  const inputIds = new BigInt64Array(total);
  let routedExperts: RoutedExpertsColumn | null = null;
  if (backfill !== null) {
    const size = total * backfill.layers * backfill.topk;
    const dtype = cfg.routed_experts_dtype;
    const values = dtype === 'int8' ? new Int8Array(size) : dtype === 'int32' ? new Int32Array(size) : new Int16Array(size);
    routedExperts = { dtype, layers: backfill.layers, topk: backfill.topk, values };
  }
  const masks = cfg.include_message_violation_fields;
  return {
    inputIds,
    inputIdWords: int64Words(inputIds),
    generationLogprobs: new Float32Array(total),
    tokenMask: new BigInt64Array(total),
    routedExperts,
    invalidToolCallMask: masks ? new Uint8Array(total) : null,
    malformedThinkingMask: masks ? new Uint8Array(total) : null,
  };
}

/** Writes one message's tokens at `[at, at + tokens)` of every column; zero-filled columns need no write for zeros. */
function writeMessage(c: Columns, at: number, m: Message): void {
  const ids = m.token_ids;
  const end = at + ids.length;
  writeInt32AsInt64(c.inputIdWords, at, ids);
  const lp = m.generation_logprobs;
  if (lp != null) c.generationLogprobs.set(lp, at);
  if (isGeneratedAssistant(m)) {
    c.tokenMask.fill(1n, at, end);
    const flags = messageViolationFlags(m);
    if (flags.invalidToolCall) c.invalidToolCallMask?.fill(1, at, end);
    if (flags.malformedThinking) c.malformedThinkingMask?.fill(1, at, end);
  }
  const re = c.routedExperts;
  if (re !== null) {
    const stride = re.layers * re.topk;
    const block = m.routed_experts;
    if (block != null) copyElements(re.values, at * stride, block.data);
    else re.values.fill(MISSING_ROUTE_SENTINEL, at * stride, end * stride);
  }
}

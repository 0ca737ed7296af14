/**
 * pack_payload planned ahead (SPEC §5.5–5.6): the packed group's sample ids,
 * per-row tags and every field's name, dtype, layout, shape, offsets and
 * element count, fixed before any value is written, so that the output
 * memory of the whole group — a slab, or the framed Kafka value itself — can
 * be laid out first and every column written once, in place.
 *
 * Fields come in a fixed order: input_ids, input_lengths,
 * generation_logprobs, token_mask, sample_mask, prompt_ids_for_adv,
 * [mask_sample], truncated, total_reward, reward/<name>…, [routed_experts],
 * [invalid_tool_call_mask, malformed_thinking_mask], media fields (sorted).
 */
import { jaggedOffsets } from './jagged-pack.js';
import type { MediaFieldPlan } from './media-fields.js';
import { INVALID_TOOL_CALL_MASK, MALFORMED_THINKING_MASK } from './message-violation-masks.js';
import type { PackedLayout, PlannedField } from './slab.js';
import type { DType, Message, PackedGroup, PackedRowTags, PenalizedGroup, TypedArray, ViolationCounts } from './types.js';

/** What the layout needs from the planning pass (`planTrainBatch`). */
export interface LayoutInputs {
  group: PenalizedGroup;
  logs: readonly (readonly Message[])[];
  offsets: BigInt64Array;
  /** Width of `prompt_ids_for_adv`. */
  width: number;
  /** `[dtype, layers, topk]` of routed_experts, or null when no message has routes. */
  routes: { dtype: DType; layers: number; topk: number } | null;
  violationFields: boolean;
  media: readonly MediaFieldPlan[];
  violationCounts: readonly ViolationCounts[];
}

/** Where each column of the batch sits in the layout's field list (−1: absent). */
export interface FieldIndex {
  inputIds: number;
  inputLengths: number;
  generationLogprobs: number;
  tokenMask: number;
  sampleMask: number;
  promptIds: number;
  maskSample: number;
  truncated: number;
  totalReward: number;
  /** One per `reward_component_names`, in order. */
  rewards: number[];
  routedExperts: number;
  invalidToolCallMask: number;
  malformedThinkingMask: number;
  /** One per media plan, in order. */
  media: number[];
}

/** The packed layout of a planned group and where each column lands in it. */
export function planPackedLayout(p: LayoutInputs): { layout: PackedLayout; index: FieldIndex } {
  const n = p.logs.length;
  const tokens = Number(p.offsets[n]!);
  const fields: PlannedField[] = [];
  const jagged = (name: string, dtype: DType, offsets: BigInt64Array, shape: number[], length: number) =>
    fields.push({ name, dtype, layout: 'jagged', offsets, shape, length }) - 1;
  const dense = (name: string, dtype: DType, shape: number[]) =>
    fields.push({ name, dtype, layout: 'dense', offsets: null, shape, length: shape.reduce((a, b) => a * b, 1) }) - 1;

  const inputIds = jagged('input_ids', 'int64', p.offsets, [], tokens);
  const inputLengths = dense('input_lengths', 'int32', [n]);
  const generationLogprobs = jagged('generation_logprobs', 'float32', p.offsets, [], tokens);
  const tokenMask = jagged('token_mask', 'int64', p.offsets, [], tokens);
  const sampleMask = dense('sample_mask', 'float32', [n]);
  const promptIds = dense('prompt_ids_for_adv', 'int64', [n, p.width]);
  const maskSample = p.group.rows.some((r) => r.mask_sample != null) ? dense('mask_sample', 'bool', [n]) : -1;
  const truncated = dense('truncated', 'bool', [n]);
  const totalReward = dense('total_reward', 'float32', [n]);
  const rewards = p.group.reward_component_names.map((c) => dense(`reward/${c}`, 'float32', [n]));
  const re = p.routes;
  const routedExperts = re === null ? -1 : jagged('routed_experts', re.dtype, p.offsets, [re.layers, re.topk], tokens * re.layers * re.topk);
  const invalidToolCallMask = p.violationFields ? jagged(INVALID_TOOL_CALL_MASK, 'bool', p.offsets, [], tokens) : -1;
  const malformedThinkingMask = p.violationFields ? jagged(MALFORMED_THINKING_MASK, 'bool', p.offsets, [], tokens) : -1;
  const { rowShapes, lengths } = mediaRows(p.logs, p.media);
  const media = p.media.map((m, k) => jagged(m.name, m.dtype, jaggedOffsets(lengths[k]!), m.trailing ?? [], m.elements));

  const g = p.group;
  const sample_ids: string[] = [];
  const tags: PackedRowTags[] = [];
  for (let i = 0; i < n; i++) {
    sample_ids.push(`${g.group_id}_g${i}`);
    const counts = p.violationCounts[i]!;
    tags.push({
      weight_version: g.weight_version,
      prompt_idx: g.prompt_idx,
      group_id: g.group_id,
      num_invalid_tool_calls: counts.num_invalid_tool_calls,
      num_malformed_thinking: counts.num_malformed_thinking,
      num_assistant_messages: counts.num_assistant_messages,
      num_routed_experts_backfilled: counts.num_routed_experts_backfilled,
      row_shapes: rowShapes[i]!,
    });
  }
  return {
    layout: { group_id: g.group_id, batch_id: g.batch_id, sample_ids, tags, fields },
    index: {
      inputIds,
      inputLengths,
      generationLogprobs,
      tokenMask,
      sampleMask,
      promptIds,
      maskSample,
      truncated,
      totalReward,
      rewards,
      routedExperts,
      invalidToolCallMask,
      malformedThinkingMask,
      media,
    },
  };
}

/**
 * Per row, each media field's segment shapes (`<field>__row_shapes`, [] when
 * the row has none), and per field the row lengths its offsets count: dim-0
 * items when the trailing dims agree, else elements (see media-fields.ts).
 */
function mediaRows(
  logs: readonly (readonly Message[])[],
  plans: readonly MediaFieldPlan[],
): { rowShapes: Record<string, number[][]>[]; lengths: number[][] } {
  const rowShapes = logs.map(() => {
    const shapes: Record<string, number[][]> = {};
    for (const p of plans) shapes[p.name] = [];
    return shapes;
  });
  const lengths = plans.map((plan) => {
    const perRow = new Array<number>(logs.length).fill(0);
    logs.forEach((log, row) => {
      for (const m of log) {
        const t = m.media?.[plan.name];
        if (t == null) continue;
        perRow[row]! += plan.trailing === null ? t.data.length : t.shape[0]!;
        rowShapes[row]![plan.name]!.push([...t.shape]);
      }
    });
    return perRow;
  });
  return { rowShapes, lengths };
}

/** The packed group of a layout whose values were written into `views` (no copy). */
export function assemblePacked(layout: PackedLayout, views: readonly TypedArray[]): PackedGroup {
  return {
    group_id: layout.group_id,
    batch_id: layout.batch_id,
    sample_ids: layout.sample_ids,
    tags: layout.tags,
    fields: layout.fields.map((f, i) => ({ name: f.name, dtype: f.dtype, layout: f.layout, offsets: f.offsets, shape: f.shape, values: views[i]! })),
  };
}

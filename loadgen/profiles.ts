/**
 * Load profiles: the knobs that decide what synthetic rows look like and
 * how fast they arrive. A profile is data, not code, so a caller can start
 * from one and override any knob (`resolveShape`).
 */
import { validateLengthSpec, type LengthSpec } from './length-sampler.js';
import { DEFAULT_VOCAB, validateRoutesSpec, type RoutesSpec, type VocabRange } from './tokens.js';

/** Media tensors attached to the prompt message of some groups (uint8 pixels, first dim = item count). */
export interface MediaSpec {
  /** Fraction of groups whose prompt carries media. */
  groupRate: number;
  /** Key in `Message.media`. */
  name: string;
  /** Shape of one item, e.g. `[3, 32, 32]`. */
  itemShape: number[];
  /** Items per prompt are drawn from `[1, maxItems]`. */
  maxItems: number;
}

/**
 * Everything about the content of one row. Rates are probabilities; "per
 * group" rates are drawn once per prompt group (all rows of a group share
 * the prompt, the agent, the task and the request).
 */
export interface RowShape {
  /** Regular token ids are drawn from `[min, max)`; special ids (think tags, EOS) are added on top. */
  vocab: VocabRange;
  /** Tokens of the first user message (the prompt, `input_message_log`). */
  promptTokens: LengthSpec;
  /** Tokens of each later user message (tool output or follow-up prompt). */
  userTurnTokens: LengthSpec;
  /** All generated tokens of a row, split over its assistant turns; the tail at `max` is the per-response output cap. */
  generatedTokens: LengthSpec;
  /** Context budget of a row: longer conversations are cut to exactly this many tokens (`incomplete_details.reason = "length"`). */
  maxTotalTokens: number;
  /** Assistant turns per row: 1, plus another turn with `continueProbability` each, up to `max`. */
  turns: { max: number; continueProbability: number };
  /** Per non-final turn: it ends in a tool call (else in a message followed by a new user prompt). */
  toolCallRate: number;
  /** Per multi-turn row: the agent stopped right after a tool call (last output item is a `function_call`). */
  endsWithToolCallRate: number;
  /** Per group: thinking mode (user turns end with `<think>`, assistant turns hold one `</think>`, reasoning items present). */
  thinkingGroupRate: number;
  /** Thinking mode: share of a turn's tokens spent before `</think>` is drawn from `[min, max]`. */
  reasoningShare: { min: number; max: number };
  rewards: {
    /** Per group: rewards are 0/1 (else graded in [0, 1]). */
    binaryGroupRate: number;
    /** Per group: every row gets the same reward (no learning signal). */
    allEqualGroupRate: number;
    /** Per group: rows carry `reward_components` summing to the reward. */
    componentsGroupRate: number;
  };
  flags: {
    /** Per generated message: `is_invalid_tool_call: true`. */
    invalidToolCallRate: number;
    /** Per generated message: malformed thinking (the flag, a stray think token, or a think tag in `generation_str`). */
    malformedThinkingRate: number;
    /** Per row: the final answer text is empty or blank. */
    emptyAnswerRate: number;
    /** Per thinking-mode row: the final reasoning summary equals the answer text. */
    duplicatedReasoningRate: number;
    /** Per final message item: carries `generation_str`. */
    generationStrRate: number;
    /** Per final message item: content is a plain string instead of a list of parts. */
    stringContentRate: number;
    /** Per row: flagged `mask_sample` (in `full_result` or `instance_config`, with varied truthy values). */
    maskSampleRate: number;
    /** Per row: `incomplete_details.reason = "content_filter"` (not a truncation). */
    contentFilterRate: number;
    /** Per generated message: one token replaced by `UNWANTED_TOKEN_ID` (`<|endoftext|>`). */
    strayTokenRate: number;
  };
  /** Per group: the last user message of `request.input` contains `marker` (SPEC §4.1 `low_string`). */
  lowEffort: { marker: string; groupRate: number };
  /** Per group: rows carry `task_index`, drawn from `[0, numTasks)`. */
  taskIndex: { groupRate: number; numTasks: number };
  /** Routed experts on generated messages, or null for none. */
  routes: RoutesSpec | null;
  /** Media on the prompt message, or null for none. */
  media: MediaSpec | null;
  /** Agent names (`agent_ref.name`), one per group. */
  agents: string[];
  /** Rollout actors (`instance_label`); groups are spread over them. */
  actors: number;
  /** Characters of text per generated token in `full_result` (≈4 for English BPE); 0 keeps texts minimal. */
  textCharsPerToken: number;
  /** `prompt_idx` is drawn from `[0, datasetSize)`. */
  datasetSize: number;
  /** Off-policy lag: a group's `weight_version` is the batch's version minus `[0, maxWeightLag]`. */
  maxWeightLag: number;
}

export type ProfileName = 'default' | 'published-max' | 'router-replay' | 'router-replay-32k' | 'small';

/** A named load profile. `generations`/`groupsPerBatch` are the sizes a CLI should use when none are given. */
export interface Profile {
  name: ProfileName;
  description: string;
  /** Mean row arrival rate the delay hints model (rows/s). */
  rowsPerSecond: number;
  generations: number;
  groupsPerBatch: number;
  /** Rows of a batch complete out of order within a sliding window of this many groups. */
  reorderWindowGroups: number;
  shape: RowShape;
}

const DEFAULT_SHAPE: RowShape = {
  vocab: DEFAULT_VOCAB,
  promptTokens: { median: 200, sigma: 0.8, min: 8, max: 4096 },
  userTurnTokens: { median: 120, sigma: 0.9, min: 4, max: 4096 },
  // A cap of 8k puts ≈2% of rows at max_output_tokens, a truncation rate real runs show.
  generatedTokens: { median: 800, sigma: 1.1, min: 4, max: 8192 },
  maxTotalTokens: 32768,
  turns: { max: 8, continueProbability: 0.35 },
  toolCallRate: 0.7,
  endsWithToolCallRate: 0.05,
  thinkingGroupRate: 0.7,
  reasoningShare: { min: 0.5, max: 0.95 },
  rewards: { binaryGroupRate: 0.6, allEqualGroupRate: 0.15, componentsGroupRate: 0.3 },
  flags: {
    invalidToolCallRate: 0.02,
    malformedThinkingRate: 0.02,
    emptyAnswerRate: 0.02,
    duplicatedReasoningRate: 0.01,
    generationStrRate: 0.3,
    stringContentRate: 0.2,
    maskSampleRate: 0.02,
    contentFilterRate: 0.005,
    strayTokenRate: 0.005,
  },
  lowEffort: { marker: 'Reasoning effort: low', groupRate: 0.2 },
  taskIndex: { groupRate: 0.5, numTasks: 16 },
  routes: null,
  media: { groupRate: 0.05, name: 'image', itemShape: [3, 32, 32], maxItems: 2 },
  agents: ['math_agent', 'code_agent', 'search_agent'],
  actors: 4,
  textCharsPerToken: 4,
  datasetSize: 100_000,
  maxWeightLag: 1,
};

/**
 * The largest published NeMo-RL async GRPO run: 197k generated tokens/s at
 * 59 rows/s, i.e. ≈3.3k tokens per row on average. Math/code reasoning,
 * mostly single-turn, 16 generations per prompt (the usual GRPO group
 * size), 32 prompts per step (512 rows, ≈8.7 s per step at 59 rows/s),
 * 64k context. The log-normal is sized so that prompt + generated + extra
 * user turns average ≈3.34k tokens (a test pins it).
 */
const PUBLISHED_MAX_SHAPE: RowShape = {
  ...DEFAULT_SHAPE,
  promptTokens: { median: 256, sigma: 0.7, min: 16, max: 4096 },
  userTurnTokens: { median: 96, sigma: 0.8, min: 4, max: 2048 },
  generatedTokens: { median: 1800, sigma: 1.0, min: 16, max: 61_440 },
  maxTotalTokens: 65_536,
  turns: { max: 4, continueProbability: 0.2 },
  thinkingGroupRate: 1,
  media: null,
  agents: ['math_agent', 'code_agent'],
  actors: 8,
};

export const PROFILES: Record<ProfileName, Profile> = {
  default: {
    name: 'default',
    description: 'mixed multi-turn agentic rows, up to 8k generated tokens, occasional media, no routes',
    rowsPerSecond: 20,
    generations: 8,
    groupsPerBatch: 16,
    reorderWindowGroups: 4,
    shape: DEFAULT_SHAPE,
  },
  'published-max': {
    name: 'published-max',
    description: 'largest published NeMo-RL async run: 59 rows/s, ≈3.3k tokens/row, N=16, no routes',
    rowsPerSecond: 59,
    generations: 16,
    groupsPerBatch: 32,
    reorderWindowGroups: 8,
    shape: PUBLISHED_MAX_SHAPE,
  },
  'router-replay': {
    name: 'router-replay',
    description: 'published-max with routed experts [48 layers, top-8] int8 on generated tokens (384 B/token)',
    rowsPerSecond: 59,
    generations: 16,
    groupsPerBatch: 32,
    reorderWindowGroups: 8,
    shape: { ...PUBLISHED_MAX_SHAPE, routes: { layers: 48, topk: 8, numExperts: 128, dtype: 'int8' } },
  },
  'router-replay-32k': {
    name: 'router-replay-32k',
    description: 'groups of 8 single-turn rows of exactly 32,768 tokens with routed experts [48 layers, top-8] int8: ≈12.6 MB per row, ≥100 MB packed per group (records far above a topic limit)',
    rowsPerSecond: 40,
    generations: 8,
    groupsPerBatch: 2,
    reorderWindowGroups: 1,
    shape: {
      ...PUBLISHED_MAX_SHAPE,
      promptTokens: { median: 128, sigma: 0, min: 128, max: 128 },
      // Every row is cut at the context budget: 128 prompt tokens + 32,640 generated = 32,768 (routes alone: 8 × 32,640 × 384 B = 100.3 MB).
      generatedTokens: { median: 32_768, sigma: 0, min: 32_768, max: 32_768 },
      maxTotalTokens: 32_768,
      turns: { max: 1, continueProbability: 0 },
      routes: { layers: 48, topk: 8, numExperts: 128, dtype: 'int8' },
      textCharsPerToken: 0,
    },
  },
  small: {
    name: 'small',
    description: 'tiny rows (tens of tokens) for tests and demos',
    rowsPerSecond: 1000,
    generations: 4,
    groupsPerBatch: 4,
    reorderWindowGroups: 2,
    shape: {
      ...DEFAULT_SHAPE,
      promptTokens: { median: 12, sigma: 0.4, min: 4, max: 32 },
      userTurnTokens: { median: 6, sigma: 0.4, min: 2, max: 16 },
      generatedTokens: { median: 24, sigma: 0.6, min: 4, max: 64 },
      maxTotalTokens: 256,
      turns: { max: 3, continueProbability: 0.3 },
      media: null,
      textCharsPerToken: 2,
      datasetSize: 1000,
    },
  },
};

/** What a partial `routes` / `media` override is completed with when the profile has none. */
const ROUTES_BASE: RoutesSpec = { layers: 48, topk: 8, numExperts: 128, dtype: 'int8' };
const MEDIA_BASE: MediaSpec = { groupRate: 0.05, name: 'image', itemShape: [3, 32, 32], maxItems: 2 };

/**
 * Per-knob overrides: top-level keys replace, nested objects merge one level
 * deep (`{ routes: { layers: 2 } }` on a profile without routes completes
 * the rest from 48×8 int8 routes, `{ media: {} }` from the default media);
 * `null` clears `routes`/`media`.
 */
export type ShapeOverrides = {
  [K in keyof RowShape]?: K extends 'routes' | 'media'
    ? Partial<NonNullable<RowShape[K]>> | null
    : RowShape[K] extends readonly unknown[]
      ? RowShape[K]
      : RowShape[K] extends object
        ? Partial<RowShape[K]>
        : RowShape[K];
};

/**
 * The profile's row shape with `overrides` applied, validated. Throws
 * `RangeError` naming the knob when the result cannot generate rows (a
 * length spec out of order, routes that overflow their dtype, no agents…).
 */
export function resolveShape(profile: Profile, overrides: ShapeOverrides = {}): RowShape {
  const merged: Record<string, unknown> = { ...profile.shape };
  for (const [key, value] of Object.entries(overrides)) {
    if (value === undefined) continue;
    const base =
      (profile.shape as unknown as Record<string, unknown>)[key] ??
      (key === 'routes' ? ROUTES_BASE : key === 'media' ? MEDIA_BASE : null);
    const isPlainObject = value !== null && typeof value === 'object' && !Array.isArray(value);
    merged[key] = isPlainObject && base !== null && typeof base === 'object' && !Array.isArray(base)
      ? { ...base, ...value }
      : value;
  }
  const shape = merged as unknown as RowShape;
  validateShape(shape);
  return shape;
}

function validateShape(shape: RowShape): void {
  validateLengthSpec(shape.promptTokens, 'promptTokens');
  validateLengthSpec(shape.userTurnTokens, 'userTurnTokens');
  validateLengthSpec(shape.generatedTokens, 'generatedTokens');
  if (shape.promptTokens.min < 1) throw new RangeError('promptTokens.min must be ≥ 1: a prompt has tokens');
  if (shape.userTurnTokens.min < 1) throw new RangeError('userTurnTokens.min must be ≥ 1');
  if (shape.generatedTokens.min < 2) throw new RangeError('generatedTokens.min must be ≥ 2 (room for </think> and EOS)');
  if (shape.maxTotalTokens < shape.promptTokens.max + 2) {
    throw new RangeError(`maxTotalTokens ${shape.maxTotalTokens} must exceed promptTokens.max + 2`);
  }
  if (!Number.isInteger(shape.turns.max) || shape.turns.max < 1) throw new RangeError('turns.max must be an integer ≥ 1');
  if (shape.vocab.min < 0 || shape.vocab.max <= shape.vocab.min) throw new RangeError('vocab must satisfy 0 ≤ min < max');
  if (shape.agents.length === 0) throw new RangeError('agents must name at least one agent');
  if (shape.routes !== null) validateRoutesSpec(shape.routes);
  if (shape.taskIndex.numTasks < 1) throw new RangeError('taskIndex.numTasks must be ≥ 1');
  if (shape.datasetSize < 1) throw new RangeError('datasetSize must be ≥ 1');
}

/**
 * Plans of groups and rows: every length, flag and reward of a synthetic
 * row decided as plain numbers, before any tensor or text is built.
 *
 * Splitting the plan from the build keeps statistics cheap (a test can
 * draw thousands of plans to check token averages without allocating a
 * single typed array) and keeps the builder a straight translation of the
 * plan into messages and Responses output items.
 */
import { sampleLength } from './length-sampler.js';
import type { RowShape } from './profiles.js';
import type { Rng } from './random.js';

/** What the rollout looks like at the prompt-group level: shared by every row of the group. */
export interface GroupPlan {
  agent: string;
  thinking: boolean;
  promptTokens: number;
  /** Media items on the prompt message (0 = none). */
  mediaItems: number;
  rewardKind: 'binary' | 'graded';
  /** The prompt's difficulty: chance of a correct answer (binary) or mean grade (graded). */
  successRate: number;
  /** Set when every row of the group gets this reward. */
  allEqualReward: number | null;
  /** Reward component names, or null when the group's rows carry none. */
  componentNames: string[] | null;
  taskIndex: number | null;
  lowEffort: boolean;
  promptIdx: number;
}

/** Where a length-cut response stopped. */
export type Cut = 'none' | 'in_reasoning' | 'in_answer';

/** One user → assistant exchange. */
export interface TurnPlan {
  /** Tokens of the user message before this turn (turn 0: the prompt). */
  userTokens: number;
  /** Tokens of the assistant message. */
  genTokens: number;
  /** Thinking mode: regular tokens before `</think>` (all of them when cut in reasoning). */
  reasoningTokens: number;
  /** How the turn ended: a tool call, a message answered by a new user prompt, or the final answer. */
  ending: 'tool_call' | 'follow_up' | 'final';
  cut: Cut;
  /** Malformed thinking of this message: the detector flag, a stray think token id, or a think tag in `generation_str`. */
  malformed: 'none' | 'flag' | 'tokens' | 'text';
  invalidToolCall: boolean;
  /** Fraction of the way into the message where a stray `<|endoftext|>` replaces a token, or null. */
  strayToken: number | null;
}

/** Everything about one row but its tensors and texts. */
export interface RowPlan {
  turns: TurnPlan[];
  /** All tokens of `message_log`. */
  totalTokens: number;
  /** Tokens of the assistant messages. */
  generatedTokens: number;
  incompleteReason: 'max_output_tokens' | 'length' | 'content_filter' | null;
  /** The final answer item: normal text, blank, a copy of the reasoning summary, or absent (cut in reasoning). */
  answer: 'normal' | 'empty' | 'duplicated_reasoning' | 'missing';
  stringContent: boolean;
  generationStr: boolean;
  reward: number;
  rewardComponents: Record<string, number> | null;
  /** `full_result.mask_sample` and `full_result.instance_config` as the verifier wrote them. */
  maskTop: boolean | number | string;
  instanceConfig: Record<string, boolean | number | string | null> | null;
}

const COMPONENT_SETS = [
  ['accuracy', 'format'],
  ['correctness', 'style', 'length'],
  ['judge', 'tests_passed'],
];

/** Draws the shared facts of one prompt group. */
export function planGroup(shape: RowShape, rng: Rng): GroupPlan {
  const rewardKind = rng.chance(shape.rewards.binaryGroupRate) ? 'binary' : 'graded';
  const successRate = rng.float();
  let allEqualReward: number | null = null;
  if (rng.chance(shape.rewards.allEqualGroupRate)) {
    allEqualReward = rewardKind === 'binary' ? (rng.chance(0.5) ? 1 : 0) : roundTo(rng.float(), 4);
  }
  const componentNames = rng.chance(shape.rewards.componentsGroupRate) ? rng.pick(COMPONENT_SETS) : null;
  const hasTask = rng.chance(shape.taskIndex.groupRate);
  const taskIndex = rng.int(0, shape.taskIndex.numTasks);
  const media = shape.media !== null && rng.chance(shape.media.groupRate) ? rng.int(1, shape.media.maxItems + 1) : 0;
  return {
    agent: rng.pick(shape.agents),
    thinking: rng.chance(shape.thinkingGroupRate),
    promptTokens: sampleLength(rng, shape.promptTokens),
    mediaItems: media,
    rewardKind,
    successRate,
    allEqualReward,
    componentNames,
    taskIndex: hasTask ? taskIndex : null,
    lowEffort: rng.chance(shape.lowEffort.groupRate),
    promptIdx: rng.int(0, shape.datasetSize),
  };
}

/**
 * Draws one row of `group`: turn count, the long-tailed generated length
 * split over the turns, the context-budget cut, the flags and the reward.
 * Invariants the builder relies on: every turn has ≥ 1 generated token;
 * an uncut turn has room for its `</think>` (thinking) and EOS;
 * `totalTokens ≤ shape.maxTotalTokens`; only the last turn can be cut.
 */
export function planRow(shape: RowShape, group: GroupPlan, rng: Rng): RowPlan {
  let numTurns = 1;
  while (numTurns < shape.turns.max && rng.chance(shape.turns.continueProbability)) numTurns++;
  const genTotal = sampleLength(rng, shape.generatedTokens);
  const hitOutputCap = genTotal >= shape.generatedTokens.max;
  // An uncut thinking turn needs </think> + EOS, a plain one EOS.
  const minPerTurn = group.thinking ? 2 : 1;
  numTurns = Math.max(1, Math.min(numTurns, Math.floor(genTotal / minPerTurn)));

  const userTokens: number[] = [group.promptTokens];
  for (let t = 1; t < numTurns; t++) userTokens.push(sampleLength(rng, shape.userTurnTokens));
  const genTokens = splitTokens(rng, genTotal, numTurns, minPerTurn);

  // Context budget: the conversation stops inside the turn that overflows.
  let incompleteReason: RowPlan['incompleteReason'] = null;
  let used = 0;
  for (let t = 0; t < numTurns; t++) {
    const room = shape.maxTotalTokens - used - (userTokens[t] as number);
    if (room < (genTokens[t] as number)) {
      if (room >= 1) {
        genTokens[t] = room;
        numTurns = t + 1;
      } else {
        // The next prompt no longer fits: Gym returns an empty length-cut completion, the chain stops short of the budget.
        numTurns = Math.max(1, t);
      }
      incompleteReason = 'length';
      break;
    }
    used += (userTokens[t] as number) + (genTokens[t] as number);
  }
  userTokens.length = numTurns;
  genTokens.length = numTurns;
  if (incompleteReason === null && hitOutputCap) incompleteReason = 'max_output_tokens';
  const truncated = incompleteReason !== null;
  if (!truncated && rng.chance(shape.flags.contentFilterRate)) incompleteReason = 'content_filter';

  const turns: TurnPlan[] = [];
  for (let t = 0; t < numTurns; t++) {
    const last = t === numTurns - 1;
    const gen = genTokens[t] as number;
    let cut: Cut = 'none';
    if (last && truncated) cut = group.thinking && (gen < 2 || rng.chance(0.6)) ? 'in_reasoning' : 'in_answer';
    let ending: TurnPlan['ending'] = rng.chance(shape.toolCallRate) ? 'tool_call' : 'follow_up';
    if (last) ending = numTurns > 1 && cut === 'none' && rng.chance(shape.endsWithToolCallRate) ? 'tool_call' : 'final';
    const share = shape.reasoningShare.min + rng.float() * (shape.reasoningShare.max - shape.reasoningShare.min);
    let reasoningTokens = 0;
    if (group.thinking) {
      if (cut === 'in_reasoning') reasoningTokens = gen;
      else if (cut === 'in_answer') reasoningTokens = Math.floor((gen - 1) * share);
      else reasoningTokens = Math.floor((gen - 2) * share);
    }
    let malformed: TurnPlan['malformed'] = 'none';
    if (rng.chance(shape.flags.malformedThinkingRate)) malformed = rng.pick(['flag', 'tokens', 'text'] as const);
    turns.push({
      userTokens: userTokens[t] as number,
      genTokens: gen,
      reasoningTokens,
      ending,
      cut,
      malformed,
      invalidToolCall: rng.chance(shape.flags.invalidToolCallRate),
      strayToken: rng.chance(shape.flags.strayTokenRate) ? rng.float() : null,
    });
  }

  const lastTurn = turns[turns.length - 1] as TurnPlan;
  let answer: RowPlan['answer'] = 'normal';
  if (lastTurn.cut === 'in_reasoning') answer = 'missing';
  else if (lastTurn.cut === 'none' && rng.chance(shape.flags.emptyAnswerRate)) answer = 'empty';
  else if (lastTurn.cut === 'none' && group.thinking && rng.chance(shape.flags.duplicatedReasoningRate)) {
    answer = 'duplicated_reasoning';
  }

  const reward = drawReward(group, rng, answer === 'normal' || answer === 'duplicated_reasoning');
  const { maskTop, instanceConfig } = drawMaskFlags(rng, shape.flags.maskSampleRate);
  let total = 0;
  let generated = 0;
  for (const turn of turns) {
    total += turn.userTokens + turn.genTokens;
    generated += turn.genTokens;
  }
  return {
    turns,
    totalTokens: total,
    generatedTokens: generated,
    incompleteReason,
    answer,
    stringContent: rng.chance(shape.flags.stringContentRate),
    generationStr: rng.chance(shape.flags.generationStrRate),
    reward,
    rewardComponents: group.componentNames === null ? null : splitReward(rng, reward, group.componentNames),
    maskTop,
    instanceConfig,
  };
}

/** Splits `total` into `parts` shares of at least `min` each (uneven, as real turns are). Requires `total ≥ parts*min`. */
function splitTokens(rng: Rng, total: number, parts: number, min: number): number[] {
  if (parts === 1) return [total];
  const weights: number[] = [];
  let sum = 0;
  for (let i = 0; i < parts; i++) {
    const w = 0.3 + rng.float();
    weights.push(w);
    sum += w;
  }
  const spare = total - parts * min;
  const out: number[] = [];
  let given = 0;
  for (let i = 0; i < parts - 1; i++) {
    const n = min + Math.floor((spare * (weights[i] as number)) / sum);
    out.push(n);
    given += n;
  }
  out.push(total - given);
  return out;
}

/** A row's verifier reward. Rows without an answer score 0 unless the whole group shares one reward. */
function drawReward(group: GroupPlan, rng: Rng, answered: boolean): number {
  if (group.allEqualReward !== null) return group.allEqualReward;
  if (!answered) return 0;
  if (group.rewardKind === 'binary') return rng.chance(group.successRate) ? 1 : 0;
  return roundTo(Math.min(1, Math.max(0, group.successRate + 0.25 * rng.normal())), 4);
}

/**
 * Reward components summing to `reward`: the leading ones take random
 * shares, the last one the remainder, so the float sum matches the reward
 * to within an ulp or two (SPEC §4.6 uses isclose, rel 1e-5).
 */
function splitReward(rng: Rng, reward: number, names: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  let rest = reward;
  for (let i = 0; i < names.length - 1; i++) {
    const part = roundTo(reward * rng.float() * 0.8, 6);
    out[names[i] as string] = part;
    rest -= part;
  }
  out[names[names.length - 1] as string] = rest;
  return out;
}

/**
 * Gym writes `mask_sample: false` on every verify response; an environment
 * that flags a sample sets it either there or in `instance_config`, with
 * whatever truthy value its code produced. Unflagged rows carry the falsy
 * variants a reader must not mistake for a flag.
 */
function drawMaskFlags(rng: Rng, rate: number): Pick<RowPlan, 'maskTop' | 'instanceConfig'> {
  if (rng.chance(rate)) {
    switch (rng.int(0, 4)) {
      case 0:
        return { maskTop: true, instanceConfig: null };
      case 1:
        return { maskTop: false, instanceConfig: { mask_sample: true } };
      case 2:
        return { maskTop: false, instanceConfig: { mask_sample: 1 } };
      default:
        return { maskTop: false, instanceConfig: { mask_sample: 'bad_env_state' } };
    }
  }
  switch (rng.int(0, 4)) {
    case 0:
      return { maskTop: false, instanceConfig: null };
    case 1:
      return { maskTop: false, instanceConfig: { mask_sample: false } };
    case 2:
      return { maskTop: false, instanceConfig: { mask_sample: 0 } };
    default:
      return { maskTop: false, instanceConfig: { mask_sample: null } };
  }
}

function roundTo(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

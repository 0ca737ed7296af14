/**
 * Materializes a planned row into a `RolloutRow`: typed-array messages in
 * the layout the NeMo-Gym actor produces (reference rule 37) and a
 * `full_result` whose output items tell the same story as the tokens.
 *
 * Token layout. Thinking mode: every user message ends with `<think>` (the
 * chat template opens the block), an uncut assistant message is
 * `reasoning… </think> answer… EOS`. Plain mode: no think ids at all,
 * `answer… EOS`. A length-cut last message has no EOS, and when cut inside
 * the reasoning no `</think>` either (reference rule 19b then flags it, as
 * it would flag a real truncated trace).
 */
import type { JsonObject, Message, RolloutRow, Tensor } from '../processors/types.js';
import type { GroupPlan, RowPlan, TurnPlan } from './conversation-plan.js';
import type { RowShape } from './profiles.js';
import type { Rng } from './random.js';
import {
  buildRequest,
  functionCallItem,
  functionCallOutputItem,
  generationStr,
  messageItem,
  reasoningItem,
  TOOL_NAMES,
} from './response-items.js';
import { syntheticText } from './synthetic-text.js';
import {
  EOS_TOKEN_ID,
  fillLogprobs,
  fillTokenIds,
  makeRoutes,
  THINK_CLOSE_TOKEN_ID,
  THINK_OPEN_TOKEN_ID,
  UNWANTED_TOKEN_ID,
} from './tokens.js';

/** The prompt of a group, built once and shared (by copy) by its rows. */
export interface GroupPrompt {
  tokens: Int32Array;
  text: string;
  media: Record<string, Tensor> | null;
  request: JsonObject;
}

/** Identity fields of one row, decided by the event generator. */
export interface RowIdentity {
  batchId: string;
  groupId: string;
  groupIndex: number;
  rowIndex: number;
  numGenerations: number;
  weightVersion: number;
  instanceLabel: string;
  producedAt: number | null;
}

const MIN_TEXT = 8;

function textFor(rng: Rng, shape: RowShape, tokens: number): string {
  return syntheticText(rng, Math.max(MIN_TEXT, Math.round(tokens * shape.textCharsPerToken)));
}

/** A text that differs from `avoid` (a fresh slice could repeat it and fake a duplicated-reasoning penalty). */
function distinctText(rng: Rng, shape: RowShape, tokens: number, avoid: string | null): string {
  const text = textFor(rng, shape, tokens);
  return avoid !== null && text.trim() === avoid.trim() ? `${text} ok` : text;
}

/**
 * Builds the prompt of `group`: tokens (ending in `<think>` in thinking
 * mode), text, media, and the request whose last user message carries the
 * low-effort marker when the group is low-effort. Deterministic in `rng`.
 */
export function buildGroupPrompt(shape: RowShape, group: GroupPlan, rng: Rng): GroupPrompt {
  const tokens = new Int32Array(group.promptTokens);
  fillTokenIds(rng, tokens, 0, tokens.length, shape.vocab);
  if (group.thinking) tokens[tokens.length - 1] = THINK_OPEN_TOKEN_ID;
  const text = textFor(rng, shape, Math.min(group.promptTokens, 256));
  let media: Record<string, Tensor> | null = null;
  if (shape.media !== null && group.mediaItems > 0) {
    const size = shape.media.itemShape.reduce((a, b) => a * b, 1) * group.mediaItems;
    const data = new Uint8Array(size);
    for (let i = 0; i < size; i += 4) {
      const x = rng.u32();
      data[i] = x;
      if (i + 1 < size) data[i + 1] = x >>> 8;
      if (i + 2 < size) data[i + 2] = x >>> 16;
      if (i + 3 < size) data[i + 3] = x >>> 24;
    }
    media = { [shape.media.name]: { dtype: 'uint8', shape: [group.mediaItems, ...shape.media.itemShape], data } };
  }
  const marker = shape.lowEffort.marker;
  const fewShot = rng.chance(0.1);
  // A marker in an earlier few-shot user turn must not count: only the last user message decides (reference rule 13).
  const markerInExample = fewShot && !group.lowEffort && marker !== '' && rng.chance(0.5);
  const request = buildRequest({
    system: `You are ${group.agent}. Think step by step.`,
    prompt: group.lowEffort && marker !== '' ? `${text}\n\n${marker}` : text,
    example: fewShot
      ? { user: markerInExample ? `${syntheticText(rng, 40)} ${marker}` : syntheticText(rng, 40), assistant: syntheticText(rng, 40) }
      : null,
    maxOutputTokens: shape.generatedTokens.max,
    tools: group.agent !== 'math_agent',
  });
  return { tokens, text, media, request };
}

/**
 * Builds one row from its plan. The row's messages are
 * `[prompt, assistant, user, assistant, …]` with exactly `plan.totalTokens`
 * tokens; generated messages carry logprobs of the same length, both
 * violation flags, and routes `[tokens, layers, topk]` when the shape has
 * routes. `input_message_log` is the prompt message alone.
 */
export function buildRow(
  shape: RowShape,
  group: GroupPlan,
  prompt: GroupPrompt,
  plan: RowPlan,
  rng: Rng,
  id: RowIdentity,
): RolloutRow {
  const messages: Message[] = [];
  const output: JsonObject[] = [];
  let toolCalls = 0;
  let finalAnswer = '';
  plan.turns.forEach((turn, t) => {
    messages.push(t === 0 ? promptMessage(prompt) : userMessage(shape, group, turn.userTokens, rng));
    messages.push(assistantMessage(shape, group, turn, rng));
    const last = t === plan.turns.length - 1;
    const reasoning = group.thinking ? textFor(rng, shape, turn.reasoningTokens) : null;
    if (reasoning !== null) output.push(reasoningItem(`rs_${t}`, reasoning));
    const answerTokens = Math.max(0, turn.genTokens - turn.reasoningTokens);
    let item: JsonObject | null = null;
    let answer = '';
    if (turn.ending === 'tool_call') {
      answer = syntheticText(rng, 24);
      item = functionCallItem(`fc_${t}`, `call_${t}`, rng.pick(TOOL_NAMES), answer);
      output.push(item);
      toolCalls++;
      if (!last) output.push(functionCallOutputItem(`call_${t}`, textFor(rng, shape, plan.turns[t + 1]?.userTokens ?? 0)));
    } else if (turn.ending === 'follow_up') {
      answer = distinctText(rng, shape, answerTokens, reasoning);
      item = messageItem(`msg_${t}`, answer, false);
      output.push(item);
    } else if (plan.answer !== 'missing') {
      if (plan.answer === 'empty') answer = rng.pick(['', ' ', '\n  ']);
      // Surrounding whitespace differs on purpose: the penalty compares stripped texts.
      else if (plan.answer === 'duplicated_reasoning') answer = `\n${reasoning ?? ''}  `;
      else answer = distinctText(rng, shape, answerTokens, reasoning);
      item = messageItem(`msg_${t}`, answer, plan.stringContent);
      output.push(item);
      finalAnswer = answer;
    }
    const target = item ?? output[output.length - 1];
    if (target !== undefined && ((last && plan.generationStr) || turn.malformed === 'text')) {
      target.generation_str = generationStr(reasoning, answer, turn.malformed === 'text');
    }
  });

  const incomplete = plan.incompleteReason;
  const fullResult: JsonObject = {
    reward: plan.reward,
    response: {
      id: `resp_${rng.u32().toString(16).padStart(8, '0')}`,
      object: 'response',
      model: 'policy',
      status: incomplete === null ? 'completed' : 'incomplete',
      output,
      incomplete_details: incomplete === null ? null : { reason: incomplete },
      usage: {
        input_tokens: plan.totalTokens - plan.generatedTokens,
        output_tokens: plan.generatedTokens,
        total_tokens: plan.totalTokens,
      },
    },
    mask_sample: plan.maskTop,
    is_correct: plan.reward >= (group.rewardKind === 'binary' ? 1 : 0.5),
    num_turns: plan.turns.length,
    num_tool_calls: toolCalls,
    extracted_answer: finalAnswer.trim().slice(0, 32),
  };
  if (plan.instanceConfig !== null) fullResult.instance_config = plan.instanceConfig;
  if (plan.rewardComponents !== null) fullResult.reward_components = plan.rewardComponents;

  return {
    batch_id: id.batchId,
    group_id: id.groupId,
    group_index: id.groupIndex,
    row_index: id.rowIndex,
    num_generations: id.numGenerations,
    prompt_idx: group.promptIdx,
    task_index: group.taskIndex,
    agent_ref: { name: group.agent },
    weight_version: id.weightVersion,
    instance_label: id.instanceLabel,
    // Each row owns its JSON: a consumer that annotates one row's request must not change its siblings.
    request: structuredClone(prompt.request),
    input_message_log: [promptMessage(prompt)],
    message_log: messages,
    full_result: fullResult,
    timing: {
      generation_s: Math.round((plan.generatedTokens / (40 + 40 * rng.float())) * 1000) / 1000,
      verify_s: Math.round((0.02 + 0.5 * rng.float()) * 1000) / 1000,
    },
    produced_at: id.producedAt,
  };
}

/** The prompt as a fresh message (its own token array, so rows never share a buffer). */
function promptMessage(prompt: GroupPrompt): Message {
  const m: Message = { role: 'user', token_ids: prompt.tokens.slice(), content: prompt.text };
  if (prompt.media !== null) {
    m.media = {};
    for (const [name, t] of Object.entries(prompt.media)) m.media[name] = { ...t, shape: [...t.shape], data: t.data.slice() };
  }
  return m;
}

function userMessage(shape: RowShape, group: GroupPlan, length: number, rng: Rng): Message {
  const tokens = new Int32Array(length);
  fillTokenIds(rng, tokens, 0, length, shape.vocab);
  if (group.thinking) tokens[length - 1] = THINK_OPEN_TOKEN_ID;
  return { role: 'user', token_ids: tokens };
}

function assistantMessage(shape: RowShape, group: GroupPlan, turn: TurnPlan, rng: Rng): Message {
  const n = turn.genTokens;
  const tokens = new Int32Array(n);
  const end = turn.cut === 'none' ? n - 1 : n;
  fillTokenIds(rng, tokens, 0, end, shape.vocab);
  if (group.thinking && turn.cut !== 'in_reasoning') tokens[turn.reasoningTokens] = THINK_CLOSE_TOKEN_ID;
  if (turn.cut === 'none') tokens[n - 1] = EOS_TOKEN_ID;
  // A stray id the balance check (reference rule 19b) must catch: a re-opened block, or a close in plain mode.
  if (turn.malformed === 'tokens') tokens[0] = group.thinking ? THINK_OPEN_TOKEN_ID : THINK_CLOSE_TOKEN_ID;
  // Replaces a regular token only, so the think and EOS structure stays as planned.
  if (turn.strayToken !== null) {
    const at = Math.min(n - 1, Math.floor(turn.strayToken * n));
    if (tokens[at] !== THINK_CLOSE_TOKEN_ID && tokens[at] !== EOS_TOKEN_ID && tokens[at] !== THINK_OPEN_TOKEN_ID) {
      tokens[at] = UNWANTED_TOKEN_ID;
    }
  }
  const logprobs = new Float32Array(n);
  fillLogprobs(rng, logprobs);
  const m: Message = {
    role: 'assistant',
    token_ids: tokens,
    generation_logprobs: logprobs,
    is_invalid_tool_call: turn.invalidToolCall,
    has_malformed_thinking: turn.malformed === 'flag',
  };
  if (shape.routes !== null) {
    const { layers, topk, dtype } = shape.routes;
    m.routed_experts = { dtype, shape: [n, layers, topk], data: makeRoutes(rng, n, shape.routes) };
  }
  return m;
}

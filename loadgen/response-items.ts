/**
 * Responses API output items (`full_result.response.output[]`) and the
 * request, in the shapes NeMo-Gym agents write them (SPEC §2, reference
 * rules 16–17 and 36): `reasoning` with `summary[0].text`, `message` with a
 * list of `output_text` parts or a plain string, `function_call` /
 * `function_call_output` pairs, and `generation_str` on some items.
 */
import type { JsonObject } from '../processors/types.js';
import { THINK_CLOSE_TAG, THINK_OPEN_TAG } from './tokens.js';

/** A reasoning item; the summary holds the whole reasoning text, as Gym's vLLM model server writes it. */
export function reasoningItem(id: string, text: string): JsonObject {
  return { type: 'reasoning', id, summary: [{ type: 'summary_text', text }] };
}

/** An assistant message item with list content (`content[0].text`) or, when `asString`, plain string content. */
export function messageItem(id: string, text: string, asString: boolean): JsonObject {
  return {
    type: 'message',
    id,
    role: 'assistant',
    status: 'completed',
    content: asString ? text : [{ type: 'output_text', text, annotations: [] }],
  };
}

export const TOOL_NAMES = ['search', 'python', 'calculator'] as const;

/** A tool call made by the model; `arguments` is a JSON string, as in the Responses API. */
export function functionCallItem(id: string, callId: string, name: string, query: string): JsonObject {
  return { type: 'function_call', id, call_id: callId, name, arguments: JSON.stringify({ query }), status: 'completed' };
}

/** The environment's answer to a tool call (it also becomes the next user message's tokens). */
export function functionCallOutputItem(callId: string, output: string): JsonObject {
  return { type: 'function_call_output', call_id: callId, output };
}

/**
 * The raw generation text of a turn. Well-formed in thinking mode means the
 * chat template already opened the think block, so the generation holds no
 * `<think>` and exactly one `</think>` (reference rule 19c); `malformed`
 * re-opens the block, which check (c) must catch.
 */
export function generationStr(reasoning: string | null, answer: string, malformed: boolean): string {
  const body = reasoning === null ? answer : `${reasoning}${THINK_CLOSE_TAG}${answer}`;
  return malformed ? `${THINK_OPEN_TAG}${body}` : body;
}

/** Input messages of a request: optional few-shot example, then the prompt as the last user message. */
export interface RequestInput {
  system: string;
  prompt: string;
  /** A worked example before the prompt (user + assistant), or null. */
  example: { user: string; assistant: string } | null;
  maxOutputTokens: number;
  tools: boolean;
}

/** The Responses API request of a row (`responses_create_params` in NeMo-RL). */
export function buildRequest(input: RequestInput): JsonObject {
  const messages: JsonObject[] = [{ role: 'system', content: input.system }];
  if (input.example !== null) {
    messages.push({ role: 'user', content: input.example.user });
    messages.push({ role: 'assistant', content: input.example.assistant });
  }
  messages.push({ role: 'user', content: input.prompt });
  const request: JsonObject = {
    model: 'policy',
    input: messages,
    max_output_tokens: input.maxOutputTokens,
    temperature: 1.0,
    top_p: 1.0,
  };
  if (input.tools) {
    request.tools = TOOL_NAMES.map((name) => ({
      type: 'function',
      name,
      description: `${name} tool`,
      parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
    }));
  }
  return request;
}

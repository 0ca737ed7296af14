/**
 * Which tokens are trained, and which carry a message-violation flag
 * (SPEC §5.3, REFERENCE-NOTES 31).
 *
 * Field presence is the signal: a message is *generated* when its role is
 * `assistant` AND it has `generation_logprobs`. Assistant turns without
 * logprobs are prompt history, and a user message that happens to carry
 * logprobs is still not trained. The violation masks follow the same rule,
 * so a flag on a prompt-history turn never reaches the trainer.
 */
import type { Message } from './types.js';

export const INVALID_TOOL_CALL_MASK = 'invalid_tool_call_mask';
export const MALFORMED_THINKING_MASK = 'malformed_thinking_mask';

/** True for an `assistant` message with `generation_logprobs`: its tokens get token_mask = 1. */
export function isGeneratedAssistant(message: Message): boolean {
  return message.role === 'assistant' && message.generation_logprobs != null;
}

export interface MessageViolationFlags {
  invalidToolCall: boolean;
  malformedThinking: boolean;
}

/**
 * The mask bits a message contributes over all of its tokens: each flag only
 * on a generated assistant message that sets it (`is_invalid_tool_call`,
 * `has_malformed_thinking`); false everywhere else.
 */
export function messageViolationFlags(message: Message): MessageViolationFlags {
  const generated = isGeneratedAssistant(message);
  return {
    invalidToolCall: generated && message.is_invalid_tool_call === true,
    malformedThinking: generated && message.has_malformed_thinking === true,
  };
}

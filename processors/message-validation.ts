/**
 * Field-level checks of one message and its tensors (SPEC §2, §3 `invalid_row`).
 * A message that passes can be packed without surprises: token-aligned
 * tensors have one entry per token, routed experts are `[tokens, layers, topk]`
 * integers, and every tensor's buffer matches its shape and dtype. Failures
 * are returned as a human sentence (the caller prefixes the field path), never
 * thrown, because a bad row is data (a dead letter), not a crash.
 */
import { isDType, matchesDType } from './typed-arrays.js';
import type { DType, Message, Tensor, TypedArray } from './types.js';

const INTEGER_DTYPES: ReadonlySet<DType> = new Set(['uint8', 'int8', 'int16', 'int32', 'int64']);

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && !ArrayBuffer.isView(value);
}

/** True for `undefined` and `null`: both mean "absent" for an optional field (Avro writes null, JSON may omit). */
export function isAbsent(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

/**
 * Why `value` is not a well-formed Tensor (dtype known, shape of non-negative
 * integers, data of the dtype's typed array with exactly prod(shape)
 * elements), or null when it is.
 */
export function tensorProblem(value: unknown): string | null {
  if (!isPlainObject(value)) return 'is not a tensor object';
  const { dtype, shape, data } = value;
  if (!isDType(dtype)) {
    return `has unknown dtype ${JSON.stringify(dtype)}`;
  }
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && (d as number) >= 0)) {
    return 'has a shape that is not a list of non-negative integers';
  }
  if (!ArrayBuffer.isView(data) || !matchesDType(data as TypedArray, dtype)) return `has data that is not a ${dtype} typed array`;
  const expected = (shape as number[]).reduce((a, b) => a * b, 1);
  const length = (data as unknown as { length: number }).length;
  if (length !== expected) return `has ${length} elements but shape [${shape.join(', ')}] needs ${expected}`;
  return null;
}

function routedExpertsProblem(value: unknown, tokens: number): string | null {
  const problem = tensorProblem(value);
  if (problem) return problem;
  const t = value as Tensor;
  // Rank 3 is what the packer's backfill template needs (REFERENCE-NOTES 34).
  if (t.shape.length !== 3) return `has rank ${t.shape.length}; expected [tokens, layers, topk]`;
  if (!INTEGER_DTYPES.has(t.dtype)) return `has dtype ${t.dtype}; expert ids must be integers`;
  if (t.shape[0] !== tokens) return `covers ${t.shape[0]} tokens but the message has ${tokens}`;
  return null;
}

function optionalBoolean(m: Record<string, unknown>, key: string): string | null {
  const v = m[key];
  return isAbsent(v) || typeof v === 'boolean' ? null : `${key} must be a boolean`;
}

/**
 * Why `value` is not a valid Message, as `"<field> <problem>"`, or null when
 * it is valid. Checks: `role` string; `token_ids` an Int32Array;
 * `generation_logprobs` absent or a Float32Array of the same length;
 * `routed_experts` absent or a valid rank-3 integer tensor over the message's
 * tokens; flags absent or boolean; `content` absent or a string; `media`
 * absent or a map of valid tensors. NaN logprobs are not checked here (they
 * have their own reason, see `hasNanLogprobs`).
 */
export function messageProblem(value: unknown): string | null {
  if (!isPlainObject(value)) return 'is not an object';
  if (typeof value.role !== 'string') return 'role is missing or not a string';
  const tokens = value.token_ids;
  if (!(tokens instanceof Int32Array)) return 'token_ids is missing or not an int32 array';
  const logprobs = value.generation_logprobs;
  if (!isAbsent(logprobs)) {
    if (!(logprobs instanceof Float32Array)) return 'generation_logprobs is not a float32 array';
    if (logprobs.length !== tokens.length) {
      return `generation_logprobs has ${logprobs.length} entries for ${tokens.length} tokens`;
    }
  }
  if (!isAbsent(value.routed_experts)) {
    const problem = routedExpertsProblem(value.routed_experts, tokens.length);
    if (problem) return `routed_experts ${problem}`;
  }
  const flagProblem =
    optionalBoolean(value, 'has_malformed_thinking') ?? optionalBoolean(value, 'is_invalid_tool_call');
  if (flagProblem) return flagProblem;
  if (!isAbsent(value.content) && typeof value.content !== 'string') return 'content must be a string';
  if (!isAbsent(value.media)) {
    if (!isPlainObject(value.media)) return 'media must be a map of tensors';
    for (const [name, tensor] of Object.entries(value.media)) {
      const problem = tensorProblem(tensor);
      if (problem) return `media.${name} ${problem}`;
    }
  }
  return null;
}

/**
 * True when a *generated* message (role `assistant` with logprobs) holds a
 * NaN logprob. Prompt-history messages are not trained on, so their
 * logprobs do not matter here.
 */
export function hasNanLogprobs(message: Message): boolean {
  const lp = message.generation_logprobs;
  if (message.role !== 'assistant' || !lp) return false;
  for (let i = 0; i < lp.length; i++) {
    if (Number.isNaN(lp[i])) return true;
  }
  return false;
}

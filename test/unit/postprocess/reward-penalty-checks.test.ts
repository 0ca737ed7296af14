import { describe, expect, test } from 'vitest';
import {
  hasDuplicatedReasoning,
  hasEmptyFinalAnswer,
  hasMalformedThinkTag,
  hasThinkTagText,
  hasThinkTokenMismatch,
  hasUnwantedToken,
} from '../../../processors/reward-penalty-checks.js';
import type { JsonObject, JsonValue, Message } from '../../../processors/types.js';
import { gen, history, messageItem, reasoningItem, user } from './row-builders.js';

function result(output: JsonValue[]): JsonObject {
  return { reward: 1, response: { output } };
}

const THINK = { thinkOpen: 7, thinkClose: 8, thinkingTags: ['<think>', '</think>'] as [string, string] };
const NO_IDS = { ...THINK, thinkOpen: null, thinkClose: null };

describe('duplicated reasoning', () => {
  test('a reasoning summary equal to the next item text after stripping is a violation', () => {
    expect(hasDuplicatedReasoning(result([reasoningItem('  same answer '), messageItem('same answer\n')]))).toBe(true);
  });

  test('string content of the next item is compared too, whatever that item type is', () => {
    expect(hasDuplicatedReasoning(result([reasoningItem('x'), { type: 'message', content: ' x ' }]))).toBe(true);
    expect(hasDuplicatedReasoning(result([reasoningItem('x'), { type: 'function_call_output', content: 'x' }]))).toBe(
      true,
    );
  });

  test('only the NEXT item is compared, not a later one', () => {
    expect(hasDuplicatedReasoning(result([reasoningItem('x'), reasoningItem('y'), messageItem('x')]))).toBe(false);
  });

  test('different texts, empty texts and a next item without content are not violations', () => {
    expect(hasDuplicatedReasoning(result([reasoningItem('think'), messageItem('answer')]))).toBe(false);
    expect(hasDuplicatedReasoning(result([reasoningItem('  '), messageItem('  ')]))).toBe(false);
    expect(hasDuplicatedReasoning(result([reasoningItem('x'), { type: 'function_call', name: 'x' }]))).toBe(false);
    expect(hasDuplicatedReasoning(result([messageItem('x'), messageItem('x')]))).toBe(false);
    expect(hasDuplicatedReasoning({ reward: 1 })).toBe(false);
  });
});

describe('empty final answer', () => {
  test('a final message whose text strips to nothing is a violation', () => {
    expect(hasEmptyFinalAnswer(result([reasoningItem('r'), messageItem('  \n ')]))).toBe(true);
  });

  test('no output at all, or only items without content, is a violation', () => {
    expect(hasEmptyFinalAnswer(result([]))).toBe(true);
    expect(hasEmptyFinalAnswer({ reward: 0 })).toBe(true);
    expect(hasEmptyFinalAnswer(result([reasoningItem('only thinking')]))).toBe(true);
  });

  test('a non-empty final message is not a violation', () => {
    expect(hasEmptyFinalAnswer(result([reasoningItem('r'), messageItem('42')]))).toBe(false);
    expect(hasEmptyFinalAnswer(result([{ type: 'message', content: '42' }]))).toBe(false);
  });

  test('a function_call as the last item exempts the row', () => {
    expect(hasEmptyFinalAnswer(result([reasoningItem('r'), { type: 'function_call', name: 'f', arguments: '{}' }]))).toBe(
      false,
    );
  });

  test('a function_call_output as the last item is not exempt, and the walk goes back past it', () => {
    const output = [messageItem(''), { type: 'function_call_output', call_id: 'c', output: 'tool says hi' }];
    expect(hasEmptyFinalAnswer(result(output))).toBe(true);
  });

  test('the backwards walk skips items whose content is null or an empty list', () => {
    const output = [messageItem('answer'), { type: 'message', content: null }, { type: 'message', content: [] }];
    expect(hasEmptyFinalAnswer(result(output))).toBe(false);
  });

  test('the walk stops at the last item with text even when an earlier one had an answer', () => {
    expect(hasEmptyFinalAnswer(result([messageItem('answer'), messageItem('')]))).toBe(true);
  });
});

describe('unwanted tokens', () => {
  test('an unwanted id anywhere in an assistant message is a violation, the terminal position included', () => {
    expect(hasUnwantedToken([user([1]), gen([3, 4, 99])], [99])).toBe(true);
    expect(hasUnwantedToken([user([1]), gen([99, 4])], [99])).toBe(true);
    expect(hasUnwantedToken([user([1]), gen([3]), user([2]), gen([5, 98])], [98, 99])).toBe(true);
  });

  test('assistant history without logprobs counts too', () => {
    expect(hasUnwantedToken([user([1]), history([99]), user([2]), gen([3])], [99])).toBe(true);
  });

  test('user messages are ignored and clean assistant messages pass', () => {
    expect(hasUnwantedToken([user([99]), gen([3, 4])], [99])).toBe(false);
    expect(hasUnwantedToken([user([1]), gen([3, 4])], [99])).toBe(false);
  });
});

describe('malformed think tags', () => {
  test('(a) an assistant message flagged has_malformed_thinking is a violation even without ids', () => {
    const log = [user([1]), gen([3], { has_malformed_thinking: true })];
    expect(hasMalformedThinkTag(log, result([messageItem('a')]), NO_IDS)).toBe(true);
  });

  test('(a) ignores the flag on a user message', () => {
    const log: Message[] = [user([1], { has_malformed_thinking: true }), gen([3])];
    expect(hasMalformedThinkTag(log, result([messageItem('a')]), NO_IDS)).toBe(false);
  });

  test('(b) a prompt ending inside <think> expects no open and exactly one close in the reply', () => {
    expect(hasThinkTokenMismatch([user([1, 7]), gen([5, 8, 6])], 7, 8)).toBe(false);
    expect(hasThinkTokenMismatch([user([1, 7]), gen([5, 6])], 7, 8)).toBe(true);
    expect(hasThinkTokenMismatch([user([1, 7]), gen([8, 8])], 7, 8)).toBe(true);
    expect(hasThinkTokenMismatch([user([1, 7]), gen([7, 5, 8])], 7, 8)).toBe(true);
  });

  test('(b) a balanced prompt expects neither id in the reply', () => {
    expect(hasThinkTokenMismatch([user([7, 8, 1]), gen([5])], 7, 8)).toBe(false);
    expect(hasThinkTokenMismatch([user([1]), gen([5])], 7, 8)).toBe(false);
    expect(hasThinkTokenMismatch([user([7, 8]), gen([8])], 7, 8)).toBe(true);
  });

  test('(b) any other prompt pattern is a violation', () => {
    expect(hasThinkTokenMismatch([user([7, 7]), gen([8])], 7, 8)).toBe(true);
    expect(hasThinkTokenMismatch([user([8]), gen([])], 7, 8)).toBe(true);
  });

  test('(b) checks every adjacent user/assistant pair of a multi-turn log', () => {
    const ok = [user([7]), gen([8]), user([7]), gen([1, 8])];
    const badSecond = [user([7]), gen([8]), user([7]), gen([1])];
    expect(hasThinkTokenMismatch(ok, 7, 8)).toBe(false);
    expect(hasThinkTokenMismatch(badSecond, 7, 8)).toBe(true);
  });

  test('(b) runs only when both ids are known', () => {
    const log = [user([1, 7]), gen([5, 6])];
    expect(hasMalformedThinkTag(log, result([messageItem('a')]), THINK)).toBe(true);
    expect(hasMalformedThinkTag(log, result([messageItem('a')]), NO_IDS)).toBe(false);
  });

  test('(c) any open tag or more than one close tag in a generation_str is a violation', () => {
    expect(hasThinkTagText(result([messageItem('a', { generation_str: 'x <think> y' })]), '<think>', '</think>')).toBe(
      true,
    );
    expect(hasThinkTagText(result([messageItem('a', { generation_str: 'r</think>a' })]), '<think>', '</think>')).toBe(
      false,
    );
    expect(
      hasThinkTagText(result([messageItem('a', { generation_str: 'r</think>a</think>' })]), '<think>', '</think>'),
    ).toBe(true);
    expect(hasThinkTagText(result([messageItem('a', { generation_str: '' })]), '<think>', '</think>')).toBe(false);
  });

  test('(c) uses the configured tags', () => {
    const out = result([messageItem('a', { generation_str: '<reason>x' })]);
    expect(hasThinkTagText(out, '<reason>', '</reason>')).toBe(true);
    expect(hasThinkTagText(out, '<think>', '</think>')).toBe(false);
  });

  test('(c) still runs after (b) found nothing wrong', () => {
    const log = [user([1, 7]), gen([5, 8])];
    const out = result([reasoningItem('r', { generation_str: 'r</think>' }), messageItem('a', { generation_str: '<think>a' })]);
    expect(hasMalformedThinkTag(log, out, THINK)).toBe(true);
    expect(hasMalformedThinkTag(log, result([messageItem('a', { generation_str: 'a' })]), THINK)).toBe(false);
  });
});

import { describe, expect, test } from 'vitest';
import type { Message, Tensor } from '../../../processors/types.js';
import { countViolations, groupHasRoutedExperts } from '../../../processors/violation-counts.js';
import { gen, history, user } from './row-builders.js';

function routes(tokens: number): Tensor {
  return { dtype: 'int16', shape: [tokens, 2, 1], data: new Int16Array(tokens * 2) };
}

describe('violation counts', () => {
  test('flags are counted over generated assistant messages only', () => {
    const log: Message[] = [
      user([1], { is_invalid_tool_call: true }),
      gen([2, 3], { is_invalid_tool_call: true }),
      { ...history([4]), is_invalid_tool_call: true, has_malformed_thinking: true },
      gen([5], { has_malformed_thinking: true }),
      gen([6], { is_invalid_tool_call: false }),
    ];
    expect(countViolations(log, false)).toEqual({
      num_invalid_tool_calls: 1,
      num_malformed_thinking: 1,
      num_assistant_messages: 3,
      num_routed_experts_backfilled: 0,
    });
  });

  test('backfilled messages are those of any role with tokens but no routes, when the group has routes', () => {
    const routed: Message[] = [user([1, 2]), gen([3], { routed_experts: routes(1) }), user([]), gen([4, 5])];
    const plain: Message[] = [user([1]), gen([2])];
    expect(groupHasRoutedExperts([plain, routed])).toBe(true);
    expect(countViolations(routed, true).num_routed_experts_backfilled).toBe(2);
    expect(countViolations(plain, true).num_routed_experts_backfilled).toBe(2);
  });

  test('nothing is backfilled when no message of the group has routes', () => {
    const plain: Message[] = [user([1]), gen([2])];
    expect(groupHasRoutedExperts([plain])).toBe(false);
    expect(countViolations(plain, false).num_routed_experts_backfilled).toBe(0);
  });
});

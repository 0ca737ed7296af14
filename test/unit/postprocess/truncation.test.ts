import { describe, expect, test } from 'vitest';
import { incompleteReason, isTruncated, totalTokens } from '../../../processors/truncation.js';
import type { JsonObject } from '../../../processors/types.js';
import { gen, tokens, user } from './row-builders.js';

const LOG = [user(tokens(4)), gen(tokens(3)), user(tokens(2))]; // 9 tokens, every role counted

function withReason(reason: unknown): JsonObject {
  return { reward: 1, response: { output: [], incomplete_details: { reason } } } as JsonObject;
}

describe('truncation', () => {
  test('a row is truncated when its total tokens reach the budget', () => {
    expect(totalTokens(LOG)).toBe(9);
    expect(isTruncated({ reward: 1 }, LOG, 9)).toBe(true);
    expect(isTruncated({ reward: 1 }, LOG, 8)).toBe(true);
    expect(isTruncated({ reward: 1 }, LOG, 10)).toBe(false);
  });

  test.each(['max_output_tokens', 'length', 'max_tokens'])('the length reason %s truncates below the budget', (reason) => {
    expect(isTruncated(withReason(reason), LOG, 1000)).toBe(true);
  });

  test('other incomplete reasons such as content_filter are not truncation', () => {
    expect(isTruncated(withReason('content_filter'), LOG, 1000)).toBe(false);
  });

  test('absent or malformed metadata is not truncation', () => {
    const shapes: JsonObject[] = [
      { reward: 1 },
      { reward: 1, response: null },
      { reward: 1, response: 'length' },
      { reward: 1, response: { incomplete_details: null } },
      { reward: 1, response: { incomplete_details: 'length' } },
      withReason(null),
      withReason(7),
    ];
    for (const fr of shapes) {
      expect(incompleteReason(fr)).toBeNull();
      expect(isTruncated(fr, LOG, 1000)).toBe(false);
    }
  });
});

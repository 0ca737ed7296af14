import { describe, expect, test } from 'vitest';
import { packGroup } from '../../../processors/pack.js';
import { cutPromptPrefix, promptTokenCount } from '../../../processors/prompt-prefix.js';
import { cfg, field, group, msg, nums } from './builders.js';

describe('prompt prefix cut and prompt_ids_for_adv', () => {
  test('the prompt length is the total token count of the prompt messages', () => {
    expect(promptTokenCount([msg('system', [1]), msg('user', [2, 3, 4])])).toBe(4);
    expect(promptTokenCount([])).toBe(0);
  });

  test('whole messages are taken while the running count is below P, overshooting a straddling message', () => {
    const log = [msg('user', [1, 2]), msg('user', [3, 4, 5]), msg('assistant', [6, 7], { lp: [-1, -1] })];
    // 0 < 3 takes [1,2]; 2 < 3 takes [3,4,5] whole; 5 ≥ 3 stops.
    expect(cutPromptPrefix(log, 3)).toEqual({ messages: 2, tokens: 5 });
  });

  test('a row shorter than the prompt length is taken whole', () => {
    expect(cutPromptPrefix([msg('user', [1])], 4)).toEqual({ messages: 1, tokens: 1 });
  });

  test('assistant history inside the prompt is kept because the cut counts tokens, not roles', () => {
    const prompt = [msg('system', [10]), msg('user', [11, 12]), msg('assistant', [13]), msg('user', [14])];
    const log = [...prompt, msg('assistant', [15, 16], { lp: [-0.5, -0.5] })];
    const packed = packGroup(group([log], { prompt }), cfg());
    const ids = field(packed, 'prompt_ids_for_adv');
    expect(ids.shape).toEqual([1, 5]);
    expect(nums(ids.values)).toEqual([10, 11, 12, 13, 14]);
  });

  test('rows whose cuts differ are right-padded with pad_values.token_ids to the longest cut', () => {
    const prompt = [msg('user', [1, 2, 3])];
    const row0 = [msg('user', [1, 2]), msg('user', [3, 4, 5]), msg('assistant', [6], { lp: [-1] })];
    const row1 = [msg('user', [1, 2, 3]), msg('assistant', [8], { lp: [-1] })];
    const padded = field(packGroup(group([row0, row1], { prompt }), cfg({ pad_values: { token_ids: 99 } })), 'prompt_ids_for_adv');
    expect(padded.layout).toBe('dense');
    expect(padded.dtype).toBe('int64');
    expect(padded.values).toBeInstanceOf(BigInt64Array);
    expect(padded.shape).toEqual([2, 5]);
    expect(nums(padded.values)).toEqual([1, 2, 3, 4, 5, 1, 2, 3, 99, 99]);
  });

  test('the default pad value is 0', () => {
    const prompt = [msg('user', [7, 7])];
    const rows = [[msg('user', [7, 7, 7])], [msg('user', [7, 7])]];
    expect(nums(field(packGroup(group(rows, { prompt }), cfg()), 'prompt_ids_for_adv').values)).toEqual([7, 7, 7, 7, 7, 0]);
  });

  test('an empty prompt gives an [N, 0] prompt_ids_for_adv', () => {
    const rows = [[msg('user', [1])], [msg('user', [2])]];
    const ids = field(packGroup(group(rows, { prompt: [] }), cfg()), 'prompt_ids_for_adv');
    expect(ids.shape).toEqual([2, 0]);
    expect(ids.values.length).toBe(0);
  });
});

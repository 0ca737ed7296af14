import { describe, expect, test } from 'vitest';
import type { RewardPenaltiesConfig } from '../../../config/schema.js';
import { rewardPenaltiesConfigSchema } from '../../../config/schema.js';
import {
  inferSingleTokenId,
  loadTokenizer,
  resolveRewardPenaltyConfig,
} from '../../../processors/reward-penalty-config.js';
import { FIXTURES_DIR, TOKENIZER_JSON, config } from './row-builders.js';
import { configErrorOf } from '../../fixtures/config-error.js';

function resolve(raw: Record<string, unknown>) {
  return config({ reward_penalties: raw }).reward_penalties;
}


describe('resolving the reward-penalty config', () => {
  test('an absent block resolves to null: no penalties', () => {
    expect(config({}).reward_penalties).toBeNull();
    expect(config({ reward_penalties: null }).reward_penalties).toBeNull();
  });

  test('a block with defaults resolves every flag off with the default tags', () => {
    expect(resolve({})).toEqual({
      penalize_duplicated_reasoning: false,
      penalize_empty_final_answer: false,
      penalize_unwanted_tokens: false,
      penalize_malformed_think_tag: false,
      unwanted_token_ids: [],
      think_open: null,
      think_close: null,
      thinking_tags: ['<think>', '</think>'],
    });
  });

  test('the unwanted-token penalty without ids is a config error naming token_ids.unwanted', () => {
    const err = configErrorOf(() => resolve({ penalize_unwanted_tokens: true }));
    expect(err.path).toBe('postprocess.reward_penalties.token_ids.unwanted');
    expect(configErrorOf(() => resolve({ penalize_unwanted_tokens: true, token_ids: { unwanted: [] } })).path).toBe(
      'postprocess.reward_penalties.token_ids.unwanted',
    );
  });

  test('a scalar unwanted id is accepted as a one-element list', () => {
    expect(resolve({ penalize_unwanted_tokens: true, token_ids: { unwanted: 5 } })?.unwanted_token_ids).toEqual([5]);
  });

  test('both think ids are inferred when each tag encodes to exactly one token', () => {
    const r = resolve({ penalize_malformed_think_tag: true, tokenizer_path: 'tokenizer.json' });
    expect([r?.think_open, r?.think_close]).toEqual([7, 8]);
  });

  test('explicit think ids win over the tokenizer', () => {
    const r = resolve({
      penalize_malformed_think_tag: true,
      tokenizer_path: TOKENIZER_JSON,
      token_ids: { think_open: 70, think_close: 80 },
    });
    expect([r?.think_open, r?.think_close]).toEqual([70, 80]);
  });

  test('one explicit id is completed by an inferred one', () => {
    const r = resolve({ penalize_malformed_think_tag: true, tokenizer_path: TOKENIZER_JSON, token_ids: { think_open: 70 } });
    expect([r?.think_open, r?.think_close]).toEqual([70, 8]);
  });

  test('a lone inferred id is dropped when the other tag is several tokens, so the id check is skipped', () => {
    const r = resolve({
      penalize_malformed_think_tag: true,
      tokenizer_path: TOKENIZER_JSON,
      thinking_tags: ['<reason>', '</think>'],
    });
    expect([r?.think_open, r?.think_close]).toEqual([null, null]);
    expect(r?.thinking_tags).toEqual(['<reason>', '</think>']);
  });

  test('exactly one think id after inference is a config error naming the missing id', () => {
    expect(
      configErrorOf(() => resolve({ penalize_malformed_think_tag: true, token_ids: { think_open: 7 } })).path,
    ).toBe('postprocess.reward_penalties.token_ids.think_close');
    expect(
      configErrorOf(() =>
        resolve({
          penalize_malformed_think_tag: true,
          tokenizer_path: TOKENIZER_JSON,
          thinking_tags: ['<reason>', '</think>'],
          token_ids: { think_close: 8 },
        }),
      ).path,
    ).toBe('postprocess.reward_penalties.token_ids.think_open');
  });

  test('think ids are not inferred or checked while the malformed-think penalty is off', () => {
    const r = resolve({ tokenizer_path: TOKENIZER_JSON, token_ids: { think_open: 7 } });
    expect([r?.think_open, r?.think_close]).toEqual([7, null]);
  });

  test('fewer than two thinking tags is a config error when the malformed-think penalty is on', () => {
    expect(() => rewardPenaltiesConfigSchema.parse({ thinking_tags: ['<think>'] })).toThrow();
    const raw = { ...rewardPenaltiesConfigSchema.parse({ penalize_malformed_think_tag: true }), thinking_tags: ['<think>'] };
    const err = configErrorOf(() => resolveRewardPenaltyConfig(raw as RewardPenaltiesConfig, { configDir: FIXTURES_DIR }));
    expect(err.path).toBe('postprocess.reward_penalties.thinking_tags');
  });

  test('an unreadable tokenizer is a config error naming tokenizer_path', () => {
    for (const path of ['missing-tokenizer.json', 'not-a-tokenizer.json']) {
      const err = configErrorOf(() => resolve({ penalize_malformed_think_tag: true, tokenizer_path: path }));
      expect(err.path).toBe('postprocess.reward_penalties.tokenizer_path');
      expect(err.code).toBe('config_invalid');
    }
  });
});

describe('tokenizer loading', () => {
  test('a tag is inferred only when it encodes, without special tokens, to exactly one id', () => {
    const tk = loadTokenizer('tokenizer.json', FIXTURES_DIR);
    expect(tk.encodeWithoutSpecialTokens('<think>')).toEqual([7]);
    expect(inferSingleTokenId(tk, '</think>')).toBe(8);
    expect(tk.encodeWithoutSpecialTokens('<reason>')).toEqual([2, 5, 3]);
    expect(inferSingleTokenId(tk, '<reason>')).toBeNull();
  });
});

/**
 * Resolving the reward-penalty block of the config (SPEC §4.2, §9;
 * REFERENCE-NOTES 15, 18–20) into the plain values the checks use.
 *
 * This is where think-tag token ids are inferred from a local Hugging Face
 * `tokenizer.json`, read once at start-up; the only file I/O of the
 * processors. Every refusal is a `ConfigError` naming the key, so a bad
 * config stops the process before it reads any input.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import type { RewardPenaltiesConfig } from '../config/schema.js';
import { ConfigError } from '../errors/index.js';

const KEY = 'postprocess.reward_penalties';

/** The four penalty kinds, in the order the reference applies them. */
export const PENALTY_KINDS = [
  'duplicated_reasoning',
  'empty_final_answer',
  'unwanted_token',
  'malformed_think_tag',
] as const;
export type PenaltyKind = (typeof PENALTY_KINDS)[number];

/** Reward-penalty settings after resolution; JSON-serialisable. */
export interface ResolvedRewardPenaltyConfig {
  penalize_duplicated_reasoning: boolean;
  penalize_empty_final_answer: boolean;
  penalize_unwanted_tokens: boolean;
  penalize_malformed_think_tag: boolean;
  /** Explicit ids only; never inferred (not even EOS). */
  unwanted_token_ids: number[];
  /** Both null or both set whenever the malformed-think check is on. */
  think_open: number | null;
  think_close: number | null;
  /** `[open, close]` text tags for the `generation_str` check. */
  thinking_tags: [string, string];
}

/** The config flag that turns each penalty kind on. */
export const PENALTY_FLAG: Readonly<Record<PenaltyKind, keyof ResolvedRewardPenaltyConfig>> = {
  duplicated_reasoning: 'penalize_duplicated_reasoning',
  empty_final_answer: 'penalize_empty_final_answer',
  unwanted_token: 'penalize_unwanted_tokens',
  malformed_think_tag: 'penalize_malformed_think_tag',
};

/** Whether a penalty kind is switched on in a resolved config (null: none are). */
export function isPenaltyEnabled(cfg: ResolvedRewardPenaltyConfig | null, kind: PenaltyKind): boolean {
  return cfg !== null && cfg[PENALTY_FLAG[kind]] === true;
}

/** Whether any of the four penalties is on. */
export function anyPenaltyEnabled(cfg: ResolvedRewardPenaltyConfig | null): boolean {
  return PENALTY_KINDS.some((kind) => isPenaltyEnabled(cfg, kind));
}

/** Minimal view of a tokenizer: encoding without special tokens. */
export interface TagEncoder {
  encodeWithoutSpecialTokens(text: string): number[];
}

/**
 * Builds the Hugging Face tokenizer of a local `tokenizer.json` (a relative
 * path resolves against `configDir`), shared by every config block that
 * names one. Throws a ConfigError on `key` (the config key the path came
 * from) when the file is missing, is not JSON, or is not a tokenizer the
 * library can build. Returns the tokenizer, the resolved path and the
 * SHA-256 of the file's bytes (hex): what identifies the tokenizer wherever
 * the file lies (processors/ingest-fingerprint.ts).
 */
export function openTokenizer(tokenizerPath: string, configDir: string, key: string): { tokenizer: Tokenizer; path: string; sha256: string } {
  const path = isAbsolute(tokenizerPath) ? tokenizerPath : resolve(configDir, tokenizerPath);
  try {
    const bytes = readFileSync(path);
    const json: unknown = JSON.parse(bytes.toString('utf8'));
    return { tokenizer: new Tokenizer(json as object, {}), path, sha256: createHash('sha256').update(bytes).digest('hex') };
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause);
    throw new ConfigError(key, `cannot load tokenizer ${path}: ${why}`, { cause });
  }
}

/**
 * Loads a Hugging Face `tokenizer.json` (relative paths resolve against
 * `configDir`). Throws a ConfigError on `postprocess.reward_penalties.tokenizer_path`
 * when the file is missing, is not JSON, or is not a tokenizer the library
 * can build.
 */
export function loadTokenizer(tokenizerPath: string, configDir: string): TagEncoder {
  const { tokenizer, path } = openTokenizer(tokenizerPath, configDir, `${KEY}.tokenizer_path`);
  return {
    encodeWithoutSpecialTokens: (text) => {
      try {
        return tokenizer.encode(text, { add_special_tokens: false }).ids;
      } catch (cause) {
        const why = cause instanceof Error ? cause.message : String(cause);
        throw new ConfigError(`${KEY}.tokenizer_path`, `tokenizer ${path} cannot encode ${JSON.stringify(text)}: ${why}`, {
          cause,
        });
      }
    },
  };
}

/** The single id `text` encodes to without special tokens, or null when it is not exactly one token. */
export function inferSingleTokenId(encoder: TagEncoder, text: string): number | null {
  const ids = encoder.encodeWithoutSpecialTokens(text);
  return ids.length === 1 ? ids[0]! : null;
}

/**
 * Resolves the `postprocess.reward_penalties` block. Null (the block absent)
 * resolves to null: no penalties and no rate metrics. Otherwise returns the
 * flags, the unwanted ids and the think-tag ids, where each missing think id
 * is inferred from `tokenizer_path` only when the malformed-think check is on
 * and its tag encodes to exactly one token; inferred ids are kept only if at
 * least one id was explicit or both could be inferred (explicit ids win).
 * `tokenizer` overrides loading from `tokenizer_path` (tests, callers that
 * already hold one).
 *
 * Throws ConfigError for: `penalize_unwanted_tokens` without ids
 * (`token_ids.unwanted`); fewer than two `thinking_tags` while the
 * malformed-think check is on; exactly one think id after inference while
 * that check is on (the key of the missing id); an unreadable tokenizer.
 */
export function resolveRewardPenaltyConfig(
  cfg: RewardPenaltiesConfig | null,
  opts: { configDir: string; tokenizer?: TagEncoder | null },
): ResolvedRewardPenaltyConfig | null {
  if (cfg === null) return null;
  const tokenIds = cfg.token_ids ?? { unwanted: [], think_open: null, think_close: null };
  const unwanted = [...(tokenIds.unwanted ?? [])];
  if (cfg.penalize_unwanted_tokens && unwanted.length === 0) {
    throw new ConfigError(
      `${KEY}.token_ids.unwanted`,
      'must list at least one token id when penalize_unwanted_tokens is true',
    );
  }

  // A configured tokenizer is validated even when nothing needs inferring, so
  // a typo in its path surfaces at start-up rather than on the next config change.
  const encoder =
    opts.tokenizer ?? (cfg.tokenizer_path != null ? loadTokenizer(cfg.tokenizer_path, opts.configDir) : null);

  const tags = cfg.thinking_tags ?? ['<think>', '</think>'];
  let thinkOpen = tokenIds.think_open ?? null;
  let thinkClose = tokenIds.think_close ?? null;

  if (cfg.penalize_malformed_think_tag) {
    if (tags.length < 2) {
      throw new ConfigError(`${KEY}.thinking_tags`, 'needs two entries: [open, close]');
    }
    const inferredOpen = thinkOpen === null && encoder !== null ? inferSingleTokenId(encoder, tags[0]!) : null;
    const inferredClose = thinkClose === null && encoder !== null ? inferSingleTokenId(encoder, tags[1]!) : null;
    const anyExplicit = thinkOpen !== null || thinkClose !== null;
    if (anyExplicit || (inferredOpen !== null && inferredClose !== null)) {
      thinkOpen ??= inferredOpen;
      thinkClose ??= inferredClose;
    }
    if ((thinkOpen === null) !== (thinkClose === null)) {
      const missing = thinkOpen === null ? 'think_open' : 'think_close';
      throw new ConfigError(
        `${KEY}.token_ids.${missing}`,
        'think_open and think_close must both be set (or both inferable from the tokenizer), or neither',
      );
    }
  }

  return {
    penalize_duplicated_reasoning: cfg.penalize_duplicated_reasoning === true,
    penalize_empty_final_answer: cfg.penalize_empty_final_answer === true,
    penalize_unwanted_tokens: cfg.penalize_unwanted_tokens === true,
    penalize_malformed_think_tag: cfg.penalize_malformed_think_tag === true,
    unwanted_token_ids: unwanted,
    think_open: thinkOpen,
    think_close: thinkClose,
    thinking_tags: [tags[0] ?? '<think>', tags[1] ?? '</think>'],
  };
}

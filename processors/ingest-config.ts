/**
 * The `ingest` block of the config (SPEC §2.1, §9) resolved once at
 * start-up into the plain values `ingestGymResult` reads: the detector's
 * lists with their defaults applied, the route dtype, and the decoder that
 * writes `prompt_str` / `generation_str` (loading its `tokenizer.json` is
 * the one file read, here and not per row).
 */
import {
  DEFAULT_INGEST_THINKING_TAGS,
  DEFAULT_INVALID_TOOL_CALL_PATTERNS,
  type IngestConfig,
} from '../config/schema.js';
import { openTokenizer } from './reward-penalty-config.js';

/** Token ids → text, special tokens kept, no clean-up of tokenization spaces. */
export interface TokenDecoder {
  decode(ids: ArrayLike<number>): string;
  /** What identifies its vocabulary: the SHA-256 of the tokenizer.json it was loaded from (absent for hand-built ones). */
  readonly id?: string;
}

export interface ResolvedIngestConfig {
  invalid_tool_call_patterns: string[];
  thinking_tags: string[];
  routed_experts_dtype: 'int8' | 'int16' | 'int32';
  require_routed_experts: boolean;
  /** Null: no tokenizer configured, so items gain no `prompt_str` / `generation_str`. */
  decoder: TokenDecoder | null;
}

const PENALTY_TOKENIZER_KEY = 'postprocess.reward_penalties.tokenizer_path';

/**
 * A decoder over a local Hugging Face `tokenizer.json`; ConfigError on `key`
 * when it cannot be loaded. The library refuses an empty id list, which
 * decodes to "" here (a later turn may add no prompt tokens).
 */
export function loadTokenDecoder(tokenizerPath: string, configDir: string, key: string): TokenDecoder {
  const { tokenizer, sha256 } = openTokenizer(tokenizerPath, configDir, key);
  const options = { skip_special_tokens: false, clean_up_tokenization_spaces: false };
  return {
    decode: (ids) => (ids.length === 0 ? '' : tokenizer.decode(Array.from(ids), options)),
    id: `sha256:${sha256}`,
  };
}

/**
 * Resolves a schema-validated `ingest` block. Empty or missing lists get the
 * defaults (the schema already does this; repeated for hand-built configs).
 * The decoder is `opts.decoder` when given, else one loaded from
 * `ingest.tokenizer_path`, else from `postprocessTokenizerPath` (the
 * `postprocess.reward_penalties.tokenizer_path` value), a relative path
 * resolving against `configDir`; else none.
 *
 * @throws ConfigError naming `ingest.tokenizer_path` (or the postprocess key
 *   the path came from) when the tokenizer cannot be read.
 */
export function resolveIngestConfig(
  cfg: IngestConfig,
  opts: { configDir: string; postprocessTokenizerPath?: string | null; decoder?: TokenDecoder | null },
): ResolvedIngestConfig {
  const orDefault = (list: string[] | null | undefined, defaults: string[]) =>
    list && list.length > 0 ? [...list] : [...defaults];
  let decoder = opts.decoder ?? null;
  if (decoder === null) {
    if (cfg.tokenizer_path != null) {
      decoder = loadTokenDecoder(cfg.tokenizer_path, opts.configDir, 'ingest.tokenizer_path');
    } else if (opts.postprocessTokenizerPath != null) {
      decoder = loadTokenDecoder(opts.postprocessTokenizerPath, opts.configDir, PENALTY_TOKENIZER_KEY);
    }
  }
  return {
    invalid_tool_call_patterns: orDefault(cfg.invalid_tool_call_patterns, DEFAULT_INVALID_TOOL_CALL_PATTERNS),
    thinking_tags: orDefault(cfg.thinking_tags, DEFAULT_INGEST_THINKING_TAGS),
    routed_experts_dtype: cfg.routed_experts_dtype ?? 'int16',
    require_routed_experts: cfg.require_routed_experts === true,
    decoder,
  };
}

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { DEFAULT_INGEST_THINKING_TAGS, DEFAULT_INVALID_TOOL_CALL_PATTERNS, ingestConfigSchema } from '../../../config/schema.js';
import { resolveIngestConfig } from '../../../processors/ingest-config.js';
import { FIXTURES_DIR } from '../postprocess/row-builders.js';
import { configErrorOf } from '../../fixtures/config-error.js';

const parse = (raw: Record<string, unknown> = {}) => ingestConfigSchema.parse(raw);


describe('resolving the ingest config (SPEC §2.1, §9)', () => {
  test('an empty block resolves to the defaults and no decoder', () => {
    expect(resolveIngestConfig(parse(), { configDir: FIXTURES_DIR })).toEqual({
      invalid_tool_call_patterns: DEFAULT_INVALID_TOOL_CALL_PATTERNS,
      thinking_tags: DEFAULT_INGEST_THINKING_TAGS,
      routed_experts_dtype: 'int16',
      require_routed_experts: false,
      decoder: null,
    });
  });

  test('non-empty lists are used as given', () => {
    const r = resolveIngestConfig(parse({ invalid_tool_call_patterns: ['X'], thinking_tags: ['<r>'] }), { configDir: FIXTURES_DIR });
    expect([r.invalid_tool_call_patterns, r.thinking_tags]).toEqual([['X'], ['<r>']]);
  });

  test('ingest.tokenizer_path loads a decoder relative to the config folder, keeping special tokens', () => {
    const r = resolveIngestConfig(parse({ tokenizer_path: 'tokenizer.json' }), { configDir: FIXTURES_DIR });
    expect(r.decoder?.decode(Int32Array.from([7, 6, 8]))).toBe('<think> hello </think>');
    expect(r.decoder?.decode([])).toBe('');
  });

  test('without ingest.tokenizer_path the penalty config tokenizer is used', () => {
    const r = resolveIngestConfig(parse(), { configDir: FIXTURES_DIR, postprocessTokenizerPath: 'tokenizer.json' });
    expect(r.decoder?.decode([6])).toBe('hello');
  });

  test('ingest.tokenizer_path wins over the penalty config one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ingest-cfg-'));
    const err = configErrorOf(() =>
      resolveIngestConfig(parse({ tokenizer_path: join(dir, 'missing.json') }), {
        configDir: FIXTURES_DIR,
        postprocessTokenizerPath: 'tokenizer.json',
      }),
    );
    expect(err.path).toBe('ingest.tokenizer_path');
  });

  test('an unreadable tokenizer is a ConfigError naming the key it came from', () => {
    expect(configErrorOf(() => resolveIngestConfig(parse({ tokenizer_path: 'nope.json' }), { configDir: FIXTURES_DIR })).path).toBe(
      'ingest.tokenizer_path',
    );
    expect(
      configErrorOf(() => resolveIngestConfig(parse({ tokenizer_path: 'not-a-tokenizer.json' }), { configDir: FIXTURES_DIR })).message,
    ).toMatch(/^ingest\.tokenizer_path: cannot load tokenizer/);
    const dir = mkdtempSync(join(tmpdir(), 'ingest-cfg-'));
    writeFileSync(join(dir, 'broken.json'), '{not json');
    const err = configErrorOf(() => resolveIngestConfig(parse(), { configDir: dir, postprocessTokenizerPath: 'broken.json' }));
    expect(err.path).toBe('postprocess.reward_penalties.tokenizer_path');
  });

  test('a decoder passed in is used instead of loading one', () => {
    const decoder = { decode: () => 'x' };
    expect(resolveIngestConfig(parse({ tokenizer_path: 'nope.json' }), { configDir: FIXTURES_DIR, decoder }).decoder).toBe(decoder);
  });

  test('the schema rejects an unknown dtype and a non-boolean flag', () => {
    expect(() => parse({ routed_experts_dtype: 'int64' })).toThrow();
    expect(() => parse({ require_routed_experts: 0 })).toThrow();
  });
});

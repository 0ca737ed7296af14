/**
 * The ingest config fingerprint (processors/ingest-fingerprint.ts) that
 * records written by reference carry: equal for configs that convert alike,
 * different, key by key, for any setting the conversion reads.
 */
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ingestConfigSchema } from '../../../config/schema.js';
import { resolveIngestConfig } from '../../../processors/ingest-config.js';
import { INGEST_FINGERPRINT_KEYS, ingestFingerprint, ingestFingerprintDifferences } from '../../../processors/ingest-fingerprint.js';
import { FIXTURES_DIR } from '../postprocess/row-builders.js';

const fingerprintOf = (raw: Record<string, unknown>, opts: { configDir?: string; postprocessTokenizerPath?: string } = {}) =>
  ingestFingerprint(resolveIngestConfig(ingestConfigSchema.parse(raw), { configDir: opts.configDir ?? FIXTURES_DIR, postprocessTokenizerPath: opts.postprocessTokenizerPath ?? null }));

describe('the ingest config fingerprint', () => {
  test('the defaults, spelled out or left out, have one fingerprint of five digests', () => {
    const f = fingerprintOf({});
    expect(f).toMatch(/^ingest1:[0-9a-f]{8}(\.[0-9a-f]{8}){4}$/);
    expect(fingerprintOf({ thinking_tags: [], invalid_tool_call_patterns: null, routed_experts_dtype: 'int16', require_routed_experts: false })).toBe(f);
  });

  test.each([
    ['ingest.invalid_tool_call_patterns', { invalid_tool_call_patterns: ['CALL('] }],
    ['ingest.thinking_tags', { thinking_tags: ['<r>', '</r>'] }],
    ['ingest.routed_experts_dtype', { routed_experts_dtype: 'int32' }],
    ['ingest.require_routed_experts', { require_routed_experts: true }],
  ])('a change of %s changes the fingerprint, and only that key is named', (key, raw) => {
    expect(ingestFingerprintDifferences(fingerprintOf({}), fingerprintOf(raw))).toEqual([key]);
  });

  test('the tokenizer counts by its content: another file, same bytes, same fingerprint; none, or another one, differs', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ingest-fp-'));
    copyFileSync(join(FIXTURES_DIR, 'tokenizer.json'), join(dir, 'copy.json'));
    const here = fingerprintOf({ tokenizer_path: 'tokenizer.json' });
    expect(fingerprintOf({ tokenizer_path: join(dir, 'copy.json') })).toBe(here);
    // The penalty config's tokenizer is the decoder when ingest names none.
    expect(fingerprintOf({}, { postprocessTokenizerPath: 'tokenizer.json' })).toBe(here);
    const tokenizerKey = INGEST_FINGERPRINT_KEYS[4]!.key;
    expect(ingestFingerprintDifferences(here, fingerprintOf({}))).toEqual([tokenizerKey]);
  });

  test('a fingerprint of an unknown format differs in every key (nothing says which)', () => {
    expect(ingestFingerprintDifferences(fingerprintOf({}), 'ingest9:abc')).toEqual(INGEST_FINGERPRINT_KEYS.map((k) => k.key));
    expect(ingestFingerprintDifferences('x', 'x')).toEqual([]);
  });
});

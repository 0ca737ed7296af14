/**
 * The fingerprint of an ingest configuration: which GymResult → RolloutRow
 * conversion (SPEC §2.1, gym-ingest.ts) it runs. A record written by
 * reference (streams/codecs/row-refs.ts) names its rows' places in
 * `rollout.row-completed`, and a reader re-derives a GymResult row by
 * converting it again; under another configuration that would silently be
 * another row. So such records carry the fingerprint of the configuration
 * that derived them, and a reader with another one refuses them
 * (`ingest_config_mismatch`, streams/codecs/row-resolver.ts).
 *
 *   fingerprint := "ingest1:" digest ("." digest){4}
 *   digest      := the first 8 hex digits of SHA-256(JSON of one value), per
 *                  INGEST_FINGERPRINT_KEYS, in their order
 *
 * One digest per key, so a refusal can say which keys differ. The tokenizer
 * counts by its file's content, not its path. Pure: no clock, no Kafka.
 */
import { createHash } from 'node:crypto';
import type { ResolvedIngestConfig } from './ingest-config.js';

const VERSION = 'ingest1';

/** What the conversion reads, each under the config key an operator would change, in digest order. */
export const INGEST_FINGERPRINT_KEYS: ReadonlyArray<{ key: string; value: (c: ResolvedIngestConfig) => unknown }> = [
  { key: 'ingest.invalid_tool_call_patterns', value: (c) => c.invalid_tool_call_patterns },
  { key: 'ingest.thinking_tags', value: (c) => c.thinking_tags },
  { key: 'ingest.routed_experts_dtype', value: (c) => c.routed_experts_dtype },
  { key: 'ingest.require_routed_experts', value: (c) => c.require_routed_experts },
  // The decoder writes prompt_str / generation_str; a hand-built one without an id counts as one kind.
  { key: 'ingest.tokenizer_path (else postprocess.reward_penalties.tokenizer_path), by file content', value: (c) => (c.decoder ? (c.decoder.id ?? 'unidentified') : null) },
];

const digest = (value: unknown): string => createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 8);

/** The fingerprint of `cfg` (see the file comment). */
export function ingestFingerprint(cfg: ResolvedIngestConfig): string {
  return `${VERSION}:${INGEST_FINGERPRINT_KEYS.map((k) => digest(k.value(cfg))).join('.')}`;
}

/**
 * The config keys in which two fingerprints differ (empty when equal). A
 * fingerprint of another format than this one's names every key: nothing
 * tells which of them differ.
 */
export function ingestFingerprintDifferences(a: string, b: string): string[] {
  if (a === b) return [];
  const parts = (f: string) => {
    const [version, body] = f.split(':');
    const digests = body?.split('.') ?? [];
    return version === VERSION && digests.length === INGEST_FINGERPRINT_KEYS.length ? digests : null;
  };
  const [x, y] = [parts(a), parts(b)];
  if (!x || !y) return INGEST_FINGERPRINT_KEYS.map((k) => k.key);
  return INGEST_FINGERPRINT_KEYS.filter((_, i) => x[i] !== y[i]).map((k) => k.key);
}

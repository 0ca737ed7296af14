/** What `topics create` asks the broker for: the packed topic's compression (issue 16) and the data topics' retention (issue 26), beside the configs every topic has. */
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../../../config/load.js';
import { configSchema } from '../../../config/schema.js';
import { topicNames, topicSpecs } from '../../../streams/topics/names.js';

const specsOf = (topics: Record<string, unknown> = {}) => {
  const config = configSchema.parse({ topics: { prefix: 't.', ...topics } });
  return new Map(topicSpecs(config).map((s) => [s.topic, Object.fromEntries(s.configEntries.map((c) => [c.name, c.value]))]));
};

describe('topic specs', () => {
  test('rollout.packed is stored zstd-compressed by default; no other topic sets a compression', () => {
    const specs = specsOf();
    const names = topicNames('t.');
    expect(specs.get(names.packed)!['compression.type']).toBe('zstd');
    for (const [topic, entries] of specs) if (topic !== names.packed) expect(entries['compression.type'], topic).toBeUndefined();
  });

  test.each([
    ['lz4', 'lz4'],
    ['none', 'uncompressed'],
    ['producer', 'producer'],
  ])('topics.packed_compression %s → compression.type=%s', (given, broker) => {
    expect(specsOf({ packed_compression: given }).get(topicNames('t.').packed)!['compression.type']).toBe(broker);
  });

  test('an unknown codec stops at start-up naming the key', () => {
    const r = configSchema.safeParse({ topics: { packed_compression: 'brotli' } });
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]!.path).toEqual(['topics', 'packed_compression']);
  });

  describe('topics.retention_ms', () => {
    const names = topicNames('t.');
    const deleted = [names.rowCompleted, names.groupComplete, names.penalized, names.packed, names.deadLetter, names.metrics, names.batchProgress];
    const compacted = [names.accumulateChangelog, names.batchMetricsChangelog, names.packLedger];
    const retentionOf = (topics: Record<string, unknown> = {}) => {
      const specs = specsOf(topics);
      return Object.fromEntries([...specs].map(([topic, entries]) => [topic, entries['retention.ms']]));
    };

    test('default: 7 days on every delete-policy topic; the compacted changelogs and the ledger get none', () => {
      const r = retentionOf();
      for (const t of deleted) expect(r[t], t).toBe('604800000');
      for (const t of compacted) expect(r[t], t).toBeUndefined();
      expect(Object.keys(r).sort()).toEqual([...deleted, ...compacted].sort());
    });

    test.each([
      [3_600_000, '3600000'],
      [-1, '-1'],
    ])('%s → retention.ms=%s on the data topics only', (given, broker) => {
      const r = retentionOf({ retention_ms: given });
      for (const t of deleted) expect(r[t], t).toBe(broker);
      for (const t of compacted) expect(r[t], t).toBeUndefined();
    });

    test.each([0, -2, 1.5, '7d'])('%j stops at start-up naming the key', (bad) => {
      const r = configSchema.safeParse({ topics: { retention_ms: bad } });
      expect(r.success).toBe(false);
      expect(r.error!.issues[0]!.path).toEqual(['topics', 'retention_ms']);
      expect(() => loadConfig({ env: {}, overrides: [[['topics', 'retention_ms'], bad]] })).toThrow(/^topics\.retention_ms: /);
    });
  });
});

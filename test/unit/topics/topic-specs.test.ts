/** What `topics create` asks the broker for: the packed topic's compression (issue 16), beside the configs every topic has. */
import { describe, expect, test } from 'vitest';
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
});

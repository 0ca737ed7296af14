/**
 * Pack dead-letters only what it cannot pack (a PackError); any other
 * exception is a bug and goes to the runtime's error policy instead of
 * becoming a processing_error dead letter.
 */
import { expect, test } from 'vitest';
import { configSchema } from '../../../config/schema.js';
import { PackError } from '../../../processors/pack-error.js';
import type { SlabPool } from '../../../processors/slab.js';
import { avroSchema } from '../../../schemas/index.js';
import { TopicCodec } from '../../../streams/codecs/codec.js';
import type { SchemaRegistryClient } from '../../../streams/codecs/schema-registry.js';
import { packStage } from '../../../streams/stages/pack-stage.js';
import { topicNames } from '../../../streams/topics/names.js';
import { samplePenalized } from '../../fixtures/records.js';

// A registry stand-in for the codecs only.
const registry = { register: async () => 1, schemaById: async (id: number) => avroSchema(id === 1 ? 'penalized' : 'packed') } as unknown as SchemaRegistryClient;

/** A pack stage whose output memory fails with `error` (standing in for a failure inside packGroup). */
async function failingPack(error: Error) {
  const topics = topicNames('');
  const penalizedCodec = await new TopicCodec('penalized', 'p-value', registry).init();
  const packedCodec = await new TopicCodec('packed', 'k-value', registry).init();
  const slabPool = {
    source: () => {
      throw error;
    },
    release: () => undefined,
  } as unknown as SlabPool;
  const stage = packStage({ topics, config: configSchema.parse({}).pack, penalizedCodec, packedCodec, slabPool });
  const record = { topic: topics.penalized, partition: 0, offset: '0', key: Buffer.from('g-1'), value: penalizedCodec.encode(samplePenalized()), timestamp: 0 };
  return { processor: stage.createProcessor(0), record };
}

test('a TypeError in pack is no dead letter: it is thrown to the error policy', async () => {
  const { processor, record } = await failingPack(new TypeError("Cannot read properties of undefined (reading 'length')"));
  await expect(processor.process([record], 0)).rejects.toThrow(TypeError);
});

test('a group pack cannot pack (PackError) is a processing_error dead letter carrying the input record', async () => {
  const { processor, record } = await failingPack(new PackError('pack_bad_media', 'media x: dtype float32 differs from uint8 seen earlier in the group', 0));
  const out = await processor.process([record], 0);
  expect(out.messages).toEqual([]);
  expect(out.deadLetters).toHaveLength(1);
  expect(out.deadLetters[0]).toMatchObject({ reason: 'processing_error', stage: 'pack', group_id: 'g-1', records: [{ offset: '0', value: record.value }] });
  expect(out.deadLetters[0]!.message).toBe('pack failed for group g-1: row 0: media x: dtype float32 differs from uint8 seen earlier in the group');
});

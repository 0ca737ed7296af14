/**
 * The pack stage keeps one slab pool for all its partitions (README
 * "Sizing": the pool's bound is per process, not per partition): a group
 * packed on one partition reuses the value buffer another partition's
 * output released (after its transaction, through `PackStage.release`).
 */
import { expect, test } from 'vitest';
import { configSchema } from '../../../config/schema.js';
import { SlabPool } from '../../../processors/slab.js';
import { avroSchema } from '../../../schemas/index.js';
import { TopicCodec } from '../../../streams/codecs/codec.js';
import type { SchemaRegistryClient } from '../../../streams/codecs/schema-registry.js';
import { packStage } from '../../../streams/stages/pack-stage.js';
import { topicNames } from '../../../streams/topics/names.js';
import { samplePenalized } from '../../fixtures/records.js';

// A registry stand-in for the codecs only: this is a unit test of the stage's memory, not of the registry.
const registry = { register: async () => 1, schemaById: async (id: number) => avroSchema(id === 1 ? 'penalized' : 'packed') } as unknown as SchemaRegistryClient;

test('every partition of the pack stage draws its output memory from the one pool of the stage', async () => {
  const topics = topicNames('');
  const penalizedCodec = await new TopicCodec('penalized', 'p-value', registry).init();
  const packedCodec = await new TopicCodec('packed', 'k-value', registry).init();
  const slabPool = new SlabPool(1024 * 1024 * 1024);
  const stage = packStage({ topics, config: configSchema.parse({}).pack, penalizedCodec, packedCodec, slabPool });
  const value = penalizedCodec.encode(samplePenalized());
  const retained: number[] = [];
  for (let partition = 0; partition < 4; partition++) {
    const processor = stage.createProcessor(partition);
    const out = await processor.process([{ topic: topics.penalized, partition, offset: '0', key: null, value, timestamp: 0 }], 0);
    expect(out.messages).toHaveLength(1);
    // The value is the pool's memory, lent to the producer until the runtime releases it.
    expect(slabPool.retainedBytes).toBe(0);
    expect(stage.release(out.messages[0]!.value)).toBe(true);
    retained.push(slabPool.retainedBytes);
  }
  // One slab, taken and given back by each partition in turn (private pools would leave this one empty).
  expect(retained[0]).toBeGreaterThan(0);
  expect(retained).toEqual([retained[0], retained[0], retained[0], retained[0]]);
});

/**
 * The pack stage builds each packed value in memory from its pool and lends
 * it to the producer: a buffer is handed to a later group only after
 * `release(value)` (the runtime's call once the transaction that carried the
 * value committed or aborted). A slow producer that holds many values while
 * the stage keeps packing must find every value unchanged until it lets go,
 * and equal to the offline bytes (packGroup + encode).
 */
import { createHash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { rng, synthesizeGroup } from '../../../bench/synthetic-groups.js';
import { configSchema } from '../../../config/schema.js';
import { packGroup } from '../../../processors/pack.js';
import { SlabPool } from '../../../processors/slab.js';
import type { PenalizedGroup } from '../../../processors/types.js';
import { avroSchema } from '../../../schemas/index.js';
import { TopicCodec } from '../../../streams/codecs/codec.js';
import type { SchemaRegistryClient } from '../../../streams/codecs/schema-registry.js';
import { PACK_SLAB_POOL_BYTES, packStage } from '../../../streams/stages/pack-stage.js';
import { topicNames } from '../../../streams/topics/names.js';

// A registry stand-in for the codecs only: this is a unit test of the stage's memory.
const registry = { register: async () => 1, schemaById: async (id: number) => avroSchema(id === 1 ? 'penalized' : 'packed') } as unknown as SchemaRegistryClient;

const sha = (v: Uint8Array) => createHash('sha256').update(v).digest('hex');

async function setup(wire: 'trainer' | 'narrow') {
  const topics = topicNames('');
  const penalizedCodec = await new TopicCodec('penalized', 'p-value', registry).init();
  const packedCodec = await new TopicCodec('packed', 'k-value', registry, { packedWire: wire }).init();
  const config = configSchema.parse({ pack: { wire_dtypes: wire, include_message_violation_fields: true } }).pack;
  const slabPool = new SlabPool(PACK_SLAB_POOL_BYTES);
  const stage = packStage({ topics, config, penalizedCodec, packedCodec, slabPool });
  const processor = stage.createProcessor(0);
  let offset = 0;
  const pack = async (group: PenalizedGroup) => {
    const value = penalizedCodec.encode(group);
    const out = await processor.process([{ topic: topics.penalized, partition: 0, offset: String(offset++), key: null, value, timestamp: 0 }], 0);
    expect(out.deadLetters).toEqual([]);
    expect(out.messages).toHaveLength(1);
    return out.messages[0]!.value;
  };
  const offline = (group: PenalizedGroup) => sha(packedCodec.encode(packGroup(group, config)));
  return { stage, slabPool, pack, offline };
}

/** Groups of a few sizes, some routed, so buffers of one size are reused across groups. */
function groups(count: number): PenalizedGroup[] {
  return Array.from({ length: count }, (_, i) =>
    synthesizeGroup(21, i, { rows: 3 + (i % 3), minTokens: 100, maxTokens: 900, routes: i % 4 === 3 ? [2, 4] : null }),
  );
}

describe('pack stage output recycling', () => {
  test.each(['trainer', 'narrow'] as const)('a slow producer holding values never sees them overwritten, and they equal the offline bytes (%s wire)', async (wire) => {
    const { stage, slabPool, pack, offline } = await setup(wire);
    const r = rng(5);
    // The producer holds up to 6 values and acknowledges them out of order.
    const held: { value: Buffer; sum: string; expected: string }[] = [];
    const buffers = new Set<ArrayBufferLike>();
    let reused = 0;
    const ack = () => {
      const k = Math.floor(r() * held.length);
      const { value, sum, expected } = held.splice(k, 1)[0]!;
      // What the broker received is what the stage produced, byte for byte, and what the offline runner writes.
      expect(sha(value)).toBe(sum);
      expect(sum).toBe(expected);
      expect(stage.release(value)).toBe(true);
      // A second release (a retried hook, an abort after a commit) is ignored.
      expect(stage.release(value)).toBe(false);
    };
    for (const group of groups(40)) {
      const value = await pack(group);
      if (buffers.has(value.buffer)) reused++;
      buffers.add(value.buffer);
      // No value still held shares memory with the new one.
      for (const h of held) expect(h.value.buffer).not.toBe(value.buffer);
      held.push({ value, sum: sha(value), expected: offline(group) });
      expect(slabPool.lentCount).toBe(held.length);
      if (held.length > 5) ack();
      if (r() < 0.3 && held.length > 0) ack();
    }
    while (held.length > 0) ack();
    expect(slabPool.lentCount).toBe(0);
    expect(reused).toBeGreaterThan(10);
  });

  test('a stale release of a value whose buffer now carries a later value does not free that buffer', async () => {
    const { stage, pack } = await setup('trainer');
    const [a, b, c] = groups(3).map((g) => ({ ...g, rows: g.rows.slice(0, 3) }));
    const first = await pack(a!);
    expect(stage.release(first)).toBe(true);
    // The same rows under another group id (the same group again would be recognised by pack's ledger, not packed).
    const second = await pack({ ...a!, group_id: `${a!.group_id}-again` });
    expect(second.buffer).toBe(first.buffer);
    const kept = sha(second);
    // The runtime calls release(first) again, late: the buffer is lent with `second` now.
    expect(stage.release(first)).toBe(false);
    const third = await pack(b!);
    const fourth = await pack(c!);
    expect(third.buffer).not.toBe(second.buffer);
    expect(fourth.buffer).not.toBe(second.buffer);
    expect(sha(second)).toBe(kept);
  });

  test('values never released are left to the GC, and the stage keeps packing into fresh memory', async () => {
    const { slabPool, pack, offline } = await setup('trainer');
    for (const group of groups(6)) expect(sha(await pack(group))).toBe(offline(group));
    expect(slabPool.retainedBytes).toBe(0);
    expect(slabPool.lentCount).toBe(6);
  });

  // Identity checks as booleans: vitest's toBe on 300 MiB buffers compares them for its message.
  test('the stage pool recycles one value above 256 MiB (the old slab limit) and bounds what it keeps free', () => {
    const pool = new SlabPool(PACK_SLAB_POOL_BYTES);
    const big = pool.source(300 * 1024 * 1024);
    const value = Buffer.from(big, 0, 300 * 1024 * 1024);
    pool.lend(value);
    expect(pool.source(300 * 1024 * 1024) === big).toBe(false);
    expect(pool.settle(value)).toBe(true);
    expect(pool.retainedBytes).toBe(big.byteLength);
    const again = pool.source(290 * 1024 * 1024);
    expect(again === big).toBe(true);
    const other = pool.source(300 * 1024 * 1024);
    expect(other === big).toBe(false);
    // Both free would exceed the bound: the older one goes to the GC.
    expect(pool.give(big)).toBe(true);
    expect(pool.give(other)).toBe(true);
    expect(pool.retainedBytes).toBe(other.byteLength);
    expect(pool.retainedBytes).toBeLessThanOrEqual(PACK_SLAB_POOL_BYTES);
    expect(pool.source(300 * 1024 * 1024) === other).toBe(true);
    // A buffer larger than the bound itself is never kept.
    expect(pool.give(pool.source(PACK_SLAB_POOL_BYTES))).toBe(false);
  });
});

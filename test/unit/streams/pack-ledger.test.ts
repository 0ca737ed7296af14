/**
 * Pack's ledger (streams/stages/pack-ledger.ts): a group packed once is not
 * packed again — the same result again is an idempotent replay (counted,
 * logged, nothing written), a different one a `group_already_packed` dead
 * letter — across a restore from its changelog, within its bound.
 */
import { describe, expect, test } from 'vitest';
import { synthesizeGroup } from '../../../bench/synthetic-groups.js';
import { configSchema } from '../../../config/schema.js';
import type { PenalizedGroup } from '../../../processors/types.js';
import { avroSchema } from '../../../schemas/index.js';
import type { ChangelogRecord } from '../../../streams/api/stage.js';
import { TopicCodec } from '../../../streams/codecs/codec.js';
import type { SchemaRegistryClient } from '../../../streams/codecs/schema-registry.js';
import { packStage } from '../../../streams/stages/pack-stage.js';
import { topicNames } from '../../../streams/topics/names.js';

const registry = { register: async () => 1, schemaById: async (id: number) => avroSchema(id === 1 ? 'penalized' : 'packed') } as unknown as SchemaRegistryClient;

async function setup(ledgerGroups?: number) {
  const topics = topicNames('');
  const penalizedCodec = await new TopicCodec('penalized', 'p-value', registry).init();
  const packedCodec = await new TopicCodec('packed', 'k-value', registry).init();
  const logs: string[] = [];
  const stage = packStage({ topics, config: configSchema.parse({}).pack, penalizedCodec, packedCodec, log: (m) => logs.push(m), ...(ledgerGroups ? { ledgerGroups } : {}) });
  let offset = 0;
  const processor = () => {
    const p = stage.createProcessor(0);
    return {
      restore: (r: ChangelogRecord) => p.restore!(r),
      pack: (group: PenalizedGroup) =>
        p.process([{ topic: topics.penalized, partition: 0, offset: String(offset++), key: Buffer.from(group.group_id), value: penalizedCodec.encode(group), timestamp: 0 }], 0),
    };
  };
  return { stage, logs, processor };
}

const group = (i: number) => synthesizeGroup(7, i, { rows: 3, minTokens: 50, maxTokens: 200, routes: null });

describe('pack ledger', () => {
  test('the same group again is an idempotent replay; other content for it is a group_already_packed dead letter', async () => {
    const { stage, logs, processor } = await setup();
    const p = processor();
    const g = group(0);
    const first = await p.pack(g);
    expect(first.messages).toHaveLength(1);
    const entries = first.messages[0]!.changelog!;
    expect(entries).toHaveLength(1);
    expect(stage.changelogTopic).toBe(topicNames('').packLedger);

    const again = await p.pack(g);
    expect(again.messages).toEqual([]);
    expect(again.deadLetters).toEqual([]);
    expect(again.counters).toEqual({ already_packed: 1 });
    expect(logs.filter((l) => l.includes(`group ${g.group_id} of batch ${g.batch_id}`) && l.includes('packed already'))).toHaveLength(1);

    const changed: PenalizedGroup = { ...g, rows: g.rows.map((r, i) => (i === 0 ? { ...r, total_reward: r.total_reward + 1 } : r)) };
    const other = await p.pack(changed);
    expect(other.messages).toEqual([]);
    expect(other.deadLetters.map((d) => [d.reason, d.group_id, d.batch_id])).toEqual([['group_already_packed', g.group_id, g.batch_id]]);
    expect(other.deadLetters[0]!.records).toHaveLength(1);

    // A fresh processor restored from the ledger's changelog knows the group.
    const restored = processor();
    for (const r of entries) await restored.restore(r);
    expect((await restored.pack(g)).counters).toEqual({ already_packed: 1 });
    // One the changelog does not name is packed.
    expect((await restored.pack(group(1))).messages).toHaveLength(1);
  });

  test('a packed record dead-lettered instead (too large) is not remembered as packed', async () => {
    const { processor } = await setup();
    const p = processor();
    const out = await p.pack(group(0));
    out.messages[0]!.dropped!();
    expect((await p.pack(group(0))).messages).toHaveLength(1);
  });

  test('beyond its bound the ledger forgets the oldest group, with a tombstone', async () => {
    const { processor } = await setup(2);
    const p = processor();
    await p.pack(group(0));
    await p.pack(group(1));
    const third = await p.pack(group(2));
    const ledger = third.messages[0]!.changelog!;
    expect(ledger.map((r) => r.value === null)).toEqual([false, true]);
    expect(ledger[1]!.key).toContain(group(0).group_id);
    expect((await p.pack(group(0))).messages).toHaveLength(1);
    expect((await p.pack(group(2))).counters).toEqual({ already_packed: 1 });
  });
});

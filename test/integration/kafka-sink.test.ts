/**
 * The kafkajs TransactionalSink against the real broker: guarded calls,
 * positions of acknowledged records, commit and abort as read_committed
 * readers see them, and fencing by a newer owner of the transactional id.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { KafkajsIdempotentSink, KafkajsTransactionalSink } from '../../streams/kafka/kafkajs/sink.js';
import { partitionForKey } from '../../streams/topics/partitioner.js';
import { topicNames } from '../../streams/topics/names.js';
import { testEnv, type TestEnv } from './helpers.js';
import { readTopic } from './topic-reader.js';

let env: TestEnv | undefined;
const sinks: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const s of sinks.splice(0)) await s.close();
  await env?.close();
  env = undefined;
});

const errorOf = async (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as Error & { code?: string });

describe('kafkajs transactional sink', () => {
  test('guards, positions, commit and abort, fencing', async () => {
    env = await testEnv('sink');
    const e = env;
    const topic = topicNames(e.prefix).metrics;
    const partitionsOf = async () => 4;
    const a = new KafkajsTransactionalSink(e.kafka, `${e.prefix}tx`, 30_000, { partitionsOf });
    sinks.push(a);
    expect((await errorOf(a.send([])))?.code, 'send before init').toBe('transaction_state');
    await a.init();
    expect(a.state).toBe('ready');
    expect((await errorOf(a.commit()))?.code, 'commit outside a transaction').toBe('transaction_state');

    await a.begin();
    const pos = await a.send([
      { topic, partition: 2, key: 'p2-a', value: Buffer.from('1') },
      { topic, key: 'keyed', value: Buffer.from('2') },
      { topic, partition: 2, key: 'p2-b', value: Buffer.from('3') },
    ]);
    await a.commit();
    expect(pos[0]).toEqual({ topic, partition: 2, offset: '0' });
    expect(pos[2]).toEqual({ topic, partition: 2, offset: '1' });
    expect(pos[1]!.partition).toBe(partitionForKey('keyed', 4));

    await a.begin();
    await a.send([{ topic, partition: 2, key: 'aborted', value: Buffer.from('x') }]);
    await a.abort();
    expect(a.state).toBe('ready');

    const seen = await readTopic(e.kafka, topic, (rs) => rs.length >= 3, { settleMs: 1500 });
    expect(seen.map((r) => [r.key, r.partition, r.offset]).sort()).toEqual(
      [['keyed', pos[1]!.partition, pos[1]!.offset], ['p2-a', 2, '0'], ['p2-b', 2, '1']].sort(),
    );

    // A newer owner of the id fences the older one at its next use.
    const b = new KafkajsTransactionalSink(e.kafka, `${e.prefix}tx`, 30_000, { partitionsOf });
    sinks.push(b);
    await b.init();
    await a.begin();
    const fenced = await errorOf(a.send([{ topic, partition: 0, key: 'zombie', value: Buffer.from('z') }]).then(() => a.commit()));
    expect(fenced?.code).toBe('producer_fenced');
    expect(a.state).toBe('fenced');
    expect((await errorOf(a.begin()))?.code, 'a fenced sink refuses everything but close').toBe('transaction_state');
    await b.begin();
    await b.send([{ topic, partition: 0, key: 'owner', value: Buffer.from('o') }]);
    await b.commit();
    const after = await readTopic(e.kafka, topic, (rs) => rs.some((r) => r.key === 'owner'), { settleMs: 1500 });
    expect(after.map((r) => r.key)).not.toContain('zombie');
  });

  test('the idempotent sink places keyed records by murmur2 and reports where they landed', async () => {
    env = await testEnv('isink');
    const topic = topicNames(env.prefix).metrics;
    const s = new KafkajsIdempotentSink(env.kafka, { partitionsOf: async () => 4 });
    sinks.push(s);
    const pos = await s.send(['g1', 'g2', 'g1'].map((k, i) => ({ topic, key: k, value: Buffer.from(String(i)) })));
    expect(pos.map((p) => p.partition)).toEqual(['g1', 'g2', 'g1'].map((k) => partitionForKey(k, 4)));
    expect(BigInt(pos[2]!.offset)).toBe(BigInt(pos[0]!.offset) + 1n);
  });
});

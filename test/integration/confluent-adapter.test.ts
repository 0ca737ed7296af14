/**
 * The @confluentinc/kafka-javascript adapter (streams/kafka/confluent/,
 * librdkafka) against the real broker, with the kafkajs adapter's tests'
 * expectations: the transactional sink's guards, positions, commit and abort
 * as read_committed readers see them (read back with kafkajs), fencing by a
 * newer owner of the id, offsets committed with the transaction (KIP-447,
 * through a member of the group), the group source's pull, one batch per
 * partition until released, re-fetch, seek and a rebalance, the mode
 * exclusion through the stand-in assignors and the guard member that takes
 * no partition, and the admin and scans.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, test } from 'vitest';
import type { ConfluentClient } from '../../streams/kafka/confluent/client.js';
import { FUSED_PROTOCOL, GUARD_PROTOCOLS, SEPARATE_PROTOCOL } from '../../streams/runtime/mode-guard.js';
import type { FetchedBatch, GroupSource, KafkaAdmin, RebalanceListener } from '../../streams/kafka/types.js';
import { partitionForKey } from '../../streams/topics/partitioner.js';
import { topicNames } from '../../streams/topics/names.js';
import { testEnv, type TestEnv } from './helpers.js';
import { readTopic } from './topic-reader.js';

// An optional dependency with a native build (librdkafka): where it did not build, these tests are skipped.
const adapter = await import('../../streams/kafka/confluent/client.js').catch((e: unknown) => {
  console.log(`@confluentinc/kafka-javascript is not installed here: confluent adapter tests skipped (${(e as Error).message.split('\n')[0]})`);
  return null;
});

let env: TestEnv | undefined;
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
  await env?.close();
  env = undefined;
});

const errorOf = async (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as Error & { code?: string });

function listener(log: string[]): RebalanceListener {
  return {
    onAssigned: async (ps) => void log.push(`+${ps.join(',')}`),
    onRevoked: async (ps) => void log.push(`-${ps.join(',')}`),
    onLost: (e) => void log.push(`lost ${String(e)}`),
  };
}

async function drive(s: GroupSource, ms: number, decide: (b: FetchedBatch) => string | null, until: () => boolean): Promise<void> {
  const deadline = Date.now() + ms;
  while (!until() && Date.now() < deadline) for (const b of await s.poll(200)) s.release(b, decide(b));
}

function client(e: TestEnv): ConfluentClient {
  const c = adapter!.createConfluentClient(e.config.kafka, 'test-confluent');
  closers.push(() => c.close());
  return c;
}

async function fill(e: TestEnv, topic: string, sends: number, perSend: number): Promise<void> {
  const producer = e.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (let s = 0; s < sends; s++) {
    await producer.send({ topic, messages: [...Array(perSend).keys()].map((j) => s * perSend + j).map((i) => ({ partition: i % 4, key: `k${i}`, value: Buffer.from(String(i)) })) });
  }
  await producer.disconnect();
}

describe.skipIf(adapter === null)('@confluentinc/kafka-javascript adapter', () => {
  test('the transactional sink guards its calls, reports positions, commits, aborts and is fenced by a newer owner', async () => {
    env = await testEnv('cfl-sink');
    const e = env;
    const c = client(e);
    const topic = topicNames(e.prefix).metrics;
    const o = { transactionTimeoutMs: 30_000, partitionsOf: async () => 4 };
    const a = c.transactionalSink(`${e.prefix}tx`, o);
    closers.push(() => a.close());
    expect((await errorOf(a.send([])))?.code, 'send before init').toBe('transaction_state');
    await a.init();
    expect(a.state).toBe('ready');
    expect((await errorOf(a.commit()))?.code, 'commit outside a transaction').toBe('transaction_state');

    await a.begin();
    const pos = await a.send([
      { topic, partition: 2, key: 'p2-a', value: Buffer.from('1') },
      { topic, key: 'keyed', value: Buffer.from('2'), headers: { h: 'v' } },
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

    const b = c.transactionalSink(`${e.prefix}tx`, o);
    closers.push(() => b.close());
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

  test('input offsets commit with the transaction and not with an aborted one, through a member of the group', async () => {
    env = await testEnv('cfl-offsets');
    const e = env;
    const c = client(e);
    const names = topicNames(e.prefix);
    const input = names.metrics;
    const output = names.packed;
    await fill(e, input, 2, 8);
    const groupId = `${e.prefix}group.${randomUUID()}`;
    const o = { transactionTimeoutMs: 30_000, partitionsOf: async () => 4 };

    const orphan = c.transactionalSink(`${e.prefix}orphan`, o);
    closers.push(() => orphan.close());
    await orphan.init();
    await orphan.begin();
    expect((await errorOf(orphan.sendOffsets(`${e.prefix}no-member`, [{ topic: input, partition: 0, offset: '1' }])))?.code, 'no member of that group').toBe('usage');
    await orphan.abort();

    const source = c.groupSource({ groupId, topic: input, sessionTimeoutMs: 6000, maxBytes: 1024 * 1024 });
    closers.push(() => source.stop());
    const log: string[] = [];
    await source.start(listener(log));
    const sink = c.transactionalSink(`${e.prefix}tx`, o);
    closers.push(() => sink.close());
    await sink.init();
    const admin: KafkaAdmin = await c.admin();
    closers.push(() => admin.close());

    // librdkafka may hand a partition's records out in more than one batch: go on until every partition is read.
    const done = new Set<number>();
    let aborted = false;
    const deadline = Date.now() + 30_000;
    while (done.size < 4 && Date.now() < deadline) {
      for (const b of await source.poll(200)) {
        const next = (BigInt(b.records.at(-1)!.offset) + 1n).toString();
        await sink.begin();
        await sink.send(b.records.map((r) => ({ topic: output, partition: b.partition, key: r.key, value: r.value })));
        await sink.sendOffsets(groupId, [{ topic: input, partition: b.partition, offset: next }]);
        if (!aborted && b.partition === 1) {
          // The first batch of partition 1 is aborted: its offset must not count, and it comes again.
          aborted = true;
          await sink.abort();
          source.release(b, null);
          expect((await admin.committedOffsets(groupId, input)).get(1)).toBeUndefined();
          continue;
        }
        await sink.commit();
        source.release(b, next);
        if (next === '4') done.add(b.partition);
      }
    }
    expect(aborted).toBe(true);
    const offsets = await admin.committedOffsets(groupId, input);
    expect(Object.fromEntries(offsets)).toEqual({ 0: '4', 1: '4', 2: '4', 3: '4' });
    const out = await readTopic(e.kafka, output, (rs) => rs.length >= 16, { settleMs: 1500 });
    expect(out.length, 'the aborted copy of partition 1 is not visible').toBe(16);
  });

  test('the group source pulls, holds one batch per partition until released, re-fetches, seeks and rebalances', async () => {
    env = await testEnv('cfl-source');
    const e = env;
    const c = client(e);
    const topic = topicNames(e.prefix).metrics;
    await fill(e, topic, 20, 10);
    const groupId = `${e.prefix}group.${randomUUID()}`;
    const log: string[] = [];
    const a = c.groupSource({ groupId, topic, sessionTimeoutMs: 6000, maxBytes: 256 });
    closers.push(() => a.stop());
    await a.start(listener(log));

    let first: FetchedBatch[] = [];
    for (let i = 0; i < 50 && first.length === 0; i++) first = await a.poll(200);
    expect(first.length).toBeGreaterThan(0);
    expect(log[0]).toBe('+0,1,2,3');
    const heldParts = new Set(first.map((b) => b.partition));
    const during = await a.poll(1500);
    expect(during.filter((b) => heldParts.has(b.partition)), 'no second batch of a partition whose batch is out').toEqual([]);
    const firstOffsets = new Map(first.map((b) => [b.partition, b.records[0]!.offset]));
    for (const b of [...first, ...during]) a.release(b, null);
    const again = new Map<number, string>();
    await drive(a, 10_000, (b) => {
      if (!again.has(b.partition)) again.set(b.partition, b.records[0]!.offset);
      return null;
    }, () => [...firstOffsets.keys()].every((p) => again.has(p)));
    for (const [p, off] of firstOffsets) expect(again.get(p)).toBe(off);

    const seen = new Map<string, number>();
    let sought = false;
    await drive(
      a,
      20_000,
      (b) => {
        for (const r of b.records) seen.set(`${r.partition}/${r.offset}`, (seen.get(`${r.partition}/${r.offset}`) ?? 0) + 1);
        const next = (BigInt(b.records[b.records.length - 1]!.offset) + 1n).toString();
        if (b.partition === 3 && !sought && BigInt(next) > 46n) {
          sought = true;
          a.seek(3, '40');
        }
        return next;
      },
      () => seen.size >= 200 && sought && (seen.get('3/45') ?? 0) >= 2,
    );
    expect(seen.size).toBe(200);
    expect(seen.get('3/45'), 'the seek made partition 3 read offset 45 again').toBe(2);
    expect(seen.get('2/10'), 'other partitions once').toBe(1);

    const logB: string[] = [];
    const b = c.groupSource({ groupId, topic, sessionTimeoutMs: 6000, maxBytes: 1024 * 1024 });
    closers.push(() => b.stop());
    await b.start(listener(logB));
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && (a.assignment().size + b.assignment().size !== 4 || b.assignment().size === 0 || logB.length === 0)) {
      for (const s of [a, b]) for (const x of await s.poll(100)) s.release(x, null);
    }
    expect(a.assignment().size + b.assignment().size).toBe(4);
    expect([...a.assignment()].some((p) => b.assignment().has(p))).toBe(false);
    expect(log.some((l) => l.startsWith('-')), `first member told of its revoked partitions: ${log.join(' ')}`).toBe(true);
    expect(logB[0]?.startsWith('+')).toBe(true);
  });

  test('a member of the other mode is refused as mode_conflict, and a guard member holds the group taking no partition', async () => {
    env = await testEnv('cfl-modes');
    const e = env;
    const c = client(e);
    const topic = topicNames(e.prefix).metrics;
    await fill(e, topic, 2, 8);
    const groupId = `${e.prefix}group.${randomUUID()}`;
    const o = { groupId, topic, sessionTimeoutMs: 6000, maxBytes: 1024 * 1024 };
    expect(() => c.groupSource({ ...o, protocols: { names: ['some-other/1'] } }), 'a name without a stand-in').toThrow(/cannot announce assignment protocol some-other\/1/);

    const guard = c.groupSource({ ...o, protocols: GUARD_PROTOCOLS });
    closers.push(() => guard.stop());
    await guard.start(listener([]));
    expect(guard.assignment().size).toBe(0);
    const fused = c.groupSource({ ...o, protocols: { names: [FUSED_PROTOCOL] } });
    closers.push(() => fused.stop());
    const log: string[] = [];
    await fused.start(listener(log));
    let seen = 0;
    await drive(fused, 30_000, (b) => ((seen += b.records.length), (BigInt(b.records.at(-1)!.offset) + 1n).toString()), () => seen >= 16);
    expect(seen, 'the fused member reads every partition').toBe(16);
    expect([...fused.assignment()].sort()).toEqual([0, 1, 2, 3]);
    expect(guard.assignment().size, 'the guard takes no partition of the topic').toBe(0);

    const separate = c.groupSource({ ...o, protocols: { names: [SEPARATE_PROTOCOL] } });
    const refused = await errorOf(separate.start(listener([])));
    expect(refused?.code, String(refused)).toBe('mode_conflict');
    const admin = await c.admin();
    closers.push(() => admin.close());
    const described = await admin.describeGroup(groupId);
    expect(described.members).toBe(2);
    expect(described.protocol).toBe('roundrobin');
  });

  test('the admin answers the cluster questions and a scan reads ranges read_committed', async () => {
    env = await testEnv('cfl-admin');
    const e = env;
    const c = client(e);
    const topic = topicNames(e.prefix).metrics;
    await fill(e, topic, 2, 8);
    const admin = await c.admin();
    closers.push(() => admin.close());
    expect(await admin.partitionCount(topic)).toBe(4);
    expect((await errorOf(admin.partitionCount(`${e.prefix}missing`)))?.code).toBe('unknown_topic');
    expect(await admin.listTopics()).toContain(topic);
    expect((await admin.topicOffsets(topic)).map((p) => [p.partition, p.low, p.high])).toEqual([0, 1, 2, 3].map((p) => [p, '0', '4']));
    expect(await admin.brokerCount()).toBeGreaterThanOrEqual(1);
    const keys: string[] = [];
    const res = await c.scan([{ topic, partition: 1, start: '1', end: '3' }], (r) => void keys.push(r.key!.toString()));
    expect(res).toEqual({ records: 2, complete: true, unfinished: [] });
    expect(keys).toEqual(['k5', 'k9']);
  });
});

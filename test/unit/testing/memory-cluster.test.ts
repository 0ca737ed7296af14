/**
 * The in-memory cluster keeps the Kafka semantics the runtime relies on
 * (the same ones test/integration/kafka-{sink,source,admin}.test.ts check on
 * the real broker): transactions and read_committed, fencing, offsets
 * committed with a transaction, pull with one batch per partition, seeks,
 * rebalances and the classic group protocol rule; and, as a KafkaClient,
 * guard members, scans, and connections that stop dead.
 */
import { describe, expect, test } from 'vitest';
import type { FetchedBatch, RebalanceListener } from '../../../streams/kafka/types.js';
import { MemoryCluster } from '../../../streams/testing/memory-cluster.js';
import { partitionForKey } from '../../../streams/topics/partitioner.js';

const errorOf = async (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as Error & { code?: string });
const quiet = (log: string[] = []): RebalanceListener => ({
  onAssigned: async (ps) => void log.push(`+${ps.join(',')}`),
  onRevoked: async (ps) => void log.push(`-${ps.join(',')}`),
  onLost: () => undefined,
});
const values = (rs: Array<{ value: Buffer | null }>) => rs.map((r) => r.value?.toString());

describe('memory cluster: transactions', () => {
  test('committed records become visible, aborted ones never, markers take an offset, an open transaction holds readers back', async () => {
    const c = new MemoryCluster();
    c.createTopic('t', 2);
    const s = c.transactionalSink('id');
    expect((await errorOf(s.send([])))?.code).toBe('transaction_state');
    await s.init();
    await s.begin();
    const pos = await s.send([
      { topic: 't', partition: 1, key: 'a', value: Buffer.from('1') },
      { topic: 't', key: 'k', value: Buffer.from('2') },
    ]);
    expect(pos[0]).toEqual({ topic: 't', partition: 1, offset: '0' });
    expect(pos[1]!.partition).toBe(partitionForKey('k', 2));
    expect(c.committedRecords('t')).toEqual([]);
    // A non-transactional write after the open transaction is held back too (last stable offset).
    await c.idempotentSink().send([{ topic: 't', partition: 1, key: 'n', value: Buffer.from('plain') }]);
    expect(values(c.readCommitted('t', 1, 0n, 10).records)).toEqual([]);
    await s.commit();
    expect(values(c.readCommitted('t', 1, 0n, 10).records)).toEqual(pos[1]!.partition === 1 ? ['1', '2', 'plain'] : ['1', 'plain']);
    await s.begin();
    await s.send([{ topic: 't', partition: 1, key: 'x', value: Buffer.from('aborted') }]);
    await s.abort();
    expect(values(c.readCommitted('t', 1, 0n, 100).records)).not.toContain('aborted');
    // Two records, the plain one, the commit marker, the aborted record and its marker (plus the keyed record if it went to 1).
    expect(Number(c.highWatermark('t', 1))).toBe(pos[1]!.partition === 1 ? 6 : 5);
  });

  test('init fences the previous owner and aborts what it left open; offsets commit with the transaction only', async () => {
    const c = new MemoryCluster();
    c.createTopic('in', 1);
    c.createTopic('out', 1);
    const zombie = c.transactionalSink('stage.in.0');
    await zombie.init();
    await zombie.begin();
    await zombie.send([{ topic: 'out', partition: 0, key: 'g', value: Buffer.from('zombie') }]);
    await zombie.sendOffsets('grp', [{ topic: 'in', partition: 0, offset: '5' }]);
    const owner = c.transactionalSink('stage.in.0');
    await owner.init();
    expect(c.readCommitted('out', 0, 0n, 10).records).toEqual([]);
    expect((await errorOf(zombie.commit()))?.code).toBe('producer_fenced');
    expect(zombie.state).toBe('fenced');
    expect((await errorOf(zombie.begin()))?.code).toBe('transaction_state');
    expect(await (await c.admin()).committedOffsets('grp', 'in')).toEqual(new Map());
    await owner.begin();
    await owner.send([{ topic: 'out', partition: 0, key: 'g', value: Buffer.from('owner') }]);
    await owner.sendOffsets('grp', [{ topic: 'in', partition: 0, offset: '5' }]);
    expect(await (await c.admin()).committedOffsets('grp', 'in')).toEqual(new Map());
    await owner.commit();
    expect(values(c.committedRecords('out'))).toEqual(['owner']);
    expect(await (await c.admin()).committedOffsets('grp', 'in')).toEqual(new Map([[0, '5']]));
  });
});

describe('memory cluster: group sources', () => {
  async function filled(n: number, partitions = 4): Promise<MemoryCluster> {
    const c = new MemoryCluster();
    c.createTopic('t', partitions);
    await c.idempotentSink().send([...Array(n).keys()].map((i) => ({ topic: 't', partition: i % partitions, key: `k${i}`, value: Buffer.from(String(i)) })));
    return c;
  }

  test('one batch per partition until released; a release without progress fetches it again; seek moves the next fetch', async () => {
    const c = await filled(40);
    const s = c.source({ groupId: 'g', topic: 't', maxRecords: 3 });
    const log: string[] = [];
    await s.start(quiet(log));
    expect(log).toEqual(['+0,1,2,3']);
    const first = await s.poll(0);
    expect(first.map((b) => [b.partition, b.records.map((r) => r.offset)])).toEqual([0, 1, 2, 3].map((p) => [p, ['0', '1', '2']]));
    expect(await s.poll(0)).toEqual([]);
    s.release(first[0]!, null);
    s.release(first[1]!, '3');
    s.seek(2, '7');
    s.release(first[2]!, '3');
    const second = await s.poll(0);
    expect(second.map((b) => [b.partition, b.records[0]!.offset])).toEqual([[0, '0'], [1, '3'], [2, '7']]);
    expect(s.isCurrent(second[0]!)).toBe(true);
  });

  test('a second member splits the partitions, batches of a moved partition are no longer current, committed offsets are the start', async () => {
    const c = await filled(40);
    const sink = c.transactionalSink('x');
    await sink.init();
    await sink.begin();
    await sink.sendOffsets('g', [{ topic: 't', partition: 1, offset: '4' }]);
    await sink.commit();
    const logA: string[] = [];
    const a = c.source({ groupId: 'g', topic: 't' });
    await a.start(quiet(logA));
    const held: FetchedBatch[] = await a.poll(0);
    expect(held.find((b) => b.partition === 1)!.records[0]!.offset).toBe('4');
    const logB: string[] = [];
    const b = c.source({ groupId: 'g', topic: 't' });
    await b.start(quiet(logB));
    expect([...a.assignment()].sort()).toEqual([0, 2]);
    expect([...b.assignment()].sort()).toEqual([1, 3]);
    expect(logA).toEqual(['+0,1,2,3', '-1,3']);
    expect(logB).toEqual(['+1,3']);
    expect(held.filter((x) => a.isCurrent(x)).map((x) => x.partition)).toEqual([0, 2]);
    await b.stop();
    expect([...a.assignment()].sort()).toEqual([0, 1, 2, 3]);
  });

  test('the classic protocol rule: a member sharing no protocol with the group is refused', async () => {
    const c = await filled(4);
    await c.source({ groupId: 'g', topic: 't', protocols: ['rollout-stream.fused/1'] }).start(quiet());
    const e = await errorOf(c.source({ groupId: 'g', topic: 't', protocols: ['rollout-stream.separate/1'] }).start(quiet()));
    expect(e?.code).toBe('mode_conflict');
    // A drain member announcing both joins either kind of group.
    await c.source({ groupId: 'g', topic: 't', protocols: ['rollout-stream.separate/1', 'rollout-stream.fused/1'] }).start(quiet());
    expect(c.group('g').members).toHaveLength(2);
    expect(c.group('g').protocol).toBe('rollout-stream.fused/1');
  });
});

describe('memory cluster: the KafkaClient seams', () => {
  test('groupSource honours protocol names and guard members: a guard holds its place and takes no partition', async () => {
    const c = new MemoryCluster();
    c.createTopic('t', 4);
    const fused = { names: ['rollout-stream.fused/1'] };
    const guard = c.groupSource({ groupId: 'g', topic: 't', sessionTimeoutMs: 6000, maxBytes: 1024, protocols: { ...fused, takesPartitions: false } });
    await guard.start(quiet());
    expect([...guard.assignment()]).toEqual([]);
    const member = c.groupSource({ groupId: 'g', topic: 't', sessionTimeoutMs: 6000, maxBytes: 1024, protocols: fused });
    await member.start(quiet());
    expect([...member.assignment()].sort()).toEqual([0, 1, 2, 3]);
    expect([...guard.assignment()]).toEqual([]);
    const separate = c.groupSource({ groupId: 'g', topic: 't', sessionTimeoutMs: 6000, maxBytes: 1024, protocols: { names: ['rollout-stream.separate/1'] } });
    expect((await errorOf(separate.start(quiet())))?.code).toBe('mode_conflict');
    expect(await (await c.admin()).describeGroup('g')).toEqual({ state: 'Stable', protocol: 'rollout-stream.fused/1', members: 2 });
  });

  test('a poll with nothing to fetch waits for the cluster to change, up to its maxWaitMs', async () => {
    const c = new MemoryCluster();
    c.createTopic('t', 1);
    const s = c.groupSource({ groupId: 'g', topic: 't', sessionTimeoutMs: 6000, maxBytes: 1 << 20 });
    await s.start(quiet());
    const t0 = Date.now();
    expect(await s.poll(30)).toEqual([]);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(25);
    const polling = s.poll(5_000);
    await c.idempotentSink().send([{ topic: 't', partition: 0, key: 'k', value: Buffer.from('v') }]);
    expect((await polling).map((b) => values(b.records))).toEqual([['v']]);
  });

  test('scan reads each range read_committed to its end, waits for an open transaction, and ends incomplete after the idle timeout', async () => {
    const c = new MemoryCluster();
    c.createTopic('t', 2);
    await c.idempotentSink().send([0, 1, 2].map((i) => ({ topic: 't', partition: 0, key: 'k', value: Buffer.from(`a${i}`) })));
    const s = c.transactionalSink('id');
    await s.init();
    await s.begin();
    await s.send([{ topic: 't', partition: 1, key: 'k', value: Buffer.from('b0') }]);
    await s.abort();
    await s.begin();
    await s.send([{ topic: 't', partition: 1, key: 'k', value: Buffer.from('b1') }]);
    const seen: string[] = [];
    const onRecord = (r: { value: Buffer | null; timestamp: string }) => void seen.push(`${r.value?.toString()}@${typeof r.timestamp}`);
    // Partition 1 ends in an open transaction: the scan waits for it, then gives up naming the partition.
    const ranges = [
      { topic: 't', partition: 0, start: '1', end: '3' },
      { topic: 't', partition: 1, start: '0', end: String(c.highWatermark('t', 1)) },
    ];
    expect(await c.scan(ranges, onRecord, { idleTimeoutMs: 30 })).toEqual({ records: 2, complete: false, unfinished: ['t/1'] });
    expect(seen).toEqual(['a1@string', 'a2@string']);
    seen.length = 0;
    const scanning = c.scan(ranges, onRecord, { idleTimeoutMs: 5_000 });
    await s.commit();
    expect(await scanning).toEqual({ records: 3, complete: true, unfinished: [] });
    expect(seen).toEqual(['a1@string', 'a2@string', 'b1@string']);
    expect(await c.scan(ranges, () => false)).toEqual({ records: 1, complete: false, unfinished: [] });
  });

  test('a killed connection never answers and leaves no trace; its members stay until their sessions expire', async () => {
    const c = new MemoryCluster();
    c.createTopic('t', 2);
    const dead = c.connect('dead');
    const s = dead.groupSource({ groupId: 'g', topic: 't', sessionTimeoutMs: 6000, maxBytes: 1024 });
    await s.start(quiet());
    const sink = dead.transactionalSink('id', { transactionTimeoutMs: 1000, partitionsOf: async () => 2 });
    await sink.init();
    await sink.begin();
    await sink.send([{ topic: 't', partition: 0, key: 'k', value: Buffer.from('zombie') }]);
    dead.kill();
    const never = Symbol('no answer');
    const answer = (p: Promise<unknown>) => Promise.race([p.then(() => 'answered', () => 'threw'), new Promise((r) => setTimeout(() => r(never), 20))]);
    expect(await answer(sink.commit())).toBe(never);
    expect(await answer(s.stop())).toBe(never);
    expect(await answer(dead.admin())).toBe(never);
    expect(c.openTransactions()).toEqual(['id']);
    expect(c.group('g').members).toHaveLength(1);
    const log: string[] = [];
    const next = c.connect('next').groupSource({ groupId: 'g', topic: 't', sessionTimeoutMs: 6000, maxBytes: 1024 });
    await next.start(quiet(log));
    expect(log).toEqual(['+1']);
    dead.expireSessions();
    expect(c.group('g').members).toHaveLength(1);
    await next.poll(0);
    expect(log).toEqual(['+1', '+0']);
    // The next owner's init aborts what the dead one left open.
    await c.connect('next').transactionalSink('id').init();
    expect(c.openTransactions()).toEqual([]);
    expect(c.committedRecords('t')).toEqual([]);
  });

  test('the cluster keeps its own copy of every value (a producer may reuse its buffers once a send settled)', async () => {
    const c = new MemoryCluster();
    c.createTopic('t', 1);
    const value = Buffer.from('before');
    await c.idempotentSink().send([{ topic: 't', partition: 0, key: 'k', value }]);
    value.write('after!');
    expect(values(c.committedRecords('t'))).toEqual(['before']);
  });
});

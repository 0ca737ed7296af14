/**
 * The edge's chunking sink (streams/chunks/edge-sink.ts, behind
 * OpsClient.chunkingSink) on the memory cluster: whole records through the
 * idempotent sink, a value above its topic's limit as a chunk set in a
 * transaction of its own on a transactional producer made at the first such
 * value, partition order kept, the ceiling refused before anything is sent.
 */
import { describe, expect, test } from 'vitest';
import { EdgeChunkingSink } from '../../../streams/chunks/edge-sink.js';
import { Reassembler } from '../../../streams/chunks/reassembler.js';
import { MemoryCluster } from '../../../streams/testing/memory-cluster.js';

const pattern = (n: number, seed: number): Buffer => {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 13 + seed) & 0xff;
  return b;
};

function edgeSink(cluster: MemoryCluster, o: { transactionalId?: string; maxValueBytes?: number } = {}) {
  const made: string[] = [];
  const sink = new EdgeChunkingSink({
    idempotent: cluster.idempotentSink(),
    newTransactional: (id) => (made.push(id), cluster.transactionalSink(id)),
    ...(o.transactionalId ? { transactionalId: o.transactionalId } : {}),
    admin: () => cluster.admin(),
    maxMessageBytes: 64 << 20,
    maxValueBytes: o.maxValueBytes ?? 2 ** 32,
    chunkRecords: true,
    log: () => undefined,
  });
  return { sink, made };
}

function readWhole(cluster: MemoryCluster, topic: string, partition: number) {
  const r = new Reassembler({ start: '0', trusted: false, maxHeldBytes: 1 << 30, chunkWaitMs: 120_000 });
  for (const rec of cluster.readCommitted(topic, partition, 0n, Infinity).records) expect(r.push(rec, 0)).toBeNull();
  return r.take();
}

describe('EdgeChunkingSink', () => {
  test('small records go idempotent with no transactional producer; a large one is a chunk set in its own transaction, in order', async () => {
    const cluster = new MemoryCluster();
    cluster.createTopic('rows', 2, { 'max.message.bytes': String(64 * 1024) });
    const { sink, made } = edgeSink(cluster);
    await sink.send([{ topic: 'rows', key: 'g', value: Buffer.from('a') }]);
    expect(made).toEqual([]);
    const big = pattern(1_000_000, 5);
    const pos = await sink.send([
      { topic: 'rows', key: 'g', value: Buffer.from('b') },
      { topic: 'rows', key: 'g', value: big, headers: { batch_id: 'x' } },
      { topic: 'rows', key: 'g', value: Buffer.from('c') },
    ]);
    expect(made).toHaveLength(1);
    expect(made[0]).toMatch(/^rollout-stream\.publisher\.[0-9a-f-]{36}$/);
    expect(sink.chunkedValues).toBe(1);
    expect(cluster.openTransactions()).toEqual([]);
    const partition = pos[0]!.partition;
    expect(pos.map((p) => p.partition)).toEqual([partition, partition, partition]);
    expect(pos[1]!.chunks).toBe(16);
    const got = readWhole(cluster, 'rows', partition);
    expect(got.map((g) => (g.value!.length > 10 ? `big:${g.value!.equals(big)}` : g.value!.toString()))).toEqual(['a', 'b', 'big:true', 'c']);
    expect(got[2]!.offset).toBe(pos[1]!.offset);
    expect(got[2]!.headers['batch_id']!.toString()).toBe('x');
    // Each chunk's batch stayed within the topic's limit (the cluster refuses a larger one).
    for (const r of cluster.committedRecords('rows')) expect(r.value!.length).toBeLessThan(64 * 1024);
    await sink.close();
  });

  test('an explicit transactional id is the chunk producer', async () => {
    const cluster = new MemoryCluster();
    cluster.createTopic('rows', 1, { 'max.message.bytes': String(64 * 1024) });
    const { sink, made } = edgeSink(cluster, { transactionalId: 'worker-7' });
    await sink.send([{ topic: 'rows', key: 'g', value: pattern(200_000, 1) }]);
    expect(made).toEqual(['worker-7']);
    expect(cluster.inits.map((i) => i.transactionalId)).toEqual(['worker-7']);
  });

  test('a value above kafka.max_value_bytes is refused as record_too_large before anything is sent', async () => {
    const cluster = new MemoryCluster();
    cluster.createTopic('rows', 1, { 'max.message.bytes': String(64 * 1024) });
    const { sink } = edgeSink(cluster, { maxValueBytes: 100_000 });
    await expect(sink.send([{ topic: 'rows', key: 'g', value: Buffer.from('ok') }, { topic: 'rows', key: 'g', value: pattern(100_001, 1) }])).rejects.toMatchObject({ code: 'record_too_large' });
    expect(cluster.highWatermark('rows', 0)).toBe(0n);
  });

  test('a send the broker refuses aborts the chunk transaction: nothing of the set is visible', async () => {
    const cluster = new MemoryCluster();
    cluster.createTopic('rows', 1, { 'max.message.bytes': String(64 * 1024) });
    const { sink } = edgeSink(cluster);
    await sink.send([{ topic: 'rows', key: 'g', value: pattern(10, 1) }]);
    // The limit read, then lowered under the writer: the first chunk is refused.
    cluster.setTopicConfig('rows', 'max.message.bytes', '8192');
    await expect(sink.send([{ topic: 'rows', key: 'g', value: pattern(300_000, 2) }])).rejects.toMatchObject({ code: 'record_limit_changed' });
    expect(cluster.openTransactions()).toEqual([]);
    // Read again: the next send chunks at the new limit.
    await sink.send([{ topic: 'rows', key: 'g', value: pattern(300_000, 2) }]);
    const got = readWhole(cluster, 'rows', 0);
    expect(got.map((g) => g.value!.length)).toEqual([10, 300_000]);
  });
});

/**
 * The chunk writers (streams/chunks/): `planSends` as a property (every send
 * within the topic limit per partition and the request budget in all, a
 * chunk set's payloads concatenating to its value on one pinned partition,
 * input order kept), `RecordLimits` (discovery, the fallback and its log
 * line, `forget`), the memory cluster refusing a batch over a topic's
 * `max.message.bytes`, and `ChunkingTransactionalSink` writing sets that the
 * Reassembler reads back whole, turning a refusal into a re-read of the
 * limits, and reaching `chunks.mid-set` after each partial set.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { parseChunk, isChunk } from '../../../streams/chunks/chunk-format.js';
import { batchBudget, BATCH_HEADER_BYTES, planSends, positionsOf, recordBytes } from '../../../streams/chunks/chunk-writer.js';
import { ChunkingTransactionalSink } from '../../../streams/chunks/chunking-sink.js';
import { Reassembler } from '../../../streams/chunks/reassembler.js';
import { RecordLimits } from '../../../streams/chunks/record-limits.js';
import type { OutgoingRecord } from '../../../streams/kafka/types.js';
import { setCrashHandler, type CrashPoint } from '../../../streams/runtime/crash-points.js';
import { MemoryCluster } from '../../../streams/testing/memory-cluster.js';
import { RolloutStreamError } from '../../../errors/index.js';

const pattern = (n: number, seed: number): Buffer => {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 7) & 0xff;
  return b;
};

/** The whole value of each input record, from the planned sends (chunks concatenated, in order). */
function valuesFromPlan(sends: OutgoingRecord[][]): Array<{ topic: string; partition: number; value: Buffer }> {
  const out: Array<{ topic: string; partition: number; value: Buffer }> = [];
  const open = new Map<string, { topic: string; partition: number; parts: Buffer[]; count: number }>();
  for (const r of sends.flat()) {
    if (!isChunk(r.value)) {
      out.push({ topic: r.topic, partition: r.partition!, value: r.value! });
      continue;
    }
    const c = parseChunk(r.value!);
    const id = c.setId.toString('hex');
    if (c.index === 0) {
      const o = { topic: r.topic, partition: r.partition!, parts: [] as Buffer[], count: c.count };
      open.set(id, o);
      out.push({ topic: r.topic, partition: r.partition!, value: null as unknown as Buffer });
      (out[out.length - 1] as { set?: string }).set = id;
    }
    const o = open.get(id)!;
    expect(r.partition).toBe(o.partition);
    expect(c.payloadAt).toBe(o.parts.reduce((n, p) => n + p.length, 0));
    o.parts.push(Buffer.from(c.payload));
    if (c.index === c.count - 1) {
      const at = out.findIndex((x) => (x as { set?: string }).set === id);
      out[at]!.value = Buffer.concat(o.parts);
    }
  }
  return out;
}

describe('planSends', () => {
  test('every send stays within the limit per partition and the request budget, and the values come back whole, pinned, in order', () => {
    const record = fc.record({
      topic: fc.constantFrom('a', 'b'),
      partition: fc.integer({ min: 0, max: 2 }),
      size: fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 3000, max: 40_000 })),
      key: fc.string({ maxLength: 20 }),
    });
    fc.assert(
      fc.property(fc.array(record, { minLength: 1, maxLength: 12 }), fc.integer({ min: 4096, max: 9000 }), fc.integer({ min: 9000, max: 30_000 }), (specs, limitA, requestBudget) => {
        const limits: Record<string, number> = { a: limitA, b: 6000 };
        const records: OutgoingRecord[] = specs.map((s, i) => ({ topic: s.topic, partition: s.partition, key: s.key, value: pattern(s.size, i), headers: { batch_id: `b${i}` } }));
        const plan = planSends(records, { limitOf: (t) => limits[t]!, requestBudget, chunkable: () => true });
        for (const send of plan.sends) {
          const total = send.reduce((n, r) => n + recordBytes(r), 0);
          if (send.length > 1) expect(total).toBeLessThanOrEqual(requestBudget);
          const perPartition = new Map<string, number>();
          for (const r of send) perPartition.set(`${r.topic}/${r.partition}`, (perPartition.get(`${r.topic}/${r.partition}`) ?? 0) + recordBytes(r));
          for (const [tp, bytes] of perPartition) expect(BATCH_HEADER_BYTES + bytes, tp).toBeLessThanOrEqual(limits[tp.split('/')[0]!]!);
        }
        const back = valuesFromPlan(plan.sends);
        expect(back.map((b) => [b.topic, b.partition])).toEqual(records.map((r) => [r.topic, r.partition]));
        back.forEach((b, i) => expect(b.value.equals(records[i]!.value!)).toBe(true));
        // Every chunk carries its record's key and headers.
        for (const r of plan.sends.flat()) expect(r.headers?.['batch_id']).toMatch(/^b\d+$/);
        plan.records.forEach((p, i) => expect(p.chunks > 1).toBe(recordBytes(records[i]!) > batchBudget(limits[records[i]!.topic]!)));
      }),
      { numRuns: 150 },
    );
  });

  test('a record of a topic that is never chunked goes whole, whatever its size', () => {
    const r: OutgoingRecord = { topic: 'changelog', partition: 0, key: 'k', value: Buffer.alloc(50_000) };
    const plan = planSends([r], { limitOf: () => 8192, requestBudget: 1 << 20, chunkable: (t) => t !== 'changelog' });
    expect(plan.sends).toEqual([[r]]);
    expect(plan.records).toEqual([{ first: { send: 0, at: 0 }, last: { send: 0, at: 0 }, chunks: 1 }]);
  });

  test('positionsOf answers the first chunk offset and the last chunk offset per input record', () => {
    const records: OutgoingRecord[] = [
      { topic: 'a', partition: 0, key: 'x', value: Buffer.alloc(10) },
      { topic: 'a', partition: 0, key: 'y', value: Buffer.alloc(20_000) },
    ];
    const plan = planSends(records, { limitOf: () => 8192, requestBudget: 1 << 20, chunkable: () => true });
    let next = 100;
    const acks = plan.sends.map((s) => s.map((r) => ({ topic: r.topic, partition: r.partition!, offset: String(next++) })));
    const pos = positionsOf(plan, acks);
    expect(pos[0]).toEqual({ topic: 'a', partition: 0, offset: '100', lastOffset: '100', chunks: 1 });
    expect(pos[1]!.offset).toBe('101');
    expect(pos[1]!.chunks).toBe(3);
    expect(pos[1]!.lastOffset).toBe('103');
  });
});

describe('RecordLimits', () => {
  test('reads each topic limit once from describeConfigs', async () => {
    const cluster = new MemoryCluster();
    cluster.createTopic('t1', 1, { 'max.message.bytes': '1048576' });
    cluster.createTopic('t2', 1, [{ name: 'max.message.bytes', value: '8388608' }]);
    let asked = 0;
    const admin = await cluster.admin();
    const lines: string[] = [];
    const limits = new RecordLimits({ admin: () => ({ topicConfigs: (t, n) => (asked++, admin.topicConfigs(t, n)) }), fallbackBytes: 64 << 20, log: (l) => lines.push(l) });
    await limits.load(['t1', 't2']);
    await limits.load(['t1']);
    expect([limits.limit('t1'), limits.limit('t2'), asked, lines]).toEqual([1048576, 8388608, 1, []]);
    expect(limits.chunkBudget('t1') % 64).toBe(0);
    expect(limits.chunkBudget('t1')).toBe(Math.floor((1048576 - 61 - 32 - 48 - 1024) / 64) * 64);
    cluster.setTopicConfig('t1', 'max.message.bytes', '65536');
    limits.forget(['t1']);
    await limits.load(['t1', 't2']);
    expect([limits.limit('t1'), limits.limit('t2'), asked]).toEqual([65536, 8388608, 2]);
  });

  test('falls back to kafka.max_message_bytes, with one log line per topic, without DescribeConfigs or without the config', async () => {
    const cluster = new MemoryCluster();
    cluster.createTopic('t1', 1, { 'max.message.bytes': '1048576' });
    cluster.createTopic('bare', 1);
    const admin = await cluster.admin();
    const lines: string[] = [];
    const limits = new RecordLimits({ admin: () => admin, fallbackBytes: 4096 * 1024, log: (l) => lines.push(l) });
    await limits.load(['bare']);
    expect(limits.limit('bare')).toBe(4096 * 1024);
    expect(lines).toEqual(['record limit of bare unreadable (the broker did not report max.message.bytes); using kafka.max_message_bytes = 4194304']);
    cluster.describeConfigsDenied = true;
    await limits.load(['t1', 'bare']);
    expect(limits.limit('t1')).toBe(4096 * 1024);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/^record limit of t1 unreadable \(not authorized to describe its configs: .*\); using kafka.max_message_bytes = 4194304$/);
  });

  test('a transient admin failure is thrown, not taken for the fallback', async () => {
    const limits = new RecordLimits({
      admin: () => ({ topicConfigs: async () => Promise.reject(new RolloutStreamError('broker_unavailable', 'down', { retriable: true })) }),
      fallbackBytes: 1,
      log: () => undefined,
    });
    await expect(limits.load(['t'])).rejects.toMatchObject({ code: 'broker_unavailable' });
    expect(() => limits.limit('t')).toThrow(/not loaded/);
  });
});

describe('the memory cluster limit', () => {
  test("refuses a send whose batch for a partition passes the topic's max.message.bytes, writing nothing", () => {
    const cluster = new MemoryCluster();
    cluster.createTopic('t', 2, { 'max.message.bytes': '10000' });
    const small = { topic: 't', partition: 0, key: 'k', value: Buffer.alloc(4000) };
    expect(() => cluster.append([small, small, small], null)).toThrow(expect.objectContaining({ code: 'record_limit_changed' }));
    expect(cluster.highWatermark('t', 0)).toBe(0n);
    // The same bytes spread over two partitions are two batches, each under the limit.
    cluster.append([small, { ...small, partition: 1 }], null);
    expect([cluster.highWatermark('t', 0), cluster.highWatermark('t', 1)]).toEqual([1n, 1n]);
  });
});

describe('ChunkingTransactionalSink', () => {
  async function setup(limit: number) {
    const cluster = new MemoryCluster();
    cluster.createTopic('out', 2, { 'max.message.bytes': String(limit) });
    cluster.createTopic('log', 2, { 'max.message.bytes': String(limit) });
    const admin = await cluster.admin();
    const limits = new RecordLimits({ admin: () => admin, fallbackBytes: 64 << 20, log: () => undefined });
    const sink = new ChunkingTransactionalSink(cluster.transactionalSink('tx'), { limits, partitionsOf: async (t) => cluster.partitions(t), requestBudget: 1 << 20, neverChunk: new Set(['log']) });
    await sink.init();
    return { cluster, sink, limits };
  }

  function readBack(cluster: MemoryCluster, topic: string, partition: number) {
    const r = new Reassembler({ start: '0', trusted: true, maxHeldBytes: 1 << 30, chunkWaitMs: 120_000 });
    for (const rec of cluster.readCommitted(topic, partition, 0n, Infinity).records) expect(r.push(rec, 0)).toBeNull();
    return r.take();
  }

  test('a value above the limit is written as one chunk set on its key partition, read back whole with its position and next', async () => {
    const { cluster, sink } = await setup(64 * 1024);
    const big = pattern(300_000, 3);
    await sink.begin();
    const pos = await sink.send([
      { topic: 'out', key: 'g1', value: Buffer.from('small'), headers: { batch_id: 'b' } },
      { topic: 'out', key: 'g1', value: big, headers: { batch_id: 'b' } },
    ]);
    await sink.commit();
    expect(pos).toHaveLength(2);
    expect(pos[1]!.chunks).toBe(5);
    const partition = pos[1]!.partition;
    expect(pos[0]!.partition).toBe(partition);
    const got = readBack(cluster, 'out', partition);
    expect(got.map((g) => g.kind)).toEqual(['record', 'record']);
    expect(got[1]!.value!.equals(big)).toBe(true);
    expect(got[1]!.offset).toBe(pos[1]!.offset);
    expect(got[1]!.lastOffset).toBe(pos[1]!.lastOffset);
    expect(got[1]!.headers['batch_id']!.toString()).toBe('b');
  });

  test('an aborted set leaves nothing a read_committed reader sees', async () => {
    const { cluster, sink } = await setup(64 * 1024);
    await sink.begin();
    const [p] = await sink.send([{ topic: 'out', key: 'g', value: pattern(200_000, 1) }]);
    await sink.abort();
    expect(readBack(cluster, 'out', p!.partition)).toEqual([]);
  });

  test('chunks.mid-set is reached after each send that leaves a set partly written', async () => {
    const { sink } = await setup(64 * 1024);
    const seen: CrashPoint[] = [];
    const previous = setCrashHandler((p) => seen.push(p));
    try {
      await sink.begin();
      await sink.send([{ topic: 'out', key: 'g', value: pattern(200_000, 1) }]); // 4 chunks
      await sink.send([{ topic: 'out', key: 'g', value: Buffer.alloc(10) }]);
      await sink.abort();
    } finally {
      setCrashHandler(previous);
    }
    expect(seen).toEqual(['chunks.mid-set', 'chunks.mid-set', 'chunks.mid-set']);
  });

  test('a compacted topic is never chunked: its oversized record goes whole and is refused', async () => {
    const { sink } = await setup(64 * 1024);
    await sink.begin();
    await expect(sink.send([{ topic: 'log', key: 'k', partition: 0, value: pattern(100_000, 1) }])).rejects.toMatchObject({ code: 'record_limit_changed' });
  });

  test('a limit lowered under the writer: the refused send is record_limit_changed, and the limits are read again', async () => {
    const { cluster, sink, limits } = await setup(1 << 20);
    await sink.begin();
    await sink.send([{ topic: 'out', key: 'g', value: pattern(500_000, 1) }]); // fits whole at 1 MiB
    cluster.setTopicConfig('out', 'max.message.bytes', String(64 * 1024));
    await expect(sink.send([{ topic: 'out', key: 'g', value: pattern(500_000, 2) }])).rejects.toMatchObject({ code: 'record_limit_changed' });
    await sink.abort();
    expect(() => limits.limit('out')).toThrow(/not loaded/);
    await sink.begin();
    const [p] = await sink.send([{ topic: 'out', key: 'g', value: pattern(500_000, 2) }]);
    await sink.commit();
    expect(p!.chunks).toBe(8);
    const got = readBack(cluster, 'out', p!.partition);
    expect(got.map((g) => g.value!.equals(pattern(500_000, 2)))).toEqual([true]);
  });
});

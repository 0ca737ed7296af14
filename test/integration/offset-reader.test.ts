/**
 * The kafkajs OffsetReader against the real broker: records at chosen
 * offsets come back as they were written (plain, in committed transactions,
 * compressed with lz4, zstd and gzip, larger than the reader's fetch size),
 * and an offset that holds no committed record is absent: an aborted
 * record, a transaction marker, one below the log start after DeleteRecords,
 * one past the end. Offsets may come unsorted, repeated and sparse (a large
 * gap is jumped, not read through); an offset held back by an open
 * transaction is waited for, and two partitions read at once.
 */
import type { Producer, RecordMetadata } from 'kafkajs';
import { afterEach, describe, expect, test } from 'vitest';
import { compressionType, type CompressionName } from '../../streams/kafka/kafkajs/compression.js';
import { createOffsetReader, type CountingOffsetReader } from '../../streams/kafka/kafkajs/offset-reader.js';
import type { FetchedRecord } from '../../streams/kafka/types.js';
import { countingDecompressions, lcg, testEnv, type TestEnv } from './helpers.js';

let env: TestEnv | undefined;
const closing: Array<{ close(): Promise<void> } | { disconnect(): Promise<void> }> = [];
afterEach(async () => {
  for (const c of closing.splice(0).reverse()) await ('close' in c ? c.close() : c.disconnect()).catch(() => {});
  await env?.close();
  env = undefined;
});

const errorOf = async (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as Error & { code?: string });

interface Written {
  key: string;
  value: Buffer;
  headers: Record<string, string>;
  timestamp: number;
}

/** Offsets of one partition: what is committed there, and what is not a record (aborted, markers). */
class PartitionLog {
  readonly committed = new Map<string, Written>();
  readonly aborted = new Set<string>();

  add(meta: RecordMetadata[], partition: number, written: Written[], into: Map<string, Written> | Set<string>): void {
    const base = BigInt(meta.find((m) => m.partition === partition)!.baseOffset!);
    written.forEach((w, i) => (into instanceof Map ? into.set(String(base + BigInt(i)), w) : into.add(String(base + BigInt(i)))));
  }
}

function records(tag: string, n: number, bytes = 40): Written[] {
  return [...Array(n).keys()].map((i) => ({
    key: `${tag}-${i}`,
    value: Buffer.alloc(bytes, `${tag}:${i};`),
    headers: { tag, i: String(i) },
    timestamp: 1_700_000_000_000 + i,
  }));
}

const messages = (partition: number, ws: Written[]) => ws.map((w) => ({ partition, key: w.key, value: w.value, headers: w.headers, timestamp: String(w.timestamp) }));

async function sendTx(p: Producer, topic: string, partition: number, ws: Written[], compression: CompressionName, outcome: 'commit' | 'abort'): Promise<RecordMetadata[]> {
  const tx = await p.transaction();
  const meta = await tx.send({ topic, compression: compressionType(compression), messages: messages(partition, ws) });
  await (outcome === 'commit' ? tx.commit() : tx.abort());
  return meta;
}

function expectRecord(got: FetchedRecord | undefined, want: Written, topic: string, partition: number, offset: string): void {
  expect(got, `${topic}[${partition}]@${offset}`).toBeDefined();
  expect({ ...got!, key: got!.key?.toString(), value: got!.value?.toString('hex'), headers: Object.fromEntries(Object.entries(got!.headers).map(([k, v]) => [k, v.toString()])) }).toEqual({
    topic,
    partition,
    offset,
    timestamp: want.timestamp,
    key: want.key,
    value: want.value.toString('hex'),
    headers: want.headers,
  });
}

async function setup(name: string): Promise<{ e: TestEnv; topic: string; tx: Producer; plain: Producer; reader: (o?: { maxBytes?: number; pendingWaitMs?: number }) => CountingOffsetReader }> {
  env = await testEnv(name);
  const e = env;
  const topic = `${e.prefix}offset-reader`;
  await e.admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }], waitForLeaders: true });
  const tx = e.kafka.producer({ transactionalId: `${e.prefix}tx`, idempotent: true, maxInFlightRequests: 1 });
  const plain = e.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  for (const p of [tx, plain]) {
    await p.connect();
    closing.push(p);
  }
  const reader = (o: { maxBytes?: number; pendingWaitMs?: number } = {}) => {
    const r = createOffsetReader(e.kafka, { maxBytes: o.maxBytes ?? 4096, ...(o.pendingWaitMs === undefined ? {} : { pendingWaitMs: o.pendingWaitMs }) });
    closing.push(r);
    return r;
  };
  return { e, topic, tx, plain, reader };
}

describe('kafkajs offset reader', () => {
  test('reads committed records at any offsets, and nothing where no committed record is', async () => {
    const { e, topic, tx, plain, reader } = await setup('offsets');
    const log = new PartitionLog();
    const P = 0;
    const first = records('plain', 5);
    log.add(await plain.send({ topic, messages: messages(P, first) }), P, first, log.committed);
    const lz4 = records('lz4', 3);
    log.add(await sendTx(tx, topic, P, lz4, 'lz4', 'commit'), P, lz4, log.committed);
    const zstd = records('zstd', 3);
    log.add(await sendTx(tx, topic, P, zstd, 'zstd', 'abort'), P, zstd, log.aborted);
    // Larger than the reader's 4096-byte fetch: it still comes whole.
    const gzip = [...records('gzip', 1), ...records('big', 1, 20_000)];
    log.add(await sendTx(tx, topic, P, gzip, 'gzip', 'commit'), P, gzip, log.committed);
    const aborted = records('abort', 2, 3000);
    log.add(await sendTx(tx, topic, P, aborted, 'none', 'abort'), P, aborted, log.aborted);
    const big = records('huge', 1, 50_000);
    log.add(await plain.send({ topic, messages: messages(P, big) }), P, big, log.committed);
    const zstd2 = records('zstd-ok', 4, 500);
    log.add(await sendTx(tx, topic, P, zstd2, 'zstd', 'commit'), P, zstd2, log.committed);
    const last = records('last', 2);
    log.add(await plain.send({ topic, messages: messages(P, last) }), P, last, log.committed);

    const end = BigInt((await e.admin.fetchTopicOffsets(topic)).find((o) => o.partition === P)!.high);
    const all = [...Array(Number(end)).keys()].map(String);
    const markers = all.filter((o) => !log.committed.has(o) && !log.aborted.has(o));
    expect(markers.length, 'one marker per transaction').toBe(5);
    const r = reader();

    // Every offset, shuffled, each asked twice, plus some past the end.
    const rand = lcg(16);
    const asked = [...all, ...all, String(end), String(end + 1n), String(end + 1000n)].sort(() => rand() - 0.5);
    const { result: got, batches } = await countingDecompressions('zstd', () => r.read(topic, P, asked));
    expect(batches, 'the committed zstd batch was read compressed').toBeGreaterThan(0);
    expect([...got.keys()].sort((a, b) => Number(a) - Number(b))).toEqual([...log.committed.keys()]);
    for (const [offset, w] of log.committed) expectRecord(got.get(offset), w, topic, P, offset);

    // One at a time: each committed offset alone, and each non-record alone.
    for (const [offset, w] of log.committed) expectRecord((await r.read(topic, P, [offset])).get(offset), w, topic, P, offset);
    for (const offset of [...log.aborted, ...markers]) expect([...(await r.read(topic, P, [offset])).keys()], `${offset} holds no committed record`).toEqual([]);
    // Inside a compressed batch: the batch comes from its first record, only the asked one is answered.
    const lz4Second = [...log.committed].find(([, w]) => w.key === 'lz4-1')![0];
    const { result: inside, batches: lz4Batches } = await countingDecompressions('lz4', () => r.read(topic, P, [lz4Second]));
    expect(lz4Batches).toBe(1);
    expect([...inside.keys()]).toEqual([lz4Second]);
    expect(await r.read(topic, P, [])).toEqual(new Map());
    expect([...(await r.read(topic, P, [String(end)])).keys()], 'the end').toEqual([]);
    expect([...(await r.read(topic, P, [String(end + 1000n), String(end + 5n)])).keys()], 'past the end').toEqual([]);

    // Retention: below the log start is absent, the rest still there.
    const cut = 9n;
    await e.admin.deleteTopicRecords({ topic, partitions: [{ partition: P, offset: String(cut) }] });
    const after = await r.read(topic, P, all);
    expect([...after.keys()].sort((a, b) => Number(a) - Number(b))).toEqual([...log.committed.keys()].filter((o) => BigInt(o) >= cut));
    expect([...(await r.read(topic, P, ['0', '3', '8'])).keys()], 'all deleted').toEqual([]);
    expect(await errorOf(r.read(topic, P, ['-1'])), 'not an offset').toMatchObject({ code: 'usage' });
    expect(await errorOf(r.read(`${e.prefix}no-such-topic`, 0, ['0'])), 'an unknown topic').toMatchObject({ code: 'unknown_topic' });
  });

  test('jumps large gaps, keeps no view of a whole answer, reads two partitions at once', async () => {
    const { e, topic, plain, reader } = await setup('gaps');
    const logs = [new PartitionLog(), new PartitionLog()];
    for (let s = 0; s < 10; s++) {
      for (const p of [0, 1]) {
        const ws = records(`p${p}s${s}`, 200, 60);
        logs[p]!.add(await plain.send({ topic, messages: messages(p, ws) }), p, ws, logs[p]!.committed);
      }
    }
    // 2000 records of ~100 bytes per partition; at most 4096 bytes a fetch.
    const r = reader();
    const sparse = ['3', '1500', '1501', '1999', '700'];
    const before = r.fetches;
    const got = await r.read(topic, 0, sparse);
    expect([...got.keys()].sort()).toEqual([...sparse].sort());
    for (const o of sparse) expectRecord(got.get(o), logs[0]!.committed.get(o)!, topic, 0, o);
    expect(r.fetches - before, 'one fetch per far-apart offset, not ~50 reading through').toBeLessThanOrEqual(5);

    // A large fetch answer (~250 kB): what is kept of it is a copy (in Node's
    // allocation pool), not a view of the answer's memory.
    expect(Buffer.poolSize).toBeLessThan(200_000);
    const wide = reader({ maxBytes: 1024 * 1024 });
    const one = (await wide.read(topic, 1, ['10'])).get('10')!;
    expect(one.value!.buffer.byteLength, 'value').toBeLessThanOrEqual(Buffer.poolSize);
    expect(one.key!.buffer.byteLength, 'key').toBeLessThanOrEqual(Buffer.poolSize);
    expect(one.headers.tag!.buffer.byteLength, 'header').toBeLessThanOrEqual(Buffer.poolSize);

    // Both partitions at once, on the same reader, every offset of each.
    const every = [...Array(2000).keys()].map(String);
    const [a, b] = await Promise.all([r.read(topic, 0, every), r.read(topic, 1, every)]);
    for (const [p, m] of [[0, a], [1, b]] as const) {
      expect(m.size).toBe(2000);
      for (const o of ['0', '999', '1999']) expectRecord(m.get(o), logs[p]!.committed.get(o)!, topic, p, o);
    }
    await e.admin.fetchTopicOffsets(topic); // the cluster still answers others
  });

  test('first reads of two partitions at once, then close: the reader leaves no socket open (the process can exit)', async () => {
    const { topic, plain, reader } = await setup('sockets');
    for (const p of [0, 1]) await plain.send({ topic, messages: messages(p, records(`p${p}`, 3)) });
    const sockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
    const before = sockets();
    const r = reader();
    const [a, b] = await Promise.all([r.read(topic, 0, ['0', '2']), r.read(topic, 1, ['1'])]);
    expect([a.size, b.size]).toEqual([2, 1]);
    expect(sockets()).toBeGreaterThan(before);
    await r.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(sockets(), 'TCP sockets open after close, against before the reader').toBe(before);
  });

  test('an offset held back by an open transaction is waited for, then given up on', async () => {
    const { topic, tx, plain, reader } = await setup('pending');
    const P = 1;
    const before = records('before', 1);
    const meta = await plain.send({ topic, messages: messages(P, before) });
    const open = await tx.transaction();
    const held = records('held', 1);
    const heldAt = (await open.send({ topic, messages: messages(P, held) }))[0]!.baseOffset!;
    const later = records('later', 1);
    const laterAt = (await plain.send({ topic, messages: messages(P, later) }))[0]!.baseOffset!;
    const beforeAt = meta[0]!.baseOffset!;

    // Below the open transaction: answered at once. At and after it: not stable yet.
    expect([...(await reader().read(topic, P, [beforeAt])).keys()]).toEqual([beforeAt]);
    const waited = Date.now();
    expect(await errorOf(reader({ pendingWaitMs: 600 }).read(topic, P, [beforeAt, laterAt]))).toMatchObject({ code: 'request_timeout', retriable: true });
    expect(Date.now() - waited).toBeGreaterThanOrEqual(600);

    // Committed while a read waits: the read answers.
    const reading = reader({ pendingWaitMs: 20_000 }).read(topic, P, [heldAt, laterAt, beforeAt]);
    await new Promise((r) => setTimeout(r, 500));
    await open.commit();
    const got = await reading;
    expectRecord(got.get(heldAt), held[0]!, topic, P, heldAt);
    expectRecord(got.get(laterAt), later[0]!, topic, P, laterAt);
    expectRecord(got.get(beforeAt), before[0]!, topic, P, beforeAt);
  });
});

/**
 * The chunk-reading decorators on their own, over the in-memory cluster:
 * ChunkedGroupSource's release and seek rules, ChunkedScan's trusted and
 * untrusted starts and its end of range, ChunkedOffsetReader's "a named
 * offset must be a first chunk".
 */
import { describe, expect, test } from 'vitest';
import { splitIntoChunks } from '../../../streams/chunks/chunk-format.js';
import { ChunkedGroupSource } from '../../../streams/chunks/chunked-group-source.js';
import { ChunkedOffsetReader } from '../../../streams/chunks/chunked-offset-reader.js';
import { chunkedScan } from '../../../streams/chunks/chunked-scan.js';
import type { ChunkSetReport, FetchedBatch, ScanRecord } from '../../../streams/kafka/types.js';
import { MemoryCluster } from '../../../streams/testing/memory-cluster.js';

const OPTIONS = { maxHeldBytes: 1 << 20, chunkWaitMs: 60_000 };
const TOPIC = 't';
const value = (n: number, seed: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + seed) % 251));

/** A cluster holding, on partition 0: whole W0, set A (3 chunks), whole W1, committed in one transaction. */
async function cluster(): Promise<{ c: MemoryCluster; a: Buffer }> {
  const c = new MemoryCluster();
  c.createTopic(TOPIC, 1);
  const a = value(600, 1);
  const sink = c.transactionalSink('w');
  await sink.init();
  await sink.begin();
  await sink.send([
    { topic: TOPIC, partition: 0, key: 'w0', value: Buffer.from('{"w":0}') },
    ...splitIntoChunks(a, 256, Buffer.alloc(16, 1)).map((v) => ({ topic: TOPIC, partition: 0, key: 'a', value: v, headers: { batch_id: 'b1' } })),
    { topic: TOPIC, partition: 0, key: 'w1', value: Buffer.from('{"w":1}') },
  ]);
  await sink.commit();
  return { c, a };
}

async function started(c: MemoryCluster, admin: () => ReturnType<MemoryCluster['admin']> = () => c.admin()): Promise<ChunkedGroupSource> {
  const s = new ChunkedGroupSource(c.source({ groupId: 'g', topic: TOPIC, maxRecords: 2 }), { ...OPTIONS, groupId: 'g', topic: TOPIC, admin });
  await s.start({ onAssigned: async () => undefined, onRevoked: async () => undefined, onLost: () => undefined });
  return s;
}

async function pollAll(s: ChunkedGroupSource, release: (b: FetchedBatch) => string | null | undefined): Promise<FetchedBatch[]> {
  const got: FetchedBatch[] = [];
  for (let i = 0; i < 10; i++) {
    for (const b of await s.poll(20)) {
      got.push(b);
      const next = release(b);
      if (next !== undefined) s.release(b, next);
    }
  }
  return got;
}

/** Every record handed on while each batch is released whole. */
const readWhole = async (s: ChunkedGroupSource) => (await pollAll(s, (b) => b.records.at(-1)!.next!)).flatMap((b) => b.records);

/** The cluster's W0, A and W1, whole, at their first offsets with their next. */
function expectWholeRecords(got: FetchedBatch['records'], a: Buffer): void {
  expect(got.map((r) => [r.key!.toString(), r.offset, r.next])).toEqual([
    ['w0', '0', '1'],
    ['a', '1', '4'],
    ['w1', '4', '5'],
  ]);
  expect(got[1]!.value!.equals(a)).toBe(true);
}

describe('ChunkedGroupSource', () => {
  test('hands on whole records at their first offsets with their next, across inner batches of two records', async () => {
    const { c, a } = await cluster();
    const s = await started(c);
    const got = await readWhole(s);
    expectWholeRecords(got, a);
    expect(got[1]!.chunk).toEqual({ kind: 'record', lastOffset: '3', chunks: 3 });
    expect(got[1]!.headers.batch_id!.toString()).toBe('b1');
    await s.stop();
  });

  test('an admin request that fails (the broker away) gives the batch back to be fetched again: the next polls hand on every record', async () => {
    const { c, a } = await cluster();
    let failures = 1;
    const admin = async () => {
      const real = await c.admin();
      return new Proxy(real, {
        get(target, key) {
          if (key === 'committedOffsets' && failures > 0) {
            failures--;
            return async () => {
              throw new Error('connect ECONNREFUSED 127.0.0.1:9092');
            };
          }
          const v = Reflect.get(target, key) as unknown;
          return typeof v === 'function' ? (v as (...args: unknown[]) => unknown).bind(target) : v;
        },
      });
    };
    const s = await started(c, admin);
    await expect(s.poll(20)).rejects.toThrow('ECONNREFUSED');
    expectWholeRecords(await readWhole(s), a);
    await s.stop();
  });

  test('a batch released with null is read again from its first chunk, whole', async () => {
    const { c, a } = await cluster();
    const s = await started(c);
    let refused = false;
    const got = await pollAll(s, (b) => {
      if (!refused && b.records.some((r) => r.key?.toString() === 'a')) {
        refused = true;
        return null;
      }
      return b.records.at(-1)!.next!;
    });
    const as = got.flatMap((b) => b.records).filter((r) => r.key?.toString() === 'a');
    expect(as.map((r) => r.offset)).toEqual(['1', '1']);
    expect(as.every((r) => r.value!.equals(a))).toBe(true);
    await s.stop();
  });

  test('while a set is open its fetch position stays at the last next handed back, not past the chunks read', async () => {
    const c = new MemoryCluster();
    c.createTopic(TOPIC, 1);
    const chunks = splitIntoChunks(value(600, 2), 256, Buffer.alloc(16, 2));
    c.append([{ topic: TOPIC, partition: 0, key: 'w', value: Buffer.from('w') }, ...chunks.slice(0, 2).map((v) => ({ topic: TOPIC, partition: 0, key: 'a', value: v }))], null);
    const s = await started(c);
    const got = await pollAll(s, (b) => b.records.at(-1)!.next!);
    expect(got.flatMap((b) => b.records).map((r) => r.offset)).toEqual(['0']);
    expect(s.fetchPosition(0)).toBe('1');
    c.append([{ topic: TOPIC, partition: 0, key: 'a', value: chunks[2]! }], null);
    const rest = await pollAll(s, (b) => b.records.at(-1)!.next!);
    expect(rest.flatMap((b) => b.records).map((r) => [r.offset, r.next])).toEqual([['1', '4']]);
    expect(s.fetchPosition(0)).toBe('4');
    await s.stop();
  });
});

describe('ChunkedScan', () => {
  const scanOf = (c: MemoryCluster) => chunkedScan((r, cb, o) => c.scan(r, cb, o), async (t, p) => String(c.logStartOffset(t, p)), OPTIONS);

  test('an untrusted start inside a set reports it and hands on the rest; a trusted one skips it silently', async () => {
    const { c } = await cluster();
    for (const trusted of [false, true]) {
      const reports: ChunkSetReport[] = [];
      const got: ScanRecord[] = [];
      const r = await scanOf(c)([{ topic: TOPIC, partition: 0, start: '2', end: String(c.highWatermark(TOPIC, 0)) }], (x) => void got.push(x), {
        trustedStarts: trusted,
        onChunkSet: (x) => reports.push(x),
      });
      expect(got.map((x) => x.key!.toString())).toEqual(['w1']);
      expect(r.records).toBe(1);
      expect(reports.map((x) => [x.detail, x.firstOffset])).toEqual(trusted ? [] : [['headless', '2']]);
    }
  });

  test('a set cut by the end of its range is reported, and the records behind it are handed on', async () => {
    const { c } = await cluster();
    const reports: ChunkSetReport[] = [];
    const got: ScanRecord[] = [];
    await scanOf(c)([{ topic: TOPIC, partition: 0, start: '0', end: '3' }], (x) => void got.push(x), { onChunkSet: (x) => reports.push(x) });
    expect(got.map((x) => x.offset)).toEqual(['0']);
    expect(reports.map((x) => [x.detail, x.firstOffset, x.have, x.count])).toEqual([['open_at_end', '1', 2, 3]]);
  });

  test('raw scans pass the chunks through', async () => {
    const { c } = await cluster();
    const got: ScanRecord[] = [];
    await scanOf(c)([{ topic: TOPIC, partition: 0, start: '0', end: '5' }], (x) => void got.push(x), { raw: true });
    expect(got).toHaveLength(5);
  });
});

describe('ChunkedOffsetReader', () => {
  test('a first chunk reads its whole record; a later chunk is not a record and is absent', async () => {
    const { c, a } = await cluster();
    const reader = new ChunkedOffsetReader(c.offsetReader(), OPTIONS);
    const got = await reader.read(TOPIC, 0, ['0', '1', '2', '4']);
    expect([...got.keys()].sort()).toEqual(['0', '1', '4']);
    expect(got.get('1')!.value!.equals(a)).toBe(true);
    expect(got.get('1')!.next).toBe('4');
  });

  test('reads past another set’s chunks interleaved with its own', async () => {
    const c = new MemoryCluster();
    c.createTopic(TOPIC, 1);
    const a = value(600, 3);
    const b = value(520, 4);
    const ca = splitIntoChunks(a, 256, Buffer.alloc(16, 3));
    const cb = splitIntoChunks(b, 256, Buffer.alloc(16, 4));
    c.append([ca[0]!, cb[0]!, ca[1]!, cb[1]!, ca[2]!, cb[2]!].map((v) => ({ topic: TOPIC, partition: 0, key: 'k', value: v })), null);
    const reader = new ChunkedOffsetReader(c.offsetReader(), OPTIONS);
    const got = await reader.read(TOPIC, 0, ['0', '1']);
    expect(got.get('0')!.value!.equals(a)).toBe(true);
    expect(got.get('1')!.value!.equals(b)).toBe(true);
  });
});

/**
 * The offset reader (streams/kafka/kafkajs/offset-reader.ts) without a
 * broker: first the kafkajs 2.2.4 internals it reaches into, each checked
 * the way the reader uses it, so that a kafkajs release that moves one
 * fails here (the private Cluster factory, the Cluster's and Broker's
 * methods, the Fetch request's isolation level, the decoded Fetch answer,
 * the errors a partition's error code becomes); then the pure filtering and
 * sizing of committed-records.ts; then the reader's walk over a scripted
 * cluster (gaps, retention, the end, open transactions, leader changes).
 */
import '../../../streams/kafka/kafkajs/speedups.js'; // before kafkajs loads: createKafka refuses a kafkajs without the send-retry fix
import kafkajs, { Kafka, logLevel } from 'kafkajs';
import { createRequire } from 'node:module';
import { describe, expect, test, vi } from 'vitest';
import {
  committedRecords,
  FIRST_REQUEST_BYTES,
  GAP_BYTES,
  MIN_REQUEST_BYTES,
  requestBytes,
  sortedOffsets,
  toFetchedRecord,
  type KafkajsFetchPartition,
  type KafkajsRecord,
} from '../../../streams/kafka/kafkajs/committed-records.js';
import { registerCompressionCodecs } from '../../../streams/kafka/kafkajs/compression.js';
import { isTransientKafkaError, kafkaErrorCode } from '../../../streams/kafka/kafkajs/errors.js';
import { kafkaConfigSchema } from '../../../config/schema.js';
import { createKafka } from '../../../streams/kafka/kafkajs/client.js';
import { CREATE_CLUSTER_SYMBOL, OUT_OF_RANGE_LOG, clusterFactory, createOffsetReader, type KafkajsBroker, type KafkajsCluster } from '../../../streams/kafka/kafkajs/offset-reader.js';

const require = createRequire(import.meta.url);
type Enc = {
  writeInt8(v: number): Enc;
  writeInt16(v: number): Enc;
  writeInt32(v: number): Enc;
  writeInt64(v: unknown): Enc;
  writeString(v: string): Enc;
  writeBytes(v: Buffer): Enc;
  writeArray(a: unknown[]): Enc;
  readonly buffer: Buffer;
};
const Encoder = require('kafkajs/src/protocol/encoder.js') as new () => Enc;
const Long = require('kafkajs/src/utils/long.js') as { fromValue(v: number | string): unknown };
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js') as { RecordBatch(o: object): Promise<Enc> };
const RecordEncoder = require('kafkajs/src/protocol/recordBatch/record/v0/index.js') as (o: object) => Enc;
const crc32C = require('kafkajs/src/protocol/recordBatch/crc32C/index.js') as (b: Buffer) => number;
const fetchProtocol = require('kafkajs/src/protocol/requests/fetch/index.js') as {
  versions: string[];
  protocol(o: { version: number }): (r: object) => { request: { encode(): Promise<Enc> }; response: { decode(b: Buffer): Promise<object>; parse(d: object): Promise<FetchAnswer> } };
};
const Broker = require('kafkajs/src/broker/index.js') as { prototype: Record<string, unknown> };
const { CompressionTypes } = kafkajs;

type FetchAnswer = { responses: Array<{ topicName: string; partitions: KafkajsFetchPartition[] }> };

// --- Building a Fetch v11 answer with kafkajs's own encoders ---------------

interface BatchSpec {
  base: number;
  values: Array<string | null>;
  producerId?: number;
  transactional?: boolean;
  /** A control batch with one marker: 0 ABORT, 1 COMMIT. */
  control?: 0 | 1;
  compression?: number;
  /** As compaction leaves it: the batch covers more offsets than its records. */
  lastOffsetDelta?: number;
}

async function batch(b: BatchSpec): Promise<Buffer> {
  const records = b.control !== undefined
    ? [RecordEncoder({ offsetDelta: 0, key: Buffer.from([0, 0, 0, b.control]), value: Buffer.from([0, 0, 0, 0, 0, 0]) })]
    : b.values.map((v, i) => RecordEncoder({ offsetDelta: i, timestampDelta: i, key: Buffer.from(`k${b.base + i}`), value: v === null ? null : Buffer.from(v), headers: { h: Buffer.from(`h${b.base + i}`), twice: [Buffer.from('first'), Buffer.from('last')] } }));
  const enc = await RecordBatch({
    compression: b.compression ?? CompressionTypes.None,
    firstOffset: Long.fromValue(b.base),
    firstTimestamp: 1_700_000_000_000,
    lastOffsetDelta: b.lastOffsetDelta ?? records.length - 1,
    transactional: b.transactional ?? b.control !== undefined,
    producerId: Long.fromValue(b.producerId ?? -1),
    records,
  });
  const bytes = Buffer.from(enc.buffer);
  if (b.control !== undefined) {
    // kafkajs's encoder has no control flag: set it (attributes follow base offset, length, epoch, magic, crc) and checksum again.
    const ATTRIBUTES = 8 + 4 + 4 + 1 + 4;
    bytes.writeInt16BE(bytes.readInt16BE(ATTRIBUTES) | 0x20, ATTRIBUTES);
    bytes.writeUInt32BE(crc32C(bytes.subarray(ATTRIBUTES)), ATTRIBUTES - 4);
  }
  return bytes;
}

async function fetchAnswer(o: { errorCode?: number; hw: number; lso: number; aborted?: Array<[number, number]>; batches: BatchSpec[]; partialTail?: boolean }): Promise<KafkajsFetchPartition> {
  const batches = await Promise.all(o.batches.map(batch));
  if (o.partialTail) batches.push((await batch({ base: 1000, values: ['cut off'] })).subarray(0, 40));
  const partition = new Encoder()
    .writeInt32(0)
    .writeInt16(o.errorCode ?? 0)
    .writeInt64(o.hw)
    .writeInt64(o.lso)
    .writeInt64(0)
    .writeArray((o.aborted ?? []).map(([producerId, first]) => new Encoder().writeInt64(producerId).writeInt64(first)))
    .writeInt32(-1)
    .writeBytes(Buffer.concat(batches));
  const body = new Encoder().writeInt32(0).writeInt16(0).writeInt32(0).writeArray([new Encoder().writeString('t').writeArray([partition])]);
  const { response } = fetchProtocol.protocol({ version: 11 })({ replicaId: -1, isolationLevel: 1, maxWaitTime: 0, minBytes: 1, maxBytes: 1, topics: [] });
  const parsed = await response.parse(await response.decode(body.buffer));
  return parsed.responses[0]!.partitions[0]!;
}

const offsetsOf = (rs: KafkajsRecord[]) => rs.map((r) => r.offset);

describe('the kafkajs 2.2.4 internals the offset reader relies on', () => {
  test('a Kafka keeps its Cluster factory under the private symbol, and the Cluster has the methods used', () => {
    const kafka = new Kafka({ brokers: ['127.0.0.1:1'], logLevel: logLevel.NOTHING });
    expect(Object.getOwnPropertySymbols(kafka).map((s) => s.description)).toContain(CREATE_CLUSTER_SYMBOL);
    const create = clusterFactory(kafka);
    expect(create).not.toBeNull();
    const cluster = create!({ allowAutoTopicCreation: false, isolationLevel: 1 }) as KafkajsCluster & { brokerPool: { metadata: unknown } };
    for (const m of ['connect', 'disconnect', 'addTargetTopic', 'refreshMetadata', 'refreshMetadataIfNecessary', 'findLeaderForPartitions', 'findBroker'] as const) {
      expect(typeof cluster[m], m).toBe('function');
    }
    // Leader node id → partitions, and a partition the metadata lacks left out.
    cluster.brokerPool.metadata = { topicMetadata: [{ topic: 't', partitionMetadata: [{ partitionId: 0, leader: 3 }, { partitionId: 1, leader: 5 }] }] };
    expect(cluster.findLeaderForPartitions('t', [1])).toEqual({ 5: [1] });
    expect(cluster.findLeaderForPartitions('t', [7])).toEqual({});
    for (const m of ['fetch', 'listOffsets'] as const) expect(typeof Broker.prototype[m], `Broker.${m}`).toBe('function');
    expect(clusterFactory({} as Kafka), 'no symbol: no factory').toBeNull();
  });

  test('every Fetch version with isolation levels sends the isolation level asked for', async () => {
    expect(fetchProtocol.versions).toContain('11');
    for (const v of fetchProtocol.versions.map(Number).filter((v) => v >= 4)) {
      const { request } = fetchProtocol.protocol({ version: v })({
        replicaId: -1,
        isolationLevel: 1,
        maxWaitTime: 0,
        minBytes: 1,
        maxBytes: 4096,
        topics: [{ topic: 't', partitions: [{ partition: 0, fetchOffset: '5', maxBytes: 4096 }] }],
      });
      // replica_id, max_wait_time, min_bytes, max_bytes (int32 each), then isolation_level.
      expect((await request.encode()).buffer[16], `Fetch v${v}`).toBe(1);
    }
  });

  test('a decoded Fetch v11 answer has the fields read, partial tail batches dropped', async () => {
    registerCompressionCodecs();
    const p = await fetchAnswer({ hw: 9, lso: 7, aborted: [[7, 3]], batches: [{ base: 0, values: ['a', 'b', 'c'] }, { base: 3, values: ['x'], producerId: 7, transactional: true }, { base: 4, values: [], producerId: 7, control: 0 }, { base: 5, values: ['lz', null], compression: CompressionTypes.LZ4 }], partialTail: true });
    expect(p).toMatchObject({ partition: 0, errorCode: 0, highWatermark: '9', lastStableOffset: '7', abortedTransactions: [{ producerId: '7', firstOffset: '3' }] });
    expect(offsetsOf(p.messages)).toEqual(['0', '1', '2', '3', '4', '5', '6']);
    const [first] = p.messages;
    expect(first).toMatchObject({ offset: '0', timestamp: '1700000000000', isControlRecord: false, batchContext: { firstOffset: '0', lastOffsetDelta: 2, producerId: '-1', inTransaction: false } });
    expect(first!.key).toEqual(Buffer.from('k0'));
    expect(first!.value).toEqual(Buffer.from('a'));
    expect(first!.headers).toEqual({ h: Buffer.from('h0'), twice: [Buffer.from('first'), Buffer.from('last')] });
    expect(p.messages[3]!.batchContext).toMatchObject({ producerId: '7', inTransaction: true });
    expect(p.messages[4]).toMatchObject({ isControlRecord: true, key: Buffer.from([0, 0, 0, 0]) });
    expect(p.messages[6]!.value).toBeNull();
  });

  const errorOf = (code: number) => fetchAnswer({ errorCode: code, hw: 0, lso: 0, batches: [] }).then(() => null, (e: unknown) => e as { type?: string; name?: string });
  test("a partition's error code becomes the kafkajs error the reader tells apart", async () => {
    expect(await errorOf(1)).toMatchObject({ type: 'OFFSET_OUT_OF_RANGE', name: 'KafkaJSOffsetOutOfRange' });
    const notLeader = await errorOf(6);
    expect(notLeader).toMatchObject({ type: 'NOT_LEADER_FOR_PARTITION' });
    expect(isTransientKafkaError(notLeader)).toBe(true);
    expect(kafkaErrorCode(notLeader)).toBe('not_leader');
  });

  test('the line kafkajs logs for an out-of-range Fetch answer goes to debug on the row reader\'s client, and stays an error elsewhere', async () => {
    // network/connection.js logs `Response ${apiName}(key: …, version: …)` with the error's message.
    const source = require('node:fs').readFileSync(require.resolve('kafkajs/src/network/connection.js'), 'utf8') as string;
    expect(source).toContain('this.logError(`Response ${requestInfo(entry)}`, {\n          error: e.message,');
    const message = ((await errorOf(1)) as Error).message;
    const written: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: unknown) => (written.push(String(chunk)), true));
    try {
      const config = kafkaConfigSchema.parse({});
      createKafka(config, 'row-reader', 'error', OUT_OF_RANGE_LOG).logger().error('Response Fetch(key: 1, version: 11)', { error: message });
      expect(written).toEqual([]);
      createKafka(config, 'row-reader', 'error', OUT_OF_RANGE_LOG).logger().error('Response Produce(key: 0, version: 7)', { error: message });
      createKafka(config, 'stage').logger().error('Response Fetch(key: 1, version: 11)', { error: message });
      expect(written).toHaveLength(2);
      expect(written[1]).toMatch(/error kafka Response Fetch\(key: 1, version: 11\): The requested offset is not within the range/);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('committed records of a fetch answer', () => {
  test('records below the fetch offset, control records and aborted transactions are dropped', async () => {
    registerCompressionCodecs();
    const p = await fetchAnswer({
      hw: 20,
      lso: 20,
      aborted: [[7, 8]],
      batches: [
        { base: 0, values: ['0', '1', '2', '3'] },
        { base: 4, values: ['4', '5', '6'], producerId: 9, transactional: true, compression: CompressionTypes.ZSTD },
        { base: 7, values: [], producerId: 9, control: 1 },
        { base: 8, values: ['8', '9'], producerId: 7, transactional: true },
        { base: 10, values: [], producerId: 7, control: 0 },
        // The same producer's next transaction, committed: its abort marker ended the aborted one.
        { base: 11, values: ['11'], producerId: 7, transactional: true },
        { base: 12, values: [], producerId: 7, control: 1 },
        { base: 13, values: ['13'], lastOffsetDelta: 5 },
      ],
    });
    const c = committedRecords(p, 2n);
    expect(offsetsOf(c.records)).toEqual(['2', '3', '4', '5', '6', '11', '13']);
    expect(c.from).toBe(0n);
    expect(c.through, 'the last batch covers 13..18').toBe(18n);
    expect(c.bytes).toBeGreaterThan(0);
  });

  test('a fetch inside two aborted transactions of different producers drops both', async () => {
    const p = await fetchAnswer({
      hw: 8,
      lso: 8,
      aborted: [[7, 1], [8, 2]],
      batches: [
        { base: 3, values: ['p8'], producerId: 8, transactional: true },
        { base: 4, values: ['p7'], producerId: 7, transactional: true },
        { base: 5, values: [], producerId: 7, control: 0 },
        { base: 6, values: [], producerId: 8, control: 0 },
        { base: 7, values: ['plain'] },
      ],
    });
    expect(offsetsOf(committedRecords(p, 3n).records)).toEqual(['7']);
  });

  test('an answer without batches covers nothing', () => {
    expect(committedRecords({ partition: 0, errorCode: 0, highWatermark: '5', lastStableOffset: '5', abortedTransactions: [], messages: [] }, 5n)).toEqual({ records: [], through: null, from: null, bytes: 0 });
  });

  test('records become ours: offsets as strings, the last of a repeated header, small views copied', async () => {
    const p = await fetchAnswer({ hw: 3, lso: 3, batches: [{ base: 0, values: ['v0', 'x'.repeat(100_000), null] }] });
    const [small, large, tombstone] = p.messages.map((m) => toFetchedRecord('t', 0, m));
    expect(small).toEqual({ topic: 't', partition: 0, offset: '0', timestamp: 1_700_000_000_000, key: Buffer.from('k0'), value: Buffer.from('v0'), headers: { h: Buffer.from('h0'), twice: Buffer.from('last') } });
    expect(p.messages[0]!.value!.buffer.byteLength, 'kafkajs gives a view of the whole answer').toBeGreaterThan(100_000);
    expect(small!.value!.buffer.byteLength, 'copied').toBeLessThanOrEqual(Buffer.poolSize);
    expect(large!.value!.buffer, 'most of the answer: kept as it is').toBe(p.messages[1]!.value!.buffer);
    expect(tombstone!.value).toBeNull();
  });
});

describe('offsets and request sizes', () => {
  test('offsets are sorted and made distinct; anything but a decimal offset is refused', () => {
    expect(sortedOffsets(['10', '2', '10', '0', '9007199254740993'])).toEqual([0n, 2n, 10n, 9007199254740993n]);
    for (const bad of ['-1', '01', '1.5', '', 'x']) expect(() => sortedOffsets([bad]), bad).toThrow(RangeError);
  });

  test('a request is sized for the wanted offsets up to the first large gap, within the bounds', () => {
    const max = 8 * 1024 * 1024;
    expect(requestBytes([5n], 0, null, max), 'first fetch').toBe(FIRST_REQUEST_BYTES);
    expect(requestBytes([5n], 0, null, 4096)).toBe(4096);
    // 1 kB records: 0..99 then a gap of 1000 offsets (1 MB): the request covers the first run.
    const wanted = [...[...Array(100).keys()].map(BigInt), 1100n, 1101n];
    expect(requestBytes(wanted, 0, 1000, max)).toBe(Math.ceil(100 * 1000 * 1.25));
    expect(requestBytes(wanted, 100, 1000, max), 'after the gap').toBe(MIN_REQUEST_BYTES);
    // A gap just within GAP_BYTES is read through.
    const within = BigInt(Math.floor(GAP_BYTES / 1000));
    expect(requestBytes([0n, within], 0, 1000, max)).toBe(Math.ceil((Number(within) + 1) * 1000 * 1.25));
    expect(requestBytes([0n, within + 1n], 0, 1000, max), 'and one past it is not').toBe(MIN_REQUEST_BYTES);
    expect(requestBytes(wanted, 0, 1000, 50_000), 'never above maxBytes').toBe(50_000);
    expect(requestBytes([0n, 1n], 0, 1, max), 'never below the minimum').toBe(MIN_REQUEST_BYTES);
  });
});

// --- The reader's walk, over a scripted cluster --------------------------------

interface Script {
  /** The log: offset → value (absent: no record there). */
  log: Map<number, string>;
  logStart: number;
  hw: number;
  lso?: number;
  /** Most records one answer holds. */
  perAnswer: number;
  /** Fetches that fail first, with these kafkajs errors. */
  failures?: Array<Error & { type?: string; retriable?: boolean }>;
}

function scriptedReader(s: Script, options: { attempts?: number; pendingWaitMs?: number; maxBytes?: number } = {}) {
  const seen = { fetchOffsets: [] as string[], maxBytes: [] as number[], refreshes: 0, leaders: [] as string[] };
  let leader = 1;
  const broker = (nodeId: string): KafkajsBroker => ({
    async fetch({ topics }) {
      const [{ partitions: [req] }] = topics as unknown as [{ partitions: [{ fetchOffset: string; maxBytes: number }] }];
      seen.fetchOffsets.push(req.fetchOffset);
      seen.maxBytes.push(req.maxBytes);
      seen.leaders.push(nodeId);
      const failure = s.failures?.shift();
      if (failure) throw failure;
      const at = Number(req.fetchOffset);
      if (at < s.logStart || at > s.hw) throw Object.assign(new Error('out of range'), { type: 'OFFSET_OUT_OF_RANGE', name: 'KafkaJSOffsetOutOfRange' });
      const stable = s.lso ?? s.hw;
      const messages: KafkajsRecord[] = [];
      for (let o = at; o < stable && messages.length < s.perAnswer; o++) {
        const value = s.log.get(o);
        if (value !== undefined) messages.push({ offset: String(o), timestamp: '1', key: null, value: Buffer.from(value), headers: {}, isControlRecord: false, batchContext: { firstOffset: String(o), lastOffsetDelta: 0, producerId: '-1', inTransaction: false } });
      }
      return { responses: [{ topicName: 't', partitions: [{ partition: 0, errorCode: 0, highWatermark: String(s.hw), lastStableOffset: String(stable), abortedTransactions: [], messages }] }] };
    },
    async listOffsets() {
      return { responses: [{ topic: 't', partitions: [{ partition: 0, offset: String(s.logStart) }] }] };
    },
  });
  const cluster: KafkajsCluster = {
    connect: async () => {},
    disconnect: async () => {},
    addTargetTopic: async () => {},
    refreshMetadata: async () => {
      seen.refreshes++;
      leader = 2; // the partition moved
    },
    refreshMetadataIfNecessary: async () => {},
    findLeaderForPartitions: () => ({ [leader]: [0] }),
    findBroker: async ({ nodeId }) => broker(nodeId),
  };
  const kafka = { [Symbol(CREATE_CLUSTER_SYMBOL)]: () => cluster } as unknown as Kafka;
  return { reader: createOffsetReader(kafka, { maxBytes: options.maxBytes ?? 1 << 20, attempts: options.attempts ?? 4, pendingWaitMs: options.pendingWaitMs ?? 5_000 }), seen };
}

const logOf = (n: number) => new Map([...Array(n).keys()].map((o) => [o, `v${o}`]));
const keysOf = (m: Map<string, unknown>) => [...m.keys()];

describe('the offset reader over a scripted cluster', () => {
  test('each fetch starts at the first wanted offset not answered yet: a gap is jumped', async () => {
    const { reader, seen } = scriptedReader({ log: logOf(10_000), logStart: 0, hw: 10_000, perAnswer: 10 });
    const got = await reader.read('t', 0, ['5000', '3', '4', '9', '12', '9999', '3']);
    expect(keysOf(got)).toEqual(['3', '4', '9', '12', '5000', '9999']);
    expect(got.get('5000')!.value).toEqual(Buffer.from('v5000'));
    expect(seen.fetchOffsets).toEqual(['3', '5000', '9999']);
    expect(reader.fetches).toBe(3);
    // One answer shorter than the run: the next fetch goes on from the first offset still missing.
    const short = scriptedReader({ log: logOf(100), logStart: 0, hw: 100, perAnswer: 3 });
    expect(keysOf(await short.reader.read('t', 0, ['0', '2', '4', '6']))).toEqual(['0', '2', '4', '6']);
    expect(short.seen.fetchOffsets).toEqual(['0', '4']);
    expect(Math.max(...seen.maxBytes)).toBeLessThanOrEqual(1 << 20);
  });

  test('below the log start and past the end are absent', async () => {
    const { reader, seen } = scriptedReader({ log: logOf(100), logStart: 40, hw: 100, perAnswer: 1000 });
    expect(keysOf(await reader.read('t', 0, ['0', '39', '40', '99', '100', '150']))).toEqual(['40', '99']);
    expect(seen.fetchOffsets).toEqual(['0', '40', '100']);
    expect(keysOf(await reader.read('t', 0, ['150', '2000']))).toEqual([]);
    // Offsets the answer covered without a record (markers, aborted, compacted) are absent too.
    const gaps = scriptedReader({ log: new Map([[1, 'a'], [5, 'b']]), logStart: 0, hw: 6, perAnswer: 10 });
    expect(keysOf(await gaps.reader.read('t', 0, ['0', '1', '2', '5']))).toEqual(['1', '5']);
  });

  test('an offset held back by an open transaction is waited for, then `request_timeout`', async () => {
    const s: Script = { log: logOf(10), logStart: 0, hw: 10, lso: 4, perAnswer: 100 };
    const { reader } = scriptedReader(s, { pendingWaitMs: 150 });
    const started = Date.now();
    await expect(reader.read('t', 0, ['2', '6'])).rejects.toMatchObject({ code: 'request_timeout', retriable: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    const waiting = scriptedReader(s, { pendingWaitMs: 5_000 }).reader.read('t', 0, ['2', '6']);
    setTimeout(() => (s.lso = 10), 100);
    expect(keysOf(await waiting)).toEqual(['2', '6']);
  });

  test('a leader change refreshes the metadata and fetches from the new leader; it gives up with a code', async () => {
    const notLeader = () => Object.assign(new Error('This server is not the leader for that topic-partition'), { type: 'NOT_LEADER_FOR_PARTITION', retriable: true, name: 'KafkaJSProtocolError' });
    const moved = scriptedReader({ log: logOf(10), logStart: 0, hw: 10, perAnswer: 100, failures: [notLeader()] });
    expect(keysOf(await moved.reader.read('t', 0, ['1']))).toEqual(['1']);
    expect(moved.seen.leaders).toEqual(['1', '2']);
    expect(moved.seen.refreshes).toBe(1);

    const gone = scriptedReader({ log: logOf(10), logStart: 0, hw: 10, perAnswer: 100, failures: [...Array(10)].map(notLeader) }, { attempts: 3 });
    const e = (await gone.reader.read('t', 0, ['1']).then(() => null, (x: unknown) => x)) as { code: string; message: string; retriable: boolean };
    expect(e).toMatchObject({ code: 'not_leader', retriable: true });
    expect(e.message).toMatch(/fetching t\[0\]@1: .*not the leader.*\(tried 3 times\)/);
    expect(gone.seen.fetchOffsets).toHaveLength(3);

    const denied = scriptedReader({ log: logOf(10), logStart: 0, hw: 10, perAnswer: 100, failures: [Object.assign(new Error('Not authorized to access topics'), { type: 'TOPIC_AUTHORIZATION_FAILED', retriable: false, name: 'KafkaJSProtocolError' })] });
    await expect(denied.reader.read('t', 0, ['1'])).rejects.toMatchObject({ code: 'authorization_failed' });
    expect(denied.seen.fetchOffsets, 'not retried').toHaveLength(1);
  });

  test('a read refuses what is not an offset, and anything after close', async () => {
    const { reader } = scriptedReader({ log: logOf(10), logStart: 0, hw: 10, perAnswer: 100 });
    await expect(reader.read('t', 0, ['-3'])).rejects.toMatchObject({ code: 'usage' });
    await reader.read('t', 0, ['1']);
    await reader.close();
    await expect(reader.read('t', 0, ['1'])).rejects.toMatchObject({ code: 'consumer_failed' });
  });
});

/**
 * Records of any size on the real broker (docs/design-chunked-records.md):
 * the writers' half. Topics created with `topics.max_message_bytes` = 1 MiB
 * while `kafka.max_message_bytes` stays 64 MiB, so every writer has to learn
 * the limit from describeConfigs. What is written is read back read_committed
 * (OpsClient.scan) through the Reassembler and compared byte for byte.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { generateEvents } from '../../loadgen/index.js';
import { isChunk } from '../../streams/chunks/chunk-format.js';
import { ChunkingTransactionalSink } from '../../streams/chunks/chunking-sink.js';
import { Reassembler, type WholeRecord } from '../../streams/chunks/reassembler.js';
import { RecordLimits } from '../../streams/chunks/record-limits.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { createClient } from '../../streams/kafka/clients.js';
import type { KafkaClient, ScanRecord } from '../../streams/kafka/types.js';
import { createPublisher } from '../../streams/publish/publisher.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { testEnv, type TestEnv } from './helpers.js';

const MiB = 1024 * 1024;

let env: TestEnv | undefined;
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c().catch(() => undefined);
  await env?.close();
  env = undefined;
});

/** Every committed record of `topic` as a chunk-aware reader sees it, with the raw record count. */
async function readWhole(e: TestEnv, topic: string): Promise<{ whole: WholeRecord[]; raw: ScanRecord[] }> {
  const admin = await e.ops.admin();
  const offsets = await admin.topicOffsets(topic).finally(() => admin.close());
  const raw: ScanRecord[] = [];
  const result = await e.ops.scan(
    offsets.map((o) => ({ topic, partition: o.partition, start: o.low, end: o.high })),
    (r) => void raw.push(r),
    { idleTimeoutMs: 20_000 },
  );
  expect(result.complete).toBe(true);
  const whole: WholeRecord[] = [];
  for (const o of offsets) {
    const r = new Reassembler({ start: o.low, trusted: false, maxHeldBytes: 2 ** 31, chunkWaitMs: 120_000 });
    for (const rec of raw.filter((x) => x.partition === o.partition)) expect(r.push({ ...rec, timestamp: Number(rec.timestamp) }, 0)).toBeNull();
    for (const w of r.take()) {
      expect(w.kind, `${topic}/${o.partition}@${w.offset}`).toBe('record');
      whole.push(w as WholeRecord);
    }
  }
  return { whole, raw };
}

const pattern = (n: number, seed: number): Buffer => {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 29 + seed) & 0xff;
  return b;
};

describe('chunked records: writers against the real broker', () => {
  test('topics created with topics.max_message_bytes = 1 MiB report it, and RecordLimits discovers it (kafkajs and platformatic admins)', async () => {
    env = await testEnv('chunk-limits', [[['topics', 'max_message_bytes'], MiB]]);
    const e = env;
    expect(e.config.kafka.max_message_bytes).toBe(64 * MiB);
    const names = topicNames(e.prefix);
    for (const kind of ['kafkajs', 'platformatic'] as const) {
      const client = await createClient({ ...e.config.kafka, client: kind }, 'chunk-limits');
      closers.push(() => client.close());
      const admin = await client.admin();
      closers.push(() => admin.close());
      const lines: string[] = [];
      const limits = new RecordLimits({ admin: () => admin, fallbackBytes: e.config.kafka.max_message_bytes, log: (l) => lines.push(l) });
      await limits.load([names.packed, names.rowCompleted, names.accumulateChangelog]);
      expect([limits.limit(names.packed), limits.limit(names.rowCompleted), limits.limit(names.accumulateChangelog), lines], kind).toEqual([MiB, MiB, 64 * MiB, []]);
    }
  });

  test.each(['kafkajs', 'platformatic'] as const)(
    '%s: a stage sink writes a 3 MB value into a 1 MiB topic as one chunk set in its transaction, read back whole; a batch over a lowered limit is record_limit_changed',
    async (kind) => {
      env = await testEnv(`chunk-sink-${kind}`, [[['topics', 'max_message_bytes'], MiB]]);
      const e = env;
      const topic = topicNames(e.prefix).packed;
      const client: KafkaClient = await createClient({ ...e.config.kafka, client: kind }, 'chunk-sink');
      closers.push(() => client.close());
      const admin = await client.admin();
      closers.push(() => admin.close());
      const partitionsOf = (t: string) => admin.partitionCount(t);
      const limits = new RecordLimits({ admin: () => admin, fallbackBytes: e.config.kafka.max_message_bytes, log: () => undefined });
      const inner = client.transactionalSink(`${e.prefix}chunk-sink`, { transactionTimeoutMs: 30_000, partitionsOf });
      const sink = new ChunkingTransactionalSink(inner, { limits, partitionsOf, requestBudget: e.config.kafka.max_message_bytes });
      closers.push(() => sink.close());
      await sink.init();
      const big = pattern(3_000_000, 1);
      await sink.begin();
      const pos = await sink.send([
        { topic, key: 'g1', value: Buffer.from('before'), headers: { batch_id: 'b1' } },
        { topic, key: 'g1', value: big, headers: { batch_id: 'b1' } },
      ]);
      await sink.commit();
      expect(pos[1]!.chunks).toBe(3);
      // An aborted set is not seen at all.
      await sink.begin();
      await sink.send([{ topic, key: 'g1', value: pattern(2_500_000, 2) }]);
      await sink.abort();
      const { whole, raw } = await readWhole(e, topic);
      expect(raw.filter((r) => isChunk(r.value))).toHaveLength(3);
      expect(whole.map((w) => w.value!.length)).toEqual([6, 3_000_000]);
      expect(whole[1]!.value!.equals(big)).toBe(true);
      expect([whole[1]!.offset, whole[1]!.lastOffset, whole[1]!.headers['batch_id']!.toString()]).toEqual([pos[1]!.offset, pos[1]!.lastOffset, 'b1']);
      // Sent whole into the 1 MiB topic by a sink that believes in 64 MiB: the broker refuses it.
      const raw2 = client.transactionalSink(`${e.prefix}chunk-sink-raw`, { transactionTimeoutMs: 30_000, partitionsOf });
      closers.push(() => raw2.close());
      await raw2.init();
      await raw2.begin();
      await expect(raw2.send([{ topic, key: 'g1', partition: 0, value: pattern(2 * MiB, 3) }])).rejects.toMatchObject({ code: 'record_limit_changed' });
      await raw2.abort().catch(() => undefined);
    },
    120_000,
  );

  test(
    'a ~12 MB router-replay row published by the TypeScript publisher into a 1 MiB rollout.row-completed arrives whole, equal to its encoding',
    async () => {
      env = await testEnv('chunk-publisher', [[['topics', 'max_message_bytes'], MiB]]);
      const e = env;
      const names = topicNames(e.prefix);
      const events = [...generateEvents({ batches: 1, groupsPerBatch: 1, generations: 1, seed: 12, profile: 'router-replay-32k', runId: 'pub12' })];
      const row = events.flatMap((ev) => (ev.kind === 'row' ? [ev.row] : []))[0]!;
      const publisher = await createPublisher(e.config, { clientSuffix: 'chunk-test', transactionalId: `${e.prefix}publisher` });
      closers.push(() => publisher.close());
      const receipt = await publisher.publishRow(row);
      await publisher.endBatch(row.batch_id, 1);
      expect(receipt.bytes).toBeGreaterThan(12_000_000);
      const { whole, raw } = await readWhole(e, names.rowCompleted);
      const codec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), e.registry).init();
      const rows = whole.filter((w) => w.partition === receipt.partition && w.value!.length > 1000);
      expect(rows).toHaveLength(1);
      expect(rows[0]!.chunks).toBe(Math.ceil(receipt.bytes / (MiB - 2048)));
      expect(raw.filter((r) => isChunk(r.value)).length).toBe(rows[0]!.chunks);
      // Byte for byte what the publisher encoded (the same registry schema id), and it decodes to the row.
      expect(rows[0]!.value!.equals(codec.encode({ kind: 'row', row }))).toBe(true);
      const decoded = await codec.decode(rows[0]!.value!);
      expect(decoded.kind === 'row' && decoded.row.group_id).toBe(row.group_id);
    },
    180_000,
  );
});

/**
 * Records of any size on the real broker (docs/design-chunked-records.md).
 * Topics created with `topics.max_message_bytes` (1 or 8 MiB) while
 * `kafka.max_message_bytes` stays 64 MiB, so every writer has to learn the
 * limit from describeConfigs: the stage sink on both clients, the publisher,
 * and whole pipelines of router-replay-32k groups (rows and packed groups
 * chunked, the stages reading chunk sets); a pack SIGKILLed mid set (only
 * rollout.packed lowered to 1 MiB there, with the broker's alterConfigs).
 * What is written is read back read_committed (OpsClient.scan) through the
 * Reassembler and compared byte for byte.
 */
import '../../streams/kafka/kafkajs/speedups.js'; // before kafkajs loads (createKafka refuses a kafkajs without the send-retry fix)
import kafkajs from 'kafkajs';
import { afterEach, describe, expect, test } from 'vitest';
import { generateEvents } from '../../loadgen/index.js';
import { HEADER_BYTES } from '../../streams/codecs/wire-format.js';
import { isChunk } from '../../streams/chunks/chunk-format.js';
import { ChunkingTransactionalSink } from '../../streams/chunks/chunking-sink.js';
import { Reassembler, type WholeRecord } from '../../streams/chunks/reassembler.js';
import { RecordLimits } from '../../streams/chunks/record-limits.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { createClient } from '../../streams/kafka/clients.js';
import type { KafkaClient, ScanRecord } from '../../streams/kafka/types.js';
import { createPublisher } from '../../streams/publish/publisher.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { expectedRun } from './exactly-once-expectations.js';
import { connectRowProducer, testEnv, type TestEnv } from './helpers.js';
import { kill, startStage, writeTestConfig, type StageProcess } from './stage-processes.js';

const MiB = 1024 * 1024;

let env: TestEnv | undefined;
const closers: Array<() => Promise<void>> = [];
let procs: StageProcess[] = [];
afterEach(async () => {
  await Promise.all(procs.map((p) => kill(p)));
  procs = [];
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

  /** Sets `topic`'s max.message.bytes on the broker (what an operator's kafka-configs --alter does). */
  async function setLimit(e: TestEnv, topic: string, bytes: number): Promise<void> {
    await e.admin.alterConfigs({ validateOnly: false, resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'max.message.bytes', value: String(bytes) }] }] });
  }

  /** Σ high watermarks of `topic`. */
  async function recordsIn(e: TestEnv, topic: string): Promise<number> {
    const admin = await e.ops.admin();
    const offsets = await admin.topicOffsets(topic).finally(() => admin.close());
    return offsets.reduce((n, o) => n + Number(o.high), 0);
  }

  /**
   * rollout.packed read whole once every expected group is there: waits
   * (cheaply, on the high watermarks) for at least `minRecords` offsets,
   * reads it through the Reassembler, and checks after a pause that nothing
   * more was written (a duplicate would be).
   */
  async function packedWhole(e: TestEnv, groups: number, minRecords: number, timeoutMs: number, procsToBlame: StageProcess[]): Promise<WholeRecord[]> {
    const until = Date.now() + timeoutMs;
    const packed = topicNames(e.prefix).packed;
    const blame = () => procsToBlame.map((p) => `${p.name}: ${p.log.slice(-6).join('\n')}`).join('\n');
    while ((await recordsIn(e, packed)) < minRecords) {
      if (Date.now() > until) throw new Error(`rollout.packed below ${minRecords} offsets; last lines:\n${blame()}`);
      await new Promise((r) => setTimeout(r, 2000));
    }
    for (;;) {
      const { whole } = await readWhole(e, packed);
      if (new Set(whole.map((w) => w.key!.toString())).size >= groups) {
        const high = await recordsIn(e, packed);
        await new Promise((r) => setTimeout(r, 5000));
        expect(await recordsIn(e, packed), 'nothing written to rollout.packed after every group was there').toBe(high);
        return whole;
      }
      if (Date.now() > until) throw new Error(`${whole.length} of ${groups} groups packed; last lines:\n${blame()}`);
      await new Promise((r) => setTimeout(r, 5000));
    }
  }

  function expectPackedOnce(whole: WholeRecord[], want: Map<string, Buffer>, minChunks: number): void {
    const keys = whole.map((w) => w.key!.toString());
    expect(keys.filter((k, i) => keys.indexOf(k) !== i), 'groups packed more than once').toEqual([]);
    expect([...keys].sort()).toEqual([...want.keys()].sort());
    for (const w of whole) {
      expect(w.value!.subarray(HEADER_BYTES).equals(want.get(w.key!.toString())!), `packed bytes of ${w.key} equal offline all`).toBe(true);
      expect(w.chunks, `chunks of ${w.key}`).toBeGreaterThanOrEqual(minChunks);
    }
  }

  const routerReplayEvents = (runId: string, groups: number) => [...generateEvents({ batches: 1, groupsPerBatch: groups, generations: 8, seed: 32, profile: 'router-replay-32k', runId })];
  /** Fewest offsets the chunk sets of `want` take at `limit` (a chunk carries less than the limit). */
  const minChunks = (want: Map<string, Buffer>, limit: number) => [...want.values()].reduce((n, v) => n + Math.ceil(v.length / limit), 0);

  test.each([
    [1, 'fused', 2],
    [8, 'separate', 1],
  ] as const)(
    'router-replay-32k groups (8 rows × 32k tokens) pack exactly once through %d MiB topics (topics.max_message_bytes; kafka.max_message_bytes 64 MiB, so the limit is discovered), %s, %d group(s): rows and packed groups chunked, byte-equal to offline all, no dead letter',
    async (mib, mode, groups) => {
      // Every topic but the changelogs created at the limit: rows (~12.6 MB) are published as chunk sets too.
      env = await testEnv(`chunk-pack-${mib}`, [[['topics', 'max_message_bytes'], mib * MiB]]);
      const e = env;
      const names = topicNames(e.prefix);
      expect(e.config.kafka.max_message_bytes).toBe(64 * MiB);
      const events = routerReplayEvents(`${e.prefix}run`, groups);
      const want = await expectedRun(e.config, events);
      for (const v of want.packed.values()) expect(v.length).toBeGreaterThan(100_000_000);
      const configPath = writeTestConfig(e.prefix);
      const p = startStage('all', 'accumulate,postprocess,pack', configPath, [mode === 'fused' ? '--fused' : '--separate']);
      procs.push(p);
      const producer = await connectRowProducer(e, 16 * MiB);
      await producer.send(events);
      await producer.disconnect();
      const whole = await packedWhole(e, want.packed.size, minChunks(want.packed, mib * MiB), 300_000, [p]);
      expectPackedOnce(whole, want.packed, Math.ceil(100_000_000 / (mib * MiB)));
      expect((await readWhole(e, names.deadLetter)).whole, 'dead letters').toEqual([]);
      expect(p.log.filter((l) => /record_too_large|record limit of/.test(l))).toEqual([]);
    },
    400_000,
  );

  test(
    'separate mode: pack SIGKILLed mid chunk set (chunks.mid-set) and restarted loses and repeats nothing',
    async () => {
      env = await testEnv('chunk-crash');
      const e = env;
      const names = topicNames(e.prefix);
      await setLimit(e, names.packed, MiB);
      const events = routerReplayEvents(`${e.prefix}run`, 1);
      const want = await expectedRun(e.config, events);
      const configPath = writeTestConfig(e.prefix);
      procs.push(startStage('accumulate', 'accumulate', configPath), startStage('postprocess', 'postprocess', configPath));
      const victim = startStage('pack', 'pack', configPath, ['--crash-at', 'chunks.mid-set:3']);
      procs.push(victim);
      const producer = await connectRowProducer(e, 16 * MiB);
      await producer.send(events);
      await producer.disconnect();
      const code = await Promise.race([victim.exited, new Promise<'alive'>((r) => setTimeout(() => r('alive'), 240_000))]);
      expect(code === 'alive' ? 'still running' : `${code}/${victim.child.signalCode}`, `pack died at chunks.mid-set:\n${victim.log.slice(-10).join('\n')}`).toBe('null/SIGKILL');
      expect(victim.log.some((l) => l.includes('crash point chunks.mid-set reached (3)'))).toBe(true);
      const again = startStage('pack', 'pack', configPath);
      procs.push(again);
      const whole = await packedWhole(e, want.packed.size, minChunks(want.packed, MiB), 300_000, [again]);
      expectPackedOnce(whole, want.packed, 90);
      expect((await readWhole(e, names.deadLetter)).whole, 'dead letters').toEqual([]);
    },
    600_000,
  );
});

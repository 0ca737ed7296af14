/**
 * The chunk readers in the runtime (streams/chunks/chunked-*.ts), on the
 * topology driver with chunk sets written by the test helper
 * (streams/testing/chunk-sets.ts) onto the stages' input topics: the stages
 * see whole records only, pack byte-equal to the unchunked (offline) run,
 * commit past a set's last chunk, skip what a trusted start says was handed
 * on, and dead-letter a set that cannot be read whole exactly once.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { configSchema, type Config } from '../../../config/schema.js';
import { generateEvents, type LoadgenEvent } from '../../../loadgen/index.js';
import { splitIntoChunks } from '../../../streams/chunks/chunk-format.js';
import type { FetchedRecord } from '../../../streams/kafka/types.js';
import { HEADER_BYTES } from '../../../streams/codecs/wire-format.js';
import { consumerGroupId } from '../../../streams/runtime/pipeline.js';
import { TopologyTestDriver } from '../../../streams/testing/topology-driver.js';
import { asRecords, offlineOutputs, splitLeavingOpenGroups } from '../streams/driver-fixtures.js';

const base = { accumulate: { batch_end_grace_ms: 0 }, runtime: { poison: { attempts: 2, backoff_ms: 0 } } };
const config: Config = configSchema.parse(base);
/** Intermediate records holding their rows: group-complete and penalized values are kilobytes, so they chunk too. */
const full: Config = configSchema.parse({ ...base, runtime: { ...base.runtime, intermediate_records: 'full' } });
/** Chunk payloads this small cut every row and group into several chunks. */
const PAYLOAD = 256;

let drivers: TopologyTestDriver[] = [];
afterEach(async () => {
  for (const d of drivers) await d.close();
  drivers = [];
});

async function newDriver(o: { c?: Config; stages?: Array<'accumulate' | 'postprocess' | 'pack'> } = {}): Promise<TopologyTestDriver> {
  const d = await TopologyTestDriver.create({ partitions: 2, config: o.c ?? config, ...(o.stages ? { stages: o.stages } : {}) });
  drivers.push(d);
  return d;
}

function loadgenEvents(seed = 51): LoadgenEvent[] {
  return [...generateEvents({ batches: 2, groupsPerBatch: 5, generations: 4, seed, profile: 'small', runId: `c${seed}` })];
}

/** Packed values of `d` (after the 5-byte header) by group, failing on a group packed twice. */
function packedOf(d: TopologyTestDriver): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const r of d.committedRecords('packed')) {
    const k = r.key!.toString();
    expect(out.has(k), `group ${k} packed twice`).toBe(false);
    out.set(k, r.value!.subarray(HEADER_BYTES));
  }
  return out;
}

function expectPackedEqual(got: Map<string, Buffer>, want: Map<string, Buffer>): void {
  expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
  for (const [k, v] of want) expect(got.get(k)!.equals(v), `packed bytes of ${k} equal the unchunked run`).toBe(true);
}

async function deadLetters(d: TopologyTestDriver) {
  return d.committedValues('deadLetter');
}

describe('chunk sets on the stages’ input topics', () => {
  test.each([
    ['separate stages', false],
    ['fused stages', true],
  ])('%s: chunked rows pack byte-equal to the unchunked run, and accumulate commits past each last chunk', async (_n, fused) => {
    const events = loadgenEvents();
    const want = (await offlineOutputs(events, config)).packed;
    const d = await newDriver();
    await d.startInstance('a', { fused });
    const rows = asRecords(events);
    const positions = await d.produceChunked('rowCompleted', rows, PAYLOAD);
    expect(positions.filter((p) => p.chunks > 1).length, 'rows written as chunk sets').toBe(rows.filter((r) => r.kind === 'row').length);
    await d.runUntilIdle();
    expectPackedEqual(packedOf(d), want);
    expect(await deadLetters(d)).toEqual([]);
    // The committed offset of each partition is the last record's next: its last chunk + 1 (the BatchEnds are whole).
    const committed = d.cluster.group(consumerGroupId(d.config.topics.prefix, 'accumulate')).committed;
    for (let p = 0; p < 2; p++) {
      const last = d.committedRecords('rowCompleted').filter((r) => r.partition === p).at(-1)!;
      expect(committed.get(`${d.topics.rowCompleted}/${p}`)).toBe((BigInt(last.offset) + 1n).toString());
    }
  });

  test('the committed offset after a chunked row is its last chunk + 1, not its first chunk + 1', async () => {
    const events = loadgenEvents(52).filter((e) => e.kind === 'row');
    const d = await newDriver();
    await d.startInstance('a', { fused: false, stages: ['accumulate'] });
    const positions = await d.produceChunked('rowCompleted', asRecords(events), PAYLOAD);
    await d.runUntilIdle();
    const committed = d.cluster.group(consumerGroupId(d.config.topics.prefix, 'accumulate')).committed;
    for (let p = 0; p < 2; p++) {
      const last = positions.filter((x) => x.partition === p).at(-1)!;
      expect(last.chunks).toBeGreaterThan(1);
      expect(committed.get(`${d.topics.rowCompleted}/${p}`)).toBe((BigInt(last.lastOffset) + 1n).toString());
    }
  });

  test('separate mode: chunked group-complete and penalized records are read whole by postprocess and pack', async () => {
    const events = loadgenEvents(53);
    const want = (await offlineOutputs(events, full)).packed;
    // The intermediate records, as an unchunked run of accumulate and postprocess writes them.
    const first = await newDriver({ c: full, stages: ['accumulate', 'postprocess'] });
    await first.startInstance('a', { fused: false, stages: ['accumulate', 'postprocess'] });
    first.produce('rowCompleted', asRecords(events));
    await first.runUntilIdle();
    const groups = await first.committedValues('groupComplete');
    const penalized = await first.committedValues('penalized');
    expect(groups.length).toBe(want.size);

    const post = await newDriver({ c: full, stages: ['postprocess', 'pack'] });
    await post.startInstance('b', { fused: false, stages: ['postprocess', 'pack'] });
    const gp = await post.produceChunked('groupComplete', groups, PAYLOAD);
    expect(gp.every((p) => p.chunks > 1)).toBe(true);
    await post.runUntilIdle();
    expectPackedEqual(packedOf(post), want);
    expect(await deadLetters(post)).toEqual([]);

    const pack = await newDriver({ c: full, stages: ['pack'] });
    await pack.startInstance('c', { fused: false, stages: ['pack'] });
    const pp = await pack.produceChunked('penalized', penalized, PAYLOAD);
    expect(pp.every((p) => p.chunks > 1)).toBe(true);
    await pack.runUntilIdle();
    expectPackedEqual(packedOf(pack), want);
    expect(await deadLetters(pack)).toEqual([]);
  });

  test('a restart at a committed offset inside an older set skips that set’s chunks (handed on before) and reads the next set whole', async () => {
    const events = loadgenEvents(54);
    const want = (await offlineOutputs(events, full)).packed;
    const first = await newDriver({ c: full, stages: ['accumulate', 'postprocess'] });
    await first.startInstance('a', { fused: false, stages: ['accumulate', 'postprocess'] });
    first.produce('rowCompleted', asRecords(events));
    await first.runUntilIdle();
    const [ra, rb] = first.committedRecords('penalized') as [FetchedRecord, FetchedRecord];
    const d = await newDriver({ c: full, stages: ['pack'] });
    const topic = d.topics.penalized;
    // Two penalized groups interleaved on partition 0 (two writers' transactions): A0 B0 A1 B1 ...
    const ca = splitIntoChunks(ra.value!, PAYLOAD, Buffer.alloc(16, 0xaa));
    const cb = splitIntoChunks(rb.value!, PAYLOAD, Buffer.alloc(16, 0xbb));
    const sa = d.cluster.transactionalSink('writer-a');
    const sb = d.cluster.transactionalSink('writer-b');
    await sa.init();
    await sb.init();
    await sa.begin();
    await sb.begin();
    const n = Math.max(ca.length, cb.length);
    let bFirst: string | null = null;
    let bLast = '';
    for (let i = 0; i < n; i++) {
      if (ca[i]) await sa.send([{ topic, partition: 0, key: ra.key, value: ca[i]!, headers: ra.headers }]);
      if (cb[i]) {
        const [pos] = await sb.send([{ topic, partition: 0, key: rb.key, value: cb[i]!, headers: rb.headers }]);
        bFirst ??= pos!.offset;
        bLast = pos!.offset;
      }
    }
    await sa.commit();
    await sb.commit();
    // A was handed on and committed at next(A) = B's first chunk (the older open set): what a reader that read A commits.
    d.cluster.group(consumerGroupId(d.config.topics.prefix, 'pack')).committed.set(`${topic}/0`, bFirst!);
    await d.startInstance('p', { fused: false, stages: ['pack'] });
    await d.runUntilIdle();
    const got = packedOf(d);
    expect([...got.keys()]).toEqual([rb.key!.toString()]);
    expect(got.get(rb.key!.toString())!.equals(want.get(rb.key!.toString())!)).toBe(true);
    expect(await deadLetters(d), 'A’s later chunks are skipped, not dead-lettered').toEqual([]);
    expect(d.cluster.group(consumerGroupId(d.config.topics.prefix, 'pack')).committed.get(`${topic}/0`)).toBe((BigInt(bLast) + 1n).toString());
  });

  test('a set whose head retention deleted is exactly one incomplete_record dead letter; the other rows pack', async () => {
    const events = loadgenEvents(55).filter((e) => e.kind === 'row');
    const d = await newDriver();
    const positions = await d.produceChunked('rowCompleted', asRecords(events), PAYLOAD);
    const victim = positions[0]!;
    // Retention takes the set's first chunk.
    d.cluster.deleteRecords(d.topics.rowCompleted, victim.partition, BigInt(victim.offset) + 1n);
    await d.startInstance('a', { fused: true });
    await d.runUntilIdle();
    const dls = await deadLetters(d);
    expect(dls.map((x) => x.reason)).toEqual(['incomplete_record']);
    const dl = dls[0]!;
    expect(dl.message).toMatch(/below the log start|before where reading started/);
    expect(dl.records).toEqual([{ topic: d.topics.rowCompleted, partition: victim.partition, offset: (BigInt(victim.offset) + 1n).toString(), key: expect.anything(), value: null }]);
    expect(dl.group_id).toBe(events[0]!.kind === 'row' ? events[0]!.row.group_id : null);
  });

  test('a set whose last chunk never comes (a dead non-transactional writer) is one incomplete_record after kafka.chunk_wait_ms; the records behind it go on', async () => {
    const c = configSchema.parse({ ...base, kafka: { chunk_wait_ms: 200 } });
    const events = loadgenEvents(56);
    const want = (await offlineOutputs(events, c)).packed;
    const d = await newDriver({ c });
    await d.startInstance('a', { fused: true });
    // A foreign row's set, all but its last chunk, then the real input (on the same partitions).
    const junk = splitIntoChunks(Buffer.alloc(1000, 7), PAYLOAD, Buffer.alloc(16, 0xcc));
    d.produceRaw('rowCompleted', junk.slice(0, -1).map((value) => ({ key: 'foreign', value, partition: 0 })));
    d.produce('rowCompleted', asRecords(events));
    await d.runUntilIdle({ timeoutMs: 15_000 });
    const dls = await deadLetters(d);
    expect(dls.map((x) => [x.reason, x.records[0]!.offset])).toEqual([['incomplete_record', '0']]);
    expect(dls[0]!.message).toMatch(/kafka\.chunk_wait_ms/);
    expectPackedEqual(packedOf(d), want);
  });

  test('by reference: rows stored chunked are read back whole by postprocess and pack, and a restore reads back chunked pending rows', async () => {
    const c = configSchema.parse({ ...base, runtime: { ...base.runtime, intermediate_records: 'reference' } });
    const events = loadgenEvents(57);
    const want = (await offlineOutputs(events, c)).packed;
    const records = asRecords(events);
    const d = await newDriver({ c });
    const a = await d.startInstance('a', { fused: false });
    // The first part leaves groups open: the second instance restores their pending rows from the changelog and reads them back.
    const split = splitLeavingOpenGroups(records, 2);
    await d.produceChunked('rowCompleted', records.slice(0, split), PAYLOAD);
    await d.runUntilIdle();
    await d.stopInstance(a);
    await d.startInstance('b', { fused: false });
    await d.produceChunked('rowCompleted', records.slice(split), PAYLOAD);
    await d.runUntilIdle();
    expectPackedEqual(packedOf(d), want);
    expect(await deadLetters(d)).toEqual([]);
    expect(d.instance('b').logs.some((l) => /read back [1-9]\d* input records/.test(l)), 'the restore read pending rows back').toBe(true);
  });
});

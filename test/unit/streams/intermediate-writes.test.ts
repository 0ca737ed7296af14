/**
 * Records written into the middle of the pipeline (group-complete,
 * penalized) by someone other than the fused chain — `dlq redrive`,
 * `replay --to-topic`, leftovers of separate stages — are processed once,
 * in fused mode as in separate mode, and a group reaches packed once
 * however often it is written there (pack's ledger). On the topology
 * driver; the same on a real broker is test/integration/redrive.test.ts.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { configSchema, type Config } from '../../../config/schema.js';
import { generateEvents } from '../../../loadgen/index.js';
import { HEADER_FUSED_HANDOFF } from '../../../streams/api/headers.js';
import { HEADER_BYTES } from '../../../streams/codecs/wire-format.js';
import type { RuntimeMetrics } from '../../../streams/runtime/metrics.js';
import { TopologyTestDriver, type DriverInstance } from '../../../streams/testing/topology-driver.js';
import { asRecords, offlinePacked } from './driver-fixtures.js';

const PARTITIONS = 2;
/**
 * Packed values of these groups are 7.5-10 kB, penalized ones 2.4 kB: a 9,096-byte limit (5,000 after the margin) with chunking
 * off (`kafka.chunk_records: false`; with it on, a value above the limit is chunked, not dead-lettered) takes only pack's outputs.
 */
const TIGHT = 9_096;
const events = () => [...generateEvents({ batches: 1, groupsPerBatch: 4, generations: 8, seed: 3, profile: 'small', runId: 'rd' })];

let driver: TopologyTestDriver | null = null;
afterEach(async () => {
  await driver?.close();
  driver = null;
});

async function eventCount(metrics: RuntimeMetrics, stage: string, event: string): Promise<number> {
  const m = await metrics.events.get();
  return m.values.filter((v) => v.labels.stage === stage && v.labels.event === event).reduce((n, v) => n + v.value, 0);
}

const metricsOf = (d: TopologyTestDriver, i: DriverInstance) => d.pipelineOf(i).metrics;

/** Each group once on packed, byte-equal to the offline runner. */
function expectPackedOnce(d: TopologyTestDriver, want: Map<string, Buffer>): void {
  const keys = d.committedRecords('packed').map((r) => r.key!.toString());
  expect(keys.filter((k, i) => keys.indexOf(k) !== i), 'groups packed more than once').toEqual([]);
  expect([...keys].sort()).toEqual([...want.keys()].sort());
  for (const r of d.committedRecords('packed')) expect(r.value!.subarray(HEADER_BYTES).equals(want.get(r.key!.toString())!), `packed bytes of ${r.key}`).toBe(true);
}

/** A topic's committed records re-written as someone else would (no headers): what a redrive or replay writes. */
function rewrite(d: TopologyTestDriver, topic: 'groupComplete' | 'penalized'): void {
  d.produceRaw(topic, d.committedRecords(topic).map((r) => ({ key: r.key, value: r.value, partition: r.partition })));
}

/** A fused instance that has packed `events()`, with what the offline runner packs of them. */
async function fusedRun() {
  const config = configSchema.parse({ accumulate: { batch_end_grace_ms: 0 } });
  const want = await offlinePacked(events(), config);
  const d = (driver = await TopologyTestDriver.create({ partitions: PARTITIONS, config }));
  const f = await d.startInstance('f', { fused: true });
  d.produce('rowCompleted', asRecords(events()));
  await d.runUntilIdle();
  return { config, want, d, f };
}

describe('writes into the middle of the pipeline', () => {
  test.each(['fused', 'separate'] as const)(
    '%s: groups dead-lettered at pack carry their own penalized record; redriven twice after the limit is raised, each is packed once',
    async (mode) => {
      const config: Config = configSchema.parse({ accumulate: { batch_end_grace_ms: 0 }, kafka: { max_message_bytes: TIGHT, chunk_records: false }, topics: { max_message_bytes: 67_108_864 } });
      const want = await offlinePacked(events(), configSchema.parse({ accumulate: { batch_end_grace_ms: 0 } }));
      const d = (driver = await TopologyTestDriver.create({ partitions: PARTITIONS, config }));
      const fused = mode === 'fused';
      const first = await d.startInstance('tight', { fused });
      d.produce('rowCompleted', asRecords(events()));
      await d.runUntilIdle();
      const letters = await d.committedValues('deadLetter');
      expect(letters.map((l) => [l.reason, l.stage])).toEqual([...want.keys()].map(() => ['record_too_large', 'pack']));
      const penalized = new Map(d.committedRecords('penalized').map((r) => [`${r.partition}@${r.offset}`, r]));
      for (const l of letters) {
        // Its own group's input record only, with its value (it fits under the limit).
        expect(l.records).toHaveLength(1);
        const [s] = l.records;
        expect(s!.key!.toString()).toBe(l.group_id);
        expect(s!.value!.equals(penalized.get(`${s!.partition}@${s!.offset}`)!.value!)).toBe(true);
        expect(l.batch_id).not.toBeNull();
      }
      expect(d.committedRecords('packed')).toEqual([]);

      await d.stopInstance(first);
      (config.kafka as { max_message_bytes: number }).max_message_bytes = 67_108_864;
      (config.kafka as { chunk_records: boolean }).chunk_records = true;
      const second = await d.startInstance('raised', { fused });
      const redrive = () => d.produceRaw('penalized', letters.flatMap((l) => l.records.map((s) => ({ key: s.key, value: s.value, partition: s.partition }))));
      redrive();
      await d.runUntilIdle();
      expectPackedOnce(d, want);
      redrive();
      await d.runUntilIdle();
      expectPackedOnce(d, want);
      expect(await eventCount(metricsOf(d, second), 'pack', 'already_packed')).toBe(want.size);
      expect(second.logs.filter((l) => l.includes('was packed already; not packed again'))).toHaveLength(want.size);
      expect(d.committedRecords('deadLetter')).toHaveLength(want.size);
    },
  );

  test('fused: records the chain hands on carry the hand-off marker; records others write into group-complete are processed once', async () => {
    const { want, d, f } = await fusedRun();
    for (const topic of ['groupComplete', 'penalized'] as const) {
      for (const r of d.committedRecords(topic)) expect(Object.keys(r.headers), `${topic} record headers`).toContain(HEADER_FUSED_HANDOFF);
    }
    for (const r of d.committedRecords('packed')) expect(Object.keys(r.headers)).not.toContain(HEADER_FUSED_HANDOFF);
    expectPackedOnce(d, want);
    // The fused chain is idle: it finds the foreign records by the end offsets it polls.
    rewrite(d, 'groupComplete');
    await d.waitFor(() => f.logs.some((l) => l.includes('processed records written by others')), 'the fused runner processing the foreign records');
    await d.runUntilIdle();
    expect(await eventCount(metricsOf(d, f), 'postprocess', 'foreign_records')).toBe(want.size);
    expect(await eventCount(metricsOf(d, f), 'pack', 'already_packed')).toBe(want.size);
    expectPackedOnce(d, want);
  });

  test('fused: records others write into penalized between the chain\'s own writes are processed once, and the chain keeps its fast path after', async () => {
    const { config, want, d, f } = await fusedRun();
    // Foreign copies land on the partitions, then the chain writes more of its own (a second batch) right after them.
    rewrite(d, 'penalized');
    const more = [...generateEvents({ batches: 1, groupsPerBatch: 4, generations: 8, seed: 4, profile: 'small', runId: 'rd2' })];
    d.produce('rowCompleted', asRecords(more));
    await d.runUntilIdle();
    const wantAll = new Map([...want, ...(await offlinePacked(more, config))]);
    expectPackedOnce(d, wantAll);
    expect(await eventCount(metricsOf(d, f), 'pack', 'already_packed')).toBe(want.size);
  });

  test('separate: a pack stage whose offset lies behind records a fused process handed on skips them (the marker), not only by its ledger', async () => {
    const { want, d, f } = await fusedRun();
    await d.stopInstance(f);
    // As if the fused transactions' pack offsets were not visible yet when a separate pack read them.
    const committed = d.cluster.group(`${d.config.topics.prefix}rollout-stream.pack`).committed;
    for (let p = 0; p < PARTITIONS; p++) committed.set(`${d.topics.penalized}/${p}`, '0');
    const pack = await d.startInstance('pack', { stages: ['pack'] });
    await d.runUntilIdle();
    expectPackedOnce(d, want);
    expect(await eventCount(metricsOf(d, pack), 'pack', 'already_packed')).toBe(0);
  });
});

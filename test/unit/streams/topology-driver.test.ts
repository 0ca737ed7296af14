/**
 * The topology test driver (streams/testing/topology-driver.ts): the real
 * stage runners on the in-memory cluster, checked the way the real-broker
 * exactly-once tests check them (test/integration/exactly-once-expectations.ts):
 * every group in rollout.packed exactly once and byte-equal to the offline
 * runner, each intermediate topic holding each group once, and every group
 * and batch metric once, equal to the offline runner's. Separate and fused
 * runs, an instance stopped dead at each named crash point while another
 * takes over, a join and a graceful leave mid-stream, the group protocol rule
 * between the modes, and /healthz under runtime.poison.policy: stop.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { configSchema, PIPELINE_STAGES, type Config, type PipelineStage } from '../../../config/schema.js';
import { generateEvents, type LoadgenEvent } from '../../../loadgen/index.js';
import { HEADER_BYTES } from '../../../streams/codecs/wire-format.js';
import { CRASH_POINTS, type CrashPoint } from '../../../streams/runtime/crash-points.js';
import { TopologyTestDriver } from '../../../streams/testing/topology-driver.js';
import { asRecords, offlineOutputs, splitLeavingOpenGroups } from './driver-fixtures.js';

const config: Config = configSchema.parse({
  accumulate: { batch_end_grace_ms: 0 },
  runtime: { poison: { attempts: 2, backoff_ms: 0 } },
});

let driver: TopologyTestDriver | null = null;
afterEach(async () => {
  await driver?.close();
  driver = null;
});

async function newDriver(c: Config = config): Promise<TopologyTestDriver> {
  driver = await TopologyTestDriver.create({ partitions: 2, config: c });
  return driver;
}

/** Resolves with where `instance` stopped dead, or 'alive' after `ms`. */
function diedWithin(instance: { died: Promise<string> }, ms = 5_000): Promise<string> {
  return Promise.race([instance.died, new Promise<string>((r) => setTimeout(() => r('alive'), ms).unref())]);
}

/** A few dozen realistic rows in two batches, each batch closed by its BatchEnd. */
function loadgenEvents(seed = 41): LoadgenEvent[] {
  return [...generateEvents({ batches: 2, groupsPerBatch: 5, generations: 4, seed, profile: 'small', runId: `t${seed}` })];
}

interface Expected {
  /** Packed bytes (after the 5-byte header) by group. */
  packed: Map<string, Buffer>;
  /** Metric values by `scope:group or batch id`. */
  metrics: Map<string, Record<string, number>>;
}

const metricKey = (m: { scope: string; group_id: string | null; batch_id: string }) => `${m.scope}:${m.group_id ?? m.batch_id}`;

/** What the offline runner makes of the same rows. */
async function offlineRun(events: LoadgenEvent[]): Promise<Expected> {
  const out = await offlineOutputs(events, config);
  return { packed: out.packed, metrics: new Map(out.metrics.map((m) => [metricKey(m), m.values])) };
}

/**
 * Every group once in group-complete, penalized and packed, packed
 * byte-equal to the offline runner; every group and batch metric once,
 * equal to the offline runner's; no dead letters.
 */
async function expectExactlyOnce(d: TopologyTestDriver, expected: Expected): Promise<void> {
  const want = expected.packed;
  for (const topic of ['groupComplete', 'penalized', 'packed'] as const) {
    const keys = d.committedRecords(topic).map((r) => r.key!.toString());
    expect(keys.filter((k, i) => keys.indexOf(k) !== i), `groups written to ${topic} more than once`).toEqual([]);
    expect([...keys].sort(), `groups in ${topic}`).toEqual([...want.keys()].sort());
  }
  for (const r of d.committedRecords('packed')) {
    expect(r.value!.subarray(HEADER_BYTES).equals(want.get(r.key!.toString())!), `packed bytes of ${r.key} equal the offline result`).toBe(true);
  }
  expect(d.committedRecords('deadLetter')).toEqual([]);
  const metrics = await d.committedValues('metrics');
  const keys = metrics.map(metricKey);
  expect(keys.filter((k, i) => keys.indexOf(k) !== i), 'metrics written more than once').toEqual([]);
  expect(new Map(metrics.map((m) => [metricKey(m), m.values]))).toEqual(expected.metrics);
}

describe('topology test driver', () => {
  test.each([
    ['separate stages', false],
    ['fused stages', true],
  ])('%s on two partitions pack every group exactly once, byte-equal to the offline runner', async (_name, fused) => {
    const events = loadgenEvents();
    const want = await offlineRun(events);
    const d = await newDriver();
    const a = await d.startInstance('a', { fused });
    expect(d.pipelineOf(a).fused).toBe(fused);
    d.produce('rowCompleted', asRecords(events));
    await d.runUntilIdle();
    await expectExactlyOnce(d, want);
    expect(want.packed.size).toBe(10);
    expect(want.metrics.size).toBe(12);
    expect(d.health(a).status).toBe(200);
  });

  const TX_POINTS: CrashPoint[] = ['tx.after-send', 'tx.after-offsets', 'tx.after-commit'];
  const START_POINTS: CrashPoint[] = ['fence.after', 'restore.during', 'restore.after'];
  // As in test/integration/crash-points.test.ts: the fused victim runs everything, a separate victim one stage (the others run in b).
  const crashCases: Array<{ mode: string; fused: boolean; point: CrashPoint; victim: PipelineStage[] }> = [
    ...[...TX_POINTS, 'tx.after-downstream' as const, ...START_POINTS].map((point) => ({ mode: 'fused', fused: true, point, victim: [...PIPELINE_STAGES] })),
    ...[...TX_POINTS, ...START_POINTS].map((point) => ({ mode: 'separate accumulate', fused: false, point, victim: ['accumulate' as const] })),
    ...(['postprocess', 'pack'] as const).flatMap((stage) => TX_POINTS.map((point) => ({ mode: `separate ${stage}`, fused: false, point, victim: [stage] }))),
  ];

  test('the crash cases cover every named crash point', () => {
    expect(new Set(crashCases.map((c) => c.point))).toEqual(new Set(CRASH_POINTS));
  });

  test.each(crashCases)('$mode: an instance that stops dead at $point while a second one takes over loses and duplicates nothing', async ({ fused, point, victim }) => {
    const events = loadgenEvents(43);
    const want = await offlineRun(events);
    const records = asRecords(events);
    // Groups are open on every partition when a joins: a restore has pending rows to read back.
    const split = splitLeavingOpenGroups(records, 2);
    const d = await newDriver();
    const b = await d.startInstance('b', { fused });
    d.produce('rowCompleted', records.slice(0, split));
    await d.runUntilIdle();
    // b leaves state behind (closed and open groups in the changelog) for a to restore.
    expect(d.pipelineOf(b).runners[0]!.gauges().open_groups).toBeGreaterThanOrEqual(2);
    const a = await d.startInstance('a', { fused, stages: victim, crashAt: point });
    d.produce('rowCompleted', records.slice(split));
    expect(await diedWithin(a), `a reached ${point}; its log:\n${a.logs.slice(-10).join('\n')}`).toBe(point);
    expect(a.state).toBe('crashed');
    expect(a.timers.size, 'a dead instance keeps no timers').toBe(0);
    await d.runUntilIdle();
    await expectExactlyOnce(d, want);
    expect(d.health(b).status).toBe(200);
    expect(d.health(a).status).toBeNull();
    // What a left open inside a transaction was aborted by b's fencing, never read.
    if (['tx.after-send', 'tx.after-downstream', 'tx.after-offsets'].includes(point)) expect(d.cluster.abortedRecords()).toBeGreaterThan(0);
  });

  test.each([
    ['separate', false],
    ['fused', true],
  ])('%s: a second instance joining and the first leaving mid-stream lose and duplicate nothing', async (_mode, fused) => {
    const events = loadgenEvents(44);
    const want = await offlineRun(events);
    const records = asRecords(events);
    const third = Math.floor(records.length / 3);
    const d = await newDriver();
    const a = await d.startInstance('a', { fused });
    d.produce('rowCompleted', records.slice(0, third));
    await d.runUntilIdle();
    const b = await d.startInstance('b', { fused });
    const groups = fused ? ['accumulate'] : ['accumulate', 'postprocess', 'pack'];
    for (const g of groups) expect(d.cluster.group(`ttd.rollout-stream.${g}`).members.filter((m) => m.takesPartitions)).toHaveLength(2);
    d.produce('rowCompleted', records.slice(third, 2 * third));
    // Partitions move between the two while they process.
    d.rebalance();
    await d.stopInstance(a);
    d.produce('rowCompleted', records.slice(2 * third));
    await d.runUntilIdle();
    await expectExactlyOnce(d, want);
    expect(d.health(b).status).toBe(200);
    expect(a.connection.commits, 'a committed transactions').toBeGreaterThan(0);
    expect(b.connection.commits, 'b committed transactions').toBeGreaterThan(0);
  });

  test.each([
    ['fused', 'separate', true],
    ['separate', 'fused', false],
  ])('a %s instance running, a %s one on the same prefix is refused with mode_conflict (the group protocol rule)', async (_first, _second, firstFused) => {
    const events = loadgenEvents(45);
    const want = await offlineRun(events);
    const d = await newDriver();
    const a = await d.startInstance('a', { fused: firstFused });
    const members = () => [...d.cluster.groups].map(([id, g]) => `${id}: ${g.members.length}`);
    const before = members();
    const refused = await d.startInstance('b', { fused: !firstFused }).then(
      () => null,
      (e: Error & { code?: string }) => e,
    );
    expect(refused?.code).toBe('mode_conflict');
    expect(d.instance('b').state).toBe('refused');
    expect(members(), 'the refused instance left every group it had joined').toEqual(before);
    // The refused instance left nothing behind: a processes everything alone.
    d.produce('rowCompleted', asRecords(events));
    await d.runUntilIdle();
    await expectExactlyOnce(d, want);
    expect(d.health(a).status).toBe(200);
  });

  test('health is 200 while running and 503 stopped_by_policy once a poison record stops a partition (runtime.poison.policy: stop)', async () => {
    const events = loadgenEvents(46);
    const records = asRecords(events);
    const poisoned = events.find((e) => e.kind === 'row')!.row.group_id;
    const stopConfig = configSchema.parse({ accumulate: { batch_end_grace_ms: 0 }, runtime: { poison: { policy: 'stop', attempts: 2, backoff_ms: 0 } } });
    const d = await newDriver(stopConfig);
    const a = await d.startInstance('a', { fused: false, faults: [{ point: 'throw-on-group', stage: 'postprocess', groupId: poisoned }] });
    expect(d.health(a)).toEqual({ status: 200, body: { stages: ['accumulate', 'postprocess', 'batch-metrics', 'pack'], fused: false } });
    d.produce('rowCompleted', records);
    await d.waitFor(() => d.health(a).status === 503, 'a 503 from /healthz');
    const body = d.health(a).body as { unhealthy: Array<{ runner: string; state: string; reason: string; partitions: number[] }> };
    expect(body.unhealthy).toHaveLength(1);
    expect(body.unhealthy[0]).toMatchObject({ runner: 'postprocess', state: 'stopped_by_policy' });
    expect(body.unhealthy[0]!.reason).toContain(poisoned);
    // Nothing was committed past the poison record on its partition.
    const [stopped] = body.unhealthy[0]!.partitions;
    const committed = d.cluster.group('ttd.rollout-stream.postprocess').committed.get(`${d.topics.groupComplete}/${stopped}`);
    const poisonRecord = d.committedRecords('groupComplete').find((r) => r.key!.toString() === poisoned)!;
    expect(poisonRecord.partition).toBe(stopped);
    expect(committed === undefined || BigInt(committed) <= BigInt(poisonRecord.offset)).toBe(true);
  });
});

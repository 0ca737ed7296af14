/**
 * Writes into the middle of the pipeline on a real broker: groups
 * dead-lettered at pack (or postprocess) because `kafka.max_message_bytes`
 * was set too low for their output (with `kafka.chunk_records: false`), the limit raised and the pipeline
 * restarted, then `dlq redrive` run twice and `replay --to-topic` of
 * penalized into itself twice while the pipeline runs: every group is packed
 * exactly once, byte-equal to the offline runner, in fused and in separate
 * mode.
 */
import { describe, expect, test } from 'vitest';
import { parseDlqArgs, runDlq } from '../../cli/dlq.js';
import { captureIo } from '../../cli/io.js';
import { parseReplayArgs, runReplay } from '../../cli/replay.js';
import type { Config } from '../../config/schema.js';
import { generateEvents } from '../../loadgen/index.js';
import { HEADER_BYTES } from '../../streams/codecs/wire-format.js';
import { startPipeline, type RunningPipeline } from '../../streams/runtime/pipeline.js';
import { offlinePacked } from '../unit/streams/driver-fixtures.js';
import { opsEnv, quietLog, type OpsEnv } from './ops-fixture.js';
import { readTopic } from './topic-reader.js';

/** Packed values of these groups are 7.5-10 kB, penalized ones 2.4 kB, group-complete (by reference) 110 B. */
const PACK_TIGHT = 9_096;
const POSTPROCESS_TIGHT = 5_096;
const GROUPS = 4;

const eventsOf = (runId: string) => [...generateEvents({ batches: 1, groupsPerBatch: GROUPS, generations: 8, seed: 3, profile: 'small', runId })];
const ALL = ['accumulate', 'postprocess', 'pack'] as const;

async function dlq(env: OpsEnv, argv: string[]) {
  const io = captureIo();
  const result = await runDlq(parseDlqArgs(argv), env.config, io);
  return { ...result, stdout: io.stdout() };
}

async function eventCount(p: RunningPipeline, stage: string, event: string): Promise<number> {
  const m = await p.metrics.events.get();
  return m.values.filter((v) => v.labels.stage === stage && v.labels.event === event).reduce((n, v) => n + v.value, 0);
}

async function until(what: string, cond: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Each group exactly once on packed (read_committed), byte-equal to `offline all`. */
async function expectPackedOnce(env: OpsEnv, want: Map<string, Buffer>): Promise<void> {
  const packed = await readTopic(env.kafka, env.names.packed, (rs) => rs.length >= want.size, { settleMs: 2_000 });
  expect(packed.map((r) => r.key).sort()).toEqual([...want.keys()].sort());
  for (const r of packed) expect(r.value.subarray(HEADER_BYTES).equals(want.get(r.key)!), `packed bytes of ${r.key}`).toBe(true);
}

/** Runs the pipeline with `tight` as its size limit until `GROUPS` dead letters are written, then again with the topics' own limit. */
async function deadLetterThenRaise(env: OpsEnv, fused: boolean, tight: number, runId: string): Promise<RunningPipeline> {
  const start = (config: Config) => startPipeline({ config, configDir: process.cwd(), stages: [...ALL], log: quietLog, fused, metricsPort: 0 });
  // Chunking off: with it on, an output above the limit is written as a chunk set instead of a dead letter.
  const first = await start({ ...env.config, kafka: { ...env.config.kafka, max_message_bytes: tight, chunk_records: false } });
  try {
    await env.produce(eventsOf(runId));
    await env.settle(0, GROUPS);
  } finally {
    await first.stop();
  }
  return start(env.config);
}

describe('redrive and replay into intermediate topics', () => {
  test.each([
    ['fused', true],
    ['separate', false],
  ] as const)('%s: groups dead-lettered at pack, redriven twice and replayed into penalized twice, are each packed once', async (mode, fused) => {
    const env = await opsEnv(`redrive-${mode}`, false);
    let second: RunningPipeline | null = null;
    try {
      const want = await offlinePacked(eventsOf(mode), env.config);
      second = await deadLetterThenRaise(env, fused, PACK_TIGHT, mode);
      const { dead } = await env.settle(0, GROUPS);
      for (const d of dead) {
        expect(d.record).toMatchObject({ reason: 'record_too_large', stage: 'pack' });
        // Its own group's penalized record, value included (it fits).
        expect(d.record.records.map((s) => [s.key?.toString(), s.value === null])).toEqual([[d.record.group_id, false]]);
      }
      const r1 = await dlq(env, ['redrive', '--stage', 'pack', '--all']);
      expect(r1.code, r1.stdout).toBe(0);
      expect(r1.redrive!.republished).toHaveLength(GROUPS);
      await expectPackedOnce(env, want);
      const r2 = await dlq(env, ['redrive', '--stage', 'pack', '--all']);
      expect(r2.code, r2.stdout).toBe(0);
      const p = second;
      await until('the second redrive recognised as packed', async () => (await eventCount(p, 'pack', 'already_packed')) >= GROUPS);
      // Penalized now holds each group three times (postprocess's write, or the fused hand-off, and two redrives); replay it into itself twice.
      let replayed = 0;
      for (let i = 0; i < 2; i++) {
        const io = captureIo();
        const s = await runReplay(parseReplayArgs(['--topic', 'rollout.penalized', '--to-topic', env.names.penalized, '--quiet']), env.config, process.cwd(), io);
        expect(s.complete).toBe(true);
        replayed += s.matched;
      }
      expect(replayed).toBe(GROUPS * 3 + GROUPS * 6);
      await until('the replayed records recognised as packed', async () => (await eventCount(p, 'pack', 'already_packed')) >= GROUPS + replayed);
      await expectPackedOnce(env, want);
      expect(await eventCount(p, 'pack', 'already_packed')).toBe(GROUPS + replayed);
    } finally {
      await second?.stop();
      await env.close();
    }
  });

  test('fused: groups dead-lettered at postprocess, redriven into group-complete twice, are each packed once', async () => {
    const env = await opsEnv('redrive-postprocess', false);
    let second: RunningPipeline | null = null;
    try {
      const want = await offlinePacked(eventsOf('pp'), env.config);
      second = await deadLetterThenRaise(env, true, POSTPROCESS_TIGHT, 'pp');
      // The batch's progress and metrics records are over this limit too (dead letters without sources); only the groups' count here.
      const ofGroups = (rs: Awaited<ReturnType<OpsEnv['settle']>>['dead']) => rs.filter((d) => d.record.records[0]?.topic === env.names.groupComplete);
      let dead = ofGroups((await env.settle(0, GROUPS)).dead);
      await until('a dead letter per group', async () => (dead = ofGroups((await env.settle(0, GROUPS)).dead)).length >= GROUPS);
      for (const d of dead) expect(d.record).toMatchObject({ reason: 'record_too_large', stage: 'postprocess', records: [{ key: Buffer.from(d.record.group_id!) }] });
      const offsets = dead.map((d) => `${d.partition}:${d.offset}`).join(',');
      for (let i = 0; i < 2; i++) {
        const r = await dlq(env, ['redrive', '--offsets', offsets]);
        expect(r.code, r.stdout).toBe(0);
        expect(r.redrive!.republished).toHaveLength(GROUPS);
      }
      const p = second;
      await until('both redrives processed', async () => (await eventCount(p, 'postprocess', 'foreign_records')) >= 2 * GROUPS && (await eventCount(p, 'pack', 'already_packed')) >= GROUPS);
      await expectPackedOnce(env, want);
    } finally {
      await second?.stop();
      await env.close();
    }
  });
});

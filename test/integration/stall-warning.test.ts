/**
 * A stage that cannot commit (here: its output topic is gone) says so in its
 * log and on /healthz (503 `stalled`) instead of sitting silent, keeps
 * retrying, and delivers exactly once when the topic is back (200 again).
 */
import { afterEach, describe, expect, test } from 'vitest';
import { generateEvents } from '../../loadgen/index.js';
import { topicNames, topicSpecs } from '../../streams/topics/names.js';
import { createMissingTopics } from '../../streams/topics/create.js';
import { assertExactlyOnce, expectedRun } from './exactly-once-expectations.js';
import { connectRowProducer, testEnv, type TestEnv } from './helpers.js';
import { kill, sleep, startStage, waitForLog, writeTestConfig, type StageProcess } from './stage-processes.js';

let proc: StageProcess | undefined;
let env: TestEnv | undefined;

afterEach(async (ctx) => {
  if (ctx.task.result?.state === 'fail' && proc) console.error(`--- ${proc.name} (last lines) ---\n${proc.log.slice(-60).join('\n')}`);
  if (proc) await kill(proc);
  proc = undefined;
  await env?.close();
});

const PORT = 19472;

async function healthz(): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${PORT}/healthz`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('stalled stages', () => {
  test('a stage whose output topic is missing logs that it is behind and committing nothing, then recovers exactly once when the topic is back', async () => {
    env = await testEnv('stall');
    const names = topicNames(env.prefix);
    const all = [...generateEvents({ batches: 1, groupsPerBatch: 6, generations: 4, seed: 9, profile: 'small', runId: `${env.prefix}run` })];
    const want = await expectedRun(env.config, all);
    proc = startStage('all', 'accumulate,postprocess,pack', writeTestConfig(env.prefix, { runtime: { session_timeout_ms: 6000, metrics_port: PORT, stall_warn_ms: 2000 } }));
    expect(await waitForLog(proc, /accumulate\+postprocess\+pack: restored partitions/, 60_000)).toBeDefined();
    await env.admin.deleteTopics({ topics: [names.packed] });
    const producer = await connectRowProducer(env);
    await producer.send(all);
    await producer.disconnect();

    const warning = await waitForLog(proc, /accumulate\+postprocess\+pack: \d+ input records behind and nothing committed for \d+ s \(assigned partitions \[[\d,]+\], tasks \[/, 45_000);
    expect(warning, 'the stall is reported').toBeDefined();
    expect(proc.child.exitCode).toBeNull();
    const stalled = await healthz();
    expect(stalled.status, '/healthz while stalled').toBe(503);
    expect(stalled.body.unhealthy).toEqual([
      expect.objectContaining({ runner: 'accumulate+postprocess+pack', state: 'stalled', reason: expect.stringMatching(/input records behind and nothing committed for \d+ s/) }),
    ]);

    const spec = topicSpecs(env.config).find((s) => s.topic === names.packed)!;
    await createMissingTopics(env.opsAdmin, [spec], env.config.topics);
    await assertExactlyOnce(env.kafka, env.registry, env.prefix, want, 120_000);
    // Caught up and idle (inputs ending in commit markers): no more warnings, from any runner.
    const stalls = () => proc!.log.filter((l) => /nothing committed for/.test(l)).length;
    await sleep(3000);
    const before = stalls();
    await sleep(12_000);
    expect(stalls(), 'an idle stage is not reported as stalled').toBe(before);
    expect(await healthz(), '/healthz once caught up').toEqual({ status: 200, body: { stages: ['accumulate', 'postprocess', 'pack', 'batch-metrics'], fused: true } });
  }, 240_000);
});

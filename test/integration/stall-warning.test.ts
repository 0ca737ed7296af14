/**
 * A stage that cannot commit (here: its output topic is gone) says so in its
 * log instead of sitting silent, keeps retrying, and delivers exactly once
 * when the topic is back.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { generateEvents } from '../../loadgen/index.js';
import { topicNames, topicSpecs } from '../../streams/topics/names.js';
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

describe('stalled stages', () => {
  test('a stage whose output topic is missing logs that it is behind and committing nothing, then recovers exactly once when the topic is back', async () => {
    env = await testEnv('stall');
    const names = topicNames(env.prefix);
    const all = [...generateEvents({ batches: 1, groupsPerBatch: 6, generations: 4, seed: 9, profile: 'small', runId: `${env.prefix}run` })];
    const want = await expectedRun(env.config, all);
    proc = startStage('all', 'accumulate,postprocess,pack', writeTestConfig(env.prefix, { runtime: { session_timeout_ms: 6000, metrics_port: 0, stall_warn_ms: 2000 } }));
    expect(await waitForLog(proc, /accumulate\+postprocess\+pack: restored partitions/, 60_000)).toBeDefined();
    await env.admin.deleteTopics({ topics: [names.packed] });
    const producer = await connectRowProducer(env);
    await producer.send(all);
    await producer.disconnect();

    const warning = await waitForLog(proc, /accumulate\+postprocess\+pack: \d+ input records behind and nothing committed for \d+ s \(assigned partitions \[[\d,]+\], tasks \[/, 45_000);
    expect(warning, 'the stall is reported').toBeDefined();
    expect(proc.child.exitCode).toBeNull();

    const spec = topicSpecs(env.config).find((s) => s.topic === names.packed)!;
    await env.admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic: spec.topic, numPartitions: spec.numPartitions, replicationFactor: env.config.topics.replication_factor, configEntries: spec.configEntries }],
    });
    await assertExactlyOnce(env.kafka, env.registry, env.prefix, want, 120_000);
    // Caught up and idle (inputs ending in commit markers): no more warnings, from any runner.
    const stalls = () => proc!.log.filter((l) => /nothing committed for/.test(l)).length;
    await sleep(3000);
    const before = stalls();
    await sleep(12_000);
    expect(stalls(), 'an idle stage is not reported as stalled').toBe(before);
  }, 240_000);
});

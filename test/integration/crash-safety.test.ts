import { afterEach, describe, test } from 'vitest';
import { generateEvents, parseFaultSpec } from '../../loadgen/index.js';
import { assertExactlyOnce, expectedRun } from './exactly-once-expectations.js';
import { connectRowProducer, lcg, sendInSlices, testEnv, type TestEnv } from './helpers.js';
import { kill, killAtRandomMoments, startStage, writeTestConfig, type StageProcess } from './stage-processes.js';

let env: TestEnv;
let procs: StageProcess[] = [];

afterEach(async () => {
  await Promise.all(procs.map((p) => kill(p)));
  procs = [];
  await env?.close();
});

describe('crash safety', () => {
  // Separate stage processes: postprocess and pack read the rows of reference records back from row-completed.
  test.each([
    { intermediate: 'reference', batches: 5 },
    { intermediate: 'full', batches: 3 },
  ])('SIGKILLing stage processes at random moments loses and duplicates nothing (intermediate records $intermediate)', async ({ intermediate, batches }) => {
    env = await testEnv(`crash-${intermediate}`, [[['accumulate', 'batch_end_grace_ms'], 300]]);
    const events = [
      ...generateEvents({
        batches,
        groupsPerBatch: 40,
        generations: 4,
        seed: 7,
        profile: 'small',
        runId: `${env.prefix}run`,
        faults: parseFaultSpec('dup=0.02,conflict=0.01,garbage=0.005,missing=0.01'),
      }),
    ];
    const want = await expectedRun(env.config, events);
    const configPath = writeTestConfig(env.prefix, { runtime: { session_timeout_ms: 6000, metrics_port: 0, intermediate_records: intermediate } });
    const stages = ['accumulate', 'postprocess', 'pack'];
    procs = stages.map((s) => startStage(s, s, configPath));

    const sending = sendInSlices(await connectRowProducer(env), events, 12, 1200);

    // Deterministic "random" moments, so a failure can be replayed.
    const rand = lcg(20261129);
    const kills = await killAtRandomMoments(procs, rand, {
      kills: 5,
      wait: [1500, 2500],
      down: [300, 700],
      restart: (victim) => startStage(victim.name, victim.name, configPath),
    });
    await sending;
    console.log(`killed: ${kills.join(', ')}`);
    await assertExactlyOnce(env.kafka, env.registry, env.prefix, want);
  });
});

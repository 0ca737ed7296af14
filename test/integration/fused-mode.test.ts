/**
 * Fused mode (`run --fused`): one transaction per input batch for all three
 * stages. The same exactly-once check as the separate stages' failure tests,
 * under SIGKILLs and a second process, and while switching between the two
 * modes mid-run (which works only because the fused steps commit the
 * downstream groups' offsets in their transaction).
 */
import { afterAll, afterEach, describe, expect, test } from 'vitest';
import { generateEvents, parseFaultSpec, type LoadgenEvent } from '../../loadgen/index.js';
import { assertExactlyOnce, expectedRun } from './exactly-once-expectations.js';
import { connectRowProducer, lcg, sendInSlices, testEnv, type TestEnv } from './helpers.js';
import { kill, killAtRandomMoments, sleep, startStage, waitForLog, writeTestConfig, type StageProcess } from './stage-processes.js';

const ALL = 'accumulate,postprocess,pack';
let procs: StageProcess[] = [];
const envs: TestEnv[] = [];

afterEach(async () => {
  await Promise.all(procs.map((p) => kill(p)));
  procs = [];
});
afterAll(async () => {
  await Promise.all(envs.map((e) => e.close()));
});

async function setup(name: string, batches: number, seed: number) {
  const env = await testEnv(name, [[['accumulate', 'batch_end_grace_ms'], 300]]);
  envs.push(env);
  const events: LoadgenEvent[] = [
    ...generateEvents({
      batches,
      groupsPerBatch: 30,
      generations: 4,
      seed,
      profile: 'small',
      runId: `${env.prefix}run`,
      faults: parseFaultSpec('dup=0.02,conflict=0.01,garbage=0.005,missing=0.01'),
    }),
  ];
  const want = await expectedRun(env.config, events);
  return { env, events, want, producer: await connectRowProducer(env), configPath: writeTestConfig(env.prefix) };
}

/** Resolves with the process's exit code, or null if it is still running after `ms`. */
async function exitWithin(p: StageProcess, ms: number): Promise<number | null> {
  return Promise.race([p.exited, sleep(ms).then(() => null)]);
}

describe('fused mode', () => {
  test('SIGKILLing fused processes at random moments, with a second one joining, loses and duplicates nothing', async () => {
    const { env, events, want, producer, configPath } = await setup('fused-crash', 4, 17);
    procs = [startStage('fused-a', ALL, configPath, ['--fused'])];
    const sending = sendInSlices(producer, events, 10, 1000);
    const rand = lcg(20261201);
    await sleep(1500);
    procs.push(startStage('fused-b', ALL, configPath, ['--fused']));
    const kills = await killAtRandomMoments(procs, rand, {
      kills: 4,
      wait: [1200, 2000],
      down: [200, 600],
      restart: (victim) => startStage(victim.name, ALL, configPath, ['--fused']),
    });
    await sending;
    console.log(`killed: ${kills.join(', ')}`);
    await assertExactlyOnce(env.kafka, env.registry, env.prefix, want);
  });

  test('switching separate → fused → separate mid-run loses and duplicates nothing; each mode refuses to start while the other runs', async () => {
    const { env, events, want, producer, configPath } = await setup('fused-switch', 3, 23);
    const third = Math.ceil(events.length / 3);
    const slices = [events.slice(0, third), events.slice(third, 2 * third), events.slice(2 * third)];

    // 1. Separate stages, one process each.
    procs = ['accumulate', 'postprocess', 'pack'].map((s) => startStage(s, s, configPath));
    await producer.send(slices[0]!.slice(0, slices[0]!.length >> 1));
    await sleep(2500);
    // A fused runner refuses while they run.
    const refused = startStage('fused-early', ALL, configPath, ['--fused']);
    expect(await exitWithin(refused, 60_000)).toBe(1);
    expect(refused.log.join('\n')).toMatch(/fused mode refused: separate stage instances are running/);
    // Stop pack first, so penalized keeps records it has not processed.
    const pack = procs.pop()!;
    await kill(pack, 'SIGTERM');
    await producer.send(slices[0]!.slice(slices[0]!.length >> 1));
    await sleep(3000);
    await Promise.all(procs.map((p) => kill(p, 'SIGTERM')));

    // 2. Fused: it drains what the separate stages left, then takes over.
    procs = [startStage('fused', ALL, configPath, ['--fused'])];
    expect(await waitForLog(procs[0]!, /draining them with postprocess and pack first/, 60_000), procs[0]!.log.join('\n')).toBeDefined();
    expect(await waitForLog(procs[0]!, /starting fused/, 90_000), procs[0]!.log.join('\n')).toBeDefined();
    await producer.send(slices[1]!);
    await sleep(2000);
    // A separate stage refuses while the fused runner runs.
    const refusedPack = startStage('pack-early', 'pack', configPath);
    expect(await exitWithin(refusedPack, 60_000)).toBe(1);
    expect(refusedPack.log.join('\n')).toMatch(/a fused runner is processing prefix/);
    await sleep(1500);
    await kill(procs[0]!, 'SIGTERM');

    // 3. Separate again: they start exactly after what the fused steps processed.
    procs = [startStage('all', ALL, configPath, ['--separate'])];
    await producer.send(slices[2]!);
    await producer.disconnect();
    await assertExactlyOnce(env.kafka, env.registry, env.prefix, want);
  });
});

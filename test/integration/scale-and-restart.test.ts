import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, test } from 'vitest';
import { generateEvents, type LoadgenEvent } from '../../loadgen/index.js';
import { topicNames } from '../../streams/topics/names.js';
import { assertExactlyOnce, expectedRun } from './exactly-once-expectations.js';
import { connectRowProducer, sendInSlices, testEnv, type TestEnv } from './helpers.js';
import { distinctTail, kill, sleep, startStage, writeTestConfig, type StageProcess } from './stage-processes.js';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
let procs: StageProcess[] = [];
let env: TestEnv | undefined;

afterEach(async (ctx) => {
  if (ctx.task.result?.state === 'fail') {
    for (const p of procs) console.error(`--- ${p.name} (last distinct lines) ---\n${distinctTail(p.log, 80).join('\n')}`);
    // Written but unreadable (an open transaction holding the stable offset)
    // or never written? Consumed or not? High watermarks, committed offsets
    // and the stage groups' states tell.
    if (env) {
      const names = topicNames(env.prefix);
      for (const t of [names.rowCompleted, names.groupComplete, names.penalized, names.packed]) {
        const offsets = await env.admin.fetchTopicOffsets(t).catch(() => []);
        console.error(`${t}: high watermarks ${offsets.map((o) => o.high).join(',')}`);
      }
      const stageInputs: Array<[string, string]> = [
        ['accumulate', names.rowCompleted],
        ['postprocess', names.groupComplete],
        ['pack', names.penalized],
        ['batch-metrics', names.metrics],
      ];
      for (const [stage, topic] of stageInputs) {
        const groupId = `${env.prefix}rollout-stream.${stage}`;
        const committed = await env.admin.fetchOffsets({ groupId, topics: [topic] }).catch(() => []);
        const { groups } = await env.admin.describeGroups([groupId]).catch(() => ({ groups: [] as Array<{ state: string; members: unknown[] }> }));
        const offsets = committed.flatMap((t) => t.partitions.map((p) => p.offset)).join(',');
        console.error(`${groupId}: ${groups[0]?.state ?? '?'} with ${groups[0]?.members.length ?? '?'} member(s); committed ${offsets}`);
      }
    }
  }
  await Promise.all(procs.map((p) => kill(p)));
  procs = [];
  await env?.close();
});


function events(prefix: string, seed: number, batches: number): LoadgenEvent[] {
  return [...generateEvents({ batches, groupsPerBatch: 30, generations: 4, seed, profile: 'small', runId: `${prefix}run` })];
}

/** Sends events in slices with pauses, so the run spans the disturbance. */
async function produceSlowly(e: TestEnv, all: LoadgenEvent[], slices: number, pauseMs: number): Promise<void> {
  await sendInSlices(await connectRowProducer(e), all, slices, pauseMs);
}

describe('scaling and broker restarts', () => {
  // Processes running all three stages run them fused (runtime.fused: auto).
  test.each(['reference', 'full'])('a second instance of every stage joins mid-run and one leaves, without loss or duplicates (intermediate records %s)', async (intermediate) => {
    env = await testEnv(`scale-${intermediate}`);
    const all = events(env.prefix, 3, 4);
    const want = await expectedRun(env.config, all);
    const configPath = writeTestConfig(env.prefix, { runtime: { session_timeout_ms: 6000, metrics_port: 0, intermediate_records: intermediate } });
    procs.push(startStage('all-1', 'accumulate,postprocess,pack', configPath));
    const sending = produceSlowly(env, all, 10, 1000);
    await sleep(3000);
    procs.push(startStage('all-2', 'accumulate,postprocess,pack', configPath)); // scale out
    await sleep(5000);
    await kill(procs[0]!, 'SIGTERM'); // scale in, gracefully
    await sending;
    await assertExactlyOnce(env.kafka, env.registry, env.prefix, want);
  });

  // The restart comes about 3 s after the process starts, often while its
  // runners are still joining their groups one after the other. That used
  // to fail about 1 run in 4 in the full suite (pack never consumed: its
  // start-up failed on the restarting broker while the other stages kept the
  // process alive). Start-up now retries transient errors with a fresh
  // consumer, and a runner that cannot start stops the whole process
  // (stage-runner.ts `start`, pipeline.ts). A failure dumps each process's
  // distinct log lines, high watermarks, committed offsets and group states.
  // One retry stays as a guard until CI runs confirm the fix (the JSON report
  // under .local/test-results shows whether a first attempt failed).
  test.each([
    { mode: 'fused', args: [] as string[], intermediate: 'reference' },
    { mode: 'separate', args: ['--separate'], intermediate: 'reference' },
    { mode: 'separate', args: ['--separate'], intermediate: 'full' },
  ])('the stages ($mode, intermediate records $intermediate) recover by themselves when the broker restarts mid-run', { retry: 1, timeout: 300_000 }, async ({ args, intermediate }) => {
    env = await testEnv('broker-restart');
    const all = events(env.prefix, 5, 3);
    const want = await expectedRun(env.config, all);
    const configPath = writeTestConfig(env.prefix, { runtime: { session_timeout_ms: 6000, metrics_port: 0, intermediate_records: intermediate } });
    procs.push(startStage('all', 'accumulate,postprocess,pack', configPath, args));
    await produceSlowly(env, all.slice(0, Math.floor(all.length / 2)), 3, 800);
    if (process.env.KAFKA_BROKERS && process.env.RS_LOCAL_BROKER !== '1') {
      throw new Error('this test restarts the local broker (scripts/local-kafka.sh); run it through ./rollout-stream test');
    }
    await run(join(ROOT, 'scripts', 'local-kafka.sh'), ['restart-broker'], { timeout: 120_000 });
    await produceSlowly(env, all.slice(Math.floor(all.length / 2)), 3, 800);
    await assertExactlyOnce(env.kafka, env.registry, env.prefix, want, 150_000);
  }); // timeout: a restart under load: stop ≤ 30 s, start ~15 s, coordinators reload, consumers rejoin
});

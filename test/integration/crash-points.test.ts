/**
 * Crash points (streams/runtime/crash-points.ts): a real stage process is
 * SIGKILLed at each named delicate moment in turn — inside a transaction
 * after its first send, after a fused downstream node ran, after the offsets
 * were sent, after the commit before the batch was released, after fencing,
 * during and after a restore — and restarted with the next point armed.
 * Every point must be reached (the process dies by SIGKILL there), and at
 * the end every group is in rollout.packed exactly once, byte-equal to the
 * offline runner. Beside the random-moment kills of crash-safety.test.ts.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { generateEvents, parseFaultSpec } from '../../loadgen/index.js';
import type { CrashPoint } from '../../streams/runtime/crash-points.js';
import { assertExactlyOnce, expectedRun } from './exactly-once-expectations.js';
import { connectRowProducer, sendInSlices, testEnv, type TestEnv } from './helpers.js';
import { kill, startStage, writeTestConfig, type StageProcess } from './stage-processes.js';

let env: TestEnv | undefined;
let procs: StageProcess[] = [];
afterEach(async () => {
  await Promise.all(procs.map((p) => kill(p)));
  procs = [];
  await env?.close();
  env = undefined;
});

/** Restores come after the transaction points, so the changelog then has records to restore. */
const TX_POINTS: CrashPoint[] = ['tx.after-send', 'tx.after-offsets', 'tx.after-commit'];
const START_POINTS: CrashPoint[] = ['fence.after', 'restore.during', 'restore.after'];

/** Waits until `p` is killed at its crash point (or fails naming the point). */
async function diesAt(p: StageProcess, point: string, ms = 90_000): Promise<void> {
  const code = await Promise.race([p.exited, new Promise<'alive'>((r) => setTimeout(() => r('alive'), ms))]);
  expect(code === 'alive' ? `still running after ${ms} ms` : `${code}/${p.child.signalCode}`, `${point} was reached; last lines:\n${p.log.slice(-15).join('\n')}`).toBe('null/SIGKILL');
  expect(p.log.some((l) => l.includes(`crash point ${point} reached`))).toBe(true);
}

describe.each([
  { mode: 'fused', points: [...TX_POINTS, 'tx.after-downstream', ...START_POINTS] as CrashPoint[] },
  { mode: 'separate', points: [...TX_POINTS, ...START_POINTS] },
])('crash points, $mode', ({ mode, points }) => {
  test(`a stage SIGKILLed at each of ${points.length} crash points in turn loses and duplicates nothing`, async () => {
    env = await testEnv(`crashpt-${mode}`, [[['accumulate', 'batch_end_grace_ms'], 300]]);
    const events = [
      ...generateEvents({ batches: 3, groupsPerBatch: 12, generations: 4, seed: 41, profile: 'small', runId: `${env.prefix}run`, faults: parseFaultSpec('dup=0.02,missing=0.01') }),
    ];
    const want = await expectedRun(env.config, events);
    const configPath = writeTestConfig(env.prefix);
    // Rows keep coming while the stage dies and comes back.
    const sending = sendInSlices(await connectRowProducer(env), events, 10, 1500);
    const victim = (extra: string[]) =>
      mode === 'fused' ? startStage('all', 'accumulate,postprocess,pack', configPath, extra) : startStage('accumulate', 'accumulate', configPath, extra);
    if (mode === 'separate') procs.push(startStage('postprocess', 'postprocess', configPath), startStage('pack', 'pack', configPath));
    for (const point of points) {
      const p = victim(['--crash-at', point]);
      procs.push(p);
      await diesAt(p, point);
    }
    await sending;
    procs.push(victim([]));
    await assertExactlyOnce(env.kafka, env.registry, env.prefix, want);
  }, 600_000);
});

/**
 * A fenced task rejoins its group instead of fencing the partition's new
 * owner back (issue 25 item 3.2), on the real broker: stage process a is
 * paused (SIGSTOP) past its session timeout while rows keep coming; b joins,
 * is given every partition once a's session expired, and fences a's
 * producers. a wakes up (SIGCONT) still holding its old assignment and
 * fetches; its next transaction is fenced. Now a gives the partition up
 * and rejoins with a new member (ConsumerLoop.rejoin over kafkajs); b is
 * never fenced on a partition it owns, and every group is packed exactly
 * once.
 *
 * It guards the rejoin path on a real broker; it did not fail before the
 * fix (three runs): kafkajs's own heartbeat, due the moment a wakes, has
 * the group rebalanced within ~100 ms, usually before a's fenced
 * transaction surfaces, so a's old 100 ms re-initialization then came after
 * its new assignment. The topology driver's zombie, which never hears of
 * the rebalance, shows the fencing back deterministically
 * (test/unit/streams/fenced-task-rejoins.test.ts).
 */
import { afterEach, expect, test } from 'vitest';
import { generateEvents } from '../../loadgen/index.js';
import { assertExactlyOnce, expectedRun } from './exactly-once-expectations.js';
import { connectRowProducer, sendInSlices, testEnv, type TestEnv } from './helpers.js';
import { distinctTail, kill, sleep, startStage, waitForLog, writeTestConfig, type StageProcess } from './stage-processes.js';

let procs: StageProcess[] = [];
let env: TestEnv | undefined;

afterEach(async (ctx) => {
  if (ctx.task.result?.state === 'fail') for (const p of procs) console.error(`--- ${p.name} (last distinct lines) ---\n${distinctTail(p.log, 60).join('\n')}`);
  for (const p of procs) p.child.kill('SIGCONT');
  await Promise.all(procs.map((p) => kill(p)));
  procs = [];
  await env?.close();
});

test('a stage process fenced after a pause past its session timeout rejoins; the new owner is never fenced back, nothing is lost or duplicated', async () => {
  env = await testEnv('fenced-rejoin');
  const all = [...generateEvents({ batches: 6, groupsPerBatch: 20, generations: 4, seed: 35, profile: 'small', runId: `${env.prefix}run` })];
  const want = await expectedRun(env.config, all);
  const configPath = writeTestConfig(env.prefix, { runtime: { session_timeout_ms: 6000, metrics_port: 0 } });
  const a = startStage('a', 'accumulate,postprocess,pack', configPath);
  procs.push(a);
  expect(await waitForLog(a, /running accumulate, postprocess, pack fused/, 60_000)).toBeDefined();
  // Rows keep coming, a slice every 300 ms, until well after a wakes: b has transactions on every partition in any window.
  const sending = sendInSlices(await connectRowProducer(env), all, 70, 300);
  await sleep(3000);

  a.child.kill('SIGSTOP');
  const b = startStage('b', 'accumulate,postprocess,pack', configPath);
  procs.push(b);
  // b joins; the group waits for a until its session expires, then gives b every partition and b fences a's producers.
  expect(await waitForLog(b, /restored partitions \[0,1,2,3\]/, 60_000), "b restored every partition").toBeDefined();
  await sleep(2000);
  a.child.kill('SIGCONT');

  await sending;
  await assertExactlyOnce(env.kafka, env.registry, env.prefix, want);
  expect(a.log.filter((l) => /fenced by a newer owner/.test(l)).length, 'a was fenced when it woke up').toBeGreaterThan(0);
  expect(b.log.filter((l) => /fenced by a newer owner/.test(l)), 'b, the new owner, was fenced back').toEqual([]);
  expect(a.child.exitCode).toBeNull();
  expect(b.child.exitCode).toBeNull();
}, 240_000);

/**
 * SPEC §8.1: on three brokers (replication 3, min.insync.replicas 2), losing
 * a broker by SIGKILL stops no stage for longer than the leader elections
 * take, and every group still reaches rollout.packed exactly once, equal to
 * the offline runner; also when a stage process is SIGKILLed while the
 * broker is away, and when the broker killed leads the controller quorum.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { generateEvents, parseFaultSpec, type LoadgenEvent } from '../../loadgen/index.js';
import { topicNames } from '../../streams/topics/names.js';
import { assertExactlyOnce, expectedRun } from '../integration/exactly-once-expectations.js';
import { connectRowProducer, sendInSlices, testEnv, type TestEnv } from '../integration/helpers.js';
import { kill, sleep, startStage, waitForLog, writeTestConfig, type StageProcess } from '../integration/stage-processes.js';
import { controllerLeader, deleteTopicsWithPrefix, killBroker, leadersOf, reportRun, startBroker, waitInSync } from './cluster.js';
import { PackedWatch } from './packed-watch.js';

const OUTAGE_MS = 30_000;
let procs: StageProcess[] = [];
let env: TestEnv | undefined;
let watch: PackedWatch | undefined;
let down: number | null = null;

afterEach(async (ctx) => {
  await reportRun(`loss-${Date.now()}`, ctx.task.result?.state === 'fail', procs, env);
  await Promise.all(procs.map((p) => kill(p)));
  procs = [];
  if (down !== null) await startBroker(down).catch(() => undefined); // never leave the cluster short for the next test
  down = null;
  await watch?.stop().catch(() => undefined);
  // A failed test's topics stay for inspection (kafka-dump-log on the nodes' data); the rest go.
  if (env && ctx.task.result?.state !== 'fail') await deleteTopicsWithPrefix(env.admin, env.prefix).catch(() => undefined);
  await env?.close();
  env = undefined;
});

function events(prefix: string, seed: number): LoadgenEvent[] {
  return [
    ...generateEvents({
      batches: 6,
      groupsPerBatch: 24,
      generations: 4,
      seed,
      profile: 'small',
      runId: `${prefix}run`,
      faults: parseFaultSpec('dup=0.02,garbage=0.005'),
    }),
  ];
}

type Victim = 'row-leader' | 'controller';

/**
 * Rows flow for ~60 s; 12 s in, SIGKILL `victim` and keep it down 30 s
 * (with `killStage`, SIGKILL the accumulate process 8 s into the outage and
 * restart it 2 s later, while the broker is still away); then start it again.
 */
async function brokerLoss(victim: Victim, killStage: boolean, seed: number): Promise<void> {
  env = await testEnv(`cl-loss-${victim}${killStage ? '-stage' : ''}`);
  const names = topicNames(env.prefix);
  const all = events(env.prefix, seed);
  const want = await expectedRun(env.config, all);
  const configPath = writeTestConfig(env.prefix);
  // Separate stage processes when one of them is to be killed; else one process with all three (fused).
  const stages = killStage ? ['accumulate', 'postprocess', 'pack'] : ['accumulate,postprocess,pack'];
  procs = stages.map((s) => startStage(s, s, configPath));
  // Started: restored its changelog (pack keeps no state: said it runs).
  for (const p of procs) expect(await waitForLog(p, p.name === 'pack' ? /info running pack/ : /restored partitions/, 90_000), `${p.name} started`).toBeDefined();
  watch = new PackedWatch(env.kafka, names.packed);
  await watch.start();

  const sending = sendInSlices(await connectRowProducer(env), all, 30, 1600);
  await sleep(12_000);
  const id = victim === 'controller' ? await controllerLeader() : (await leadersOf(env.admin, names.rowCompleted))[0]![0];
  const before = watch.arrivals.length;
  await killBroker(id);
  down = id;
  const killedAt = Date.now();
  console.log(`killed node ${id} (${victim}); ${before} packed records before`);
  if (killStage) {
    await sleep(8_000);
    const victimStage = procs[0]!; // accumulate: the stage with the most state to restore
    await kill(victimStage, 'SIGKILL');
    await sleep(2_000);
    procs[0] = startStage(victimStage.name, victimStage.name, configPath);
  }
  await sleep(killedAt + OUTAGE_MS - Date.now());
  const restartAt = Date.now();
  // Progress during the outage: groups packed in its second half, after the leader elections.
  const during = watch.groupsBetween(killedAt + OUTAGE_MS / 2, restartAt);
  const gap = watch.longestGap(killedAt, restartAt);
  console.log(`while node ${id} was down: ${watch.groupsBetween(killedAt, restartAt)} groups packed, ${during} in the second half; longest gap ${gap} ms`);
  await startBroker(id);
  down = null;
  expect(during, 'packed groups arrive while the broker is down').toBeGreaterThan(0);

  await sending;
  await assertExactlyOnce(env.kafka, env.registry, env.prefix, want, 120_000);
  await waitInSync(env.admin, [names.rowCompleted, names.packed]);
}

describe('broker loss on a three-broker cluster', () => {
  test('SIGKILL of the broker leading most row-completed partitions for 30 s under load: packed keeps arriving, then every group exactly once', async () => {
    await brokerLoss('row-leader', false, 11);
  });

  // Failed about one run in three until kafkajs's send retry waited for every
  // request of the failed attempt (streams/kafka/kafkajs/send-retry.ts): a
  // restarted stage wrote the same groups twice into one committed transaction.
  test('the same with a stage process SIGKILLed and restarted while the broker is down', async () => {
    await brokerLoss('row-leader', true, 12);
  });

  test('SIGKILL of the controller quorum leader for 30 s under load: packed keeps arriving, then every group exactly once', async () => {
    await brokerLoss('controller', false, 13);
  });
});

/**
 * The per-record error policy (runtime.poison) in real stage processes: a
 * processor that throws on one record (a fault armed with the test-only
 * `run --fault`) no longer loops abort → rebuild → refetch forever.
 * `dead-letter`: after 3 attempts the record is a `processing_error` dead
 * letter with its bytes and the partition goes on (every other group packed
 * exactly once); `stop`: the partition stops and /healthz answers 503
 * `stopped_by_policy`. A restore that throws is bounded the same way, then
 * fatal: the process exits 1.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { generateEvents } from '../../loadgen/index.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { assertExactlyOnce, expectedRun } from './exactly-once-expectations.js';
import { connectRowProducer, testEnv, type TestEnv } from './helpers.js';
import { kill, sleep, startStage, waitForLog, writeTestConfig, type StageProcess } from './stage-processes.js';
import { readTopic } from './topic-reader.js';

let proc: StageProcess | undefined;
let env: TestEnv | undefined;

afterEach(async (ctx) => {
  if (ctx.task.result?.state === 'fail' && proc) console.error(`--- ${proc.name} (last lines) ---\n${proc.log.slice(-60).join('\n')}`);
  if (proc) await kill(proc);
  proc = undefined;
  await env?.close();
});

async function healthz(port: number): Promise<{ status: number; body: Record<string, unknown> } | null> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  } catch {
    return null; // not listening yet
  }
}

describe('a record a stage keeps throwing on', () => {
  test('is dead-lettered as processing_error after 3 attempts (fused, downstream stage), and every other group is packed exactly once', async () => {
    env = await testEnv('poison-dl');
    const names = topicNames(env.prefix);
    const all = [...generateEvents({ batches: 1, groupsPerBatch: 6, generations: 4, seed: 21, profile: 'small', runId: `${env.prefix}run` })];
    const want = await expectedRun(env.config, all);
    const bad = [...want.packed.keys()].sort()[0]!;
    want.packed.delete(bad);
    want.deadLetters = [...want.deadLetters, `processing_error:${bad}`].sort();
    const config = writeTestConfig(env.prefix, { runtime: { session_timeout_ms: 6000, metrics_port: 0, poison: { policy: 'dead-letter', attempts: 3, backoff_ms: 200 } } });
    proc = startStage('all', 'accumulate,postprocess,pack', config, ['--fault', `postprocess.throw-on-group:${bad}`]);
    expect(await waitForLog(proc, /running accumulate, postprocess, pack fused/, 60_000)).toBeDefined();
    const producer = await connectRowProducer(env);
    await producer.send(all);
    await producer.disconnect();

    await assertExactlyOnce(env.kafka, env.registry, env.prefix, want, 120_000);
    const dl = new TopicCodec('deadLetter', subjectOf(names.deadLetter), env.registry);
    const letters = await Promise.all((await readTopic(env.kafka, names.deadLetter, (rs) => rs.length >= want.deadLetters.length)).map((r) => dl.decode(r.value)));
    const letter = letters.find((d) => d.reason === 'processing_error')!;
    expect(letter).toMatchObject({ stage: 'postprocess', group_id: bad });
    expect(letter.message).toMatch(/^postprocess failed 3 time\(s\) on \S+rollout\.group-complete partition \d+ offset \d+: Error: injected fault postprocess\.throw-on-group: group \S+ \(offset \d+\) \(at .+\)$/);
    // The input record with its bytes: the group as accumulate wrote it.
    const groupCodec = new TopicCodec('groupComplete', subjectOf(names.groupComplete), env.registry);
    expect(letter.records).toHaveLength(1);
    expect((await groupCodec.decode(letter.records[0]!.value!)).group_id).toBe(bad);
    // Three counted attempts on the record, then the dead letter; the process goes on.
    const attempts = proc.log.filter((l) => l.includes(`(key ${bad}) (attempt`)).map((l) => /\(attempt (\d+) of 3\)/.exec(l)?.[1]);
    expect(attempts).toEqual(['1', '2', '3']);
    expect(proc.child.exitCode).toBeNull();
  }, 240_000);

  test('with runtime.poison.policy stop, stops its partition and /healthz answers 503 stopped_by_policy (separate stages)', async () => {
    env = await testEnv('poison-stop');
    const names = topicNames(env.prefix);
    const PORT = 19471;
    const all = [...generateEvents({ batches: 1, groupsPerBatch: 6, generations: 4, seed: 22, profile: 'small', runId: `${env.prefix}run` })];
    const want = await expectedRun(env.config, all);
    const bad = [...want.packed.keys()].sort()[0]!;
    const config = writeTestConfig(env.prefix, { runtime: { session_timeout_ms: 6000, metrics_port: PORT, poison: { policy: 'stop', attempts: 2, backoff_ms: 200 } } });
    proc = startStage('separate', 'accumulate,postprocess,pack', config, ['--separate', '--fault', `postprocess.throw-on-group:${bad}`]);
    expect(await waitForLog(proc, /running accumulate, postprocess, pack on /, 60_000)).toBeDefined();
    expect((await healthz(PORT))?.status, 'healthy before the bad record').toBe(200);
    const producer = await connectRowProducer(env);
    await producer.send(all);
    await producer.disconnect();

    let h = await healthz(PORT);
    for (const until = Date.now() + 90_000; h?.status !== 503 && Date.now() < until; h = await healthz(PORT)) await sleep(500);
    expect(h?.status).toBe(503);
    expect(h!.body).toMatchObject({ fused: false, stages: expect.arrayContaining(['accumulate', 'postprocess', 'pack', 'batch-metrics']) });
    expect(h!.body.unhealthy).toEqual([
      {
        runner: 'postprocess',
        state: 'stopped_by_policy',
        since: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        reason: expect.stringMatching(new RegExp(`^postprocess failed 2 time\\(s\\) on \\S+ partition \\d+ offset \\d+ \\(key ${bad}\\): Error: injected fault`)),
        partitions: [expect.any(Number)],
      },
    ]);
    // Nothing committed past it: no dead letter for it, not packed, and the process keeps running.
    await sleep(2000);
    const dl = new TopicCodec('deadLetter', subjectOf(names.deadLetter), env.registry);
    const dead = await readTopic(env.kafka, names.deadLetter, (rs) => rs.length >= want.deadLetters.length, { timeoutMs: 30_000, settleMs: 1000 });
    expect((await Promise.all(dead.map((r) => dl.decode(r.value)))).filter((d) => d.reason === 'processing_error')).toEqual([]);
    const packed = await readTopic(env.kafka, names.packed, (rs) => rs.length >= 1, { timeoutMs: 60_000, settleMs: 1000 });
    expect(packed.map((r) => r.key)).not.toContain(bad);
    expect((await healthz(PORT))?.status).toBe(503);
    expect(proc.child.exitCode).toBeNull();
  }, 240_000);
});

describe('a restore a stage cannot apply', () => {
  test('is retried runtime.poison.attempts times, then stops the process: exit 1 and one line error [restore_failed]', async () => {
    env = await testEnv('poison-restore');
    const names = topicNames(env.prefix);
    const all = [...generateEvents({ batches: 1, groupsPerBatch: 2, generations: 4, seed: 23, profile: 'small', runId: `${env.prefix}run` })];
    const config = writeTestConfig(env.prefix, { runtime: { session_timeout_ms: 6000, metrics_port: 0, poison: { policy: 'dead-letter', attempts: 2, backoff_ms: 100 } } });
    // A first run leaves state behind: one row of an open group.
    proc = startStage('first', 'accumulate,postprocess,pack', config);
    expect(await waitForLog(proc, /running accumulate, postprocess, pack fused/, 60_000)).toBeDefined();
    const producer = await connectRowProducer(env);
    await producer.send([all.find((e) => e.kind === 'row')!]);
    await producer.disconnect();
    await readTopic(env.kafka, names.accumulateChangelog, (rs) => rs.length >= 1, { timeoutMs: 60_000, settleMs: 500 });
    await kill(proc, 'SIGTERM');

    proc = startStage('restarted', 'accumulate,postprocess,pack', config, ['--fault', 'accumulate.throw-on-restore']);
    const code = await Promise.race([proc.exited, sleep(90_000).then(() => 'still running')]);
    expect(code).toBe(1);
    const fatal = proc.log.filter((l) => l.startsWith('error ['));
    expect(fatal).toEqual([expect.stringMatching(/^error \[restore_failed\]: accumulate\+postprocess\+pack: restoring partitions \[[\d,]+\] failed 2 times: Error: injected fault accumulate\.throw-on-restore/)]);
    expect(proc.log.filter((l) => /restoring partitions .* failed \(attempt \d of 2\)/.test(l))).toHaveLength(2);
  }, 240_000);
});

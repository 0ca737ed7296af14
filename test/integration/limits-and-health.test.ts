import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generateEvents } from '../../loadgen/index.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { startPipeline, type RunningPipeline } from '../../streams/runtime/pipeline.js';
import { RowProducer } from '../../tools/row-producer.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { connectRowProducer, testEnv, type TestEnv } from './helpers.js';
import { sleep } from './stage-processes.js';
import { readTopic } from './topic-reader.js';

const quiet = { info: () => undefined, warn: () => undefined, error: (m: string) => console.error(m) };
const PORT = 19464;
let env: TestEnv;
let pipeline: RunningPipeline;

beforeAll(async () => {
  // A 48 KiB record limit and ceiling: a row fits, a group of four such rows
  // does not (below kafka.max_value_bytes it would travel as a chunk set:
  // test/integration/chunked-records.test.ts).
  // Intermediate records in full: by reference (the default) the group record
  // names its rows and stays small, and the rows' text never reaches packed.
  env = await testEnv('limits', [
    [['kafka', 'max_message_bytes'], 48 * 1024],
    [['kafka', 'max_value_bytes'], 48 * 1024],
    [['runtime', 'intermediate_records'], 'full'],
    [['runtime', 'metrics_port'], PORT],
    [['accumulate', 'batch_end_grace_ms'], 200],
  ]);
  pipeline = await startPipeline({ config: env.config, configDir: process.cwd(), stages: ['accumulate', 'postprocess', 'pack'], log: quiet });
});

afterAll(async () => {
  await pipeline?.stop();
  await env?.close();
});

describe('record size limits and health endpoints', () => {
  test('a group record over the size limit becomes a record_too_large dead letter and the partition keeps flowing', async () => {
    const names = topicNames(env.prefix);
    const codec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), env.registry).init();
    const all = [...generateEvents({ batches: 1, groupsPerBatch: 8, generations: 4, seed: 3, profile: 'small', runId: `${env.prefix}run` })];
    const rows = all.filter((e) => e.kind === 'row');
    const sizes = rows.map((e) => (e.kind === 'row' ? codec.encode({ kind: 'row', row: e.row }).length : 0));
    // Inflate one group's rows (content only) so each row fits but the group does not.
    const big = rows[0]!.kind === 'row' ? rows[0]!.row.group_id : '';
    for (const e of all) {
      if (e.kind === 'row' && e.row.group_id === big) e.row.message_log[0]!.content = 'x'.repeat(16 * 1024);
    }
    expect(Math.max(...sizes)).toBeLessThan(16 * 1024);
    // A produce request's record batch must fit the topic limit too: flush small.
    const producer = new RowProducer({ kafka: env.ops, topic: names.rowCompleted, codec, flushBytes: 16 * 1024 });
    await producer.connect();
    await producer.send(all);
    await producer.disconnect();

    const dl = new TopicCodec('deadLetter', subjectOf(names.deadLetter), env.registry);
    const dead = await readTopic(env.kafka, names.deadLetter, (rs) => rs.length >= 1);
    const letters = await Promise.all(dead.map((r) => dl.decode(r.value)));
    expect(letters.map((d) => `${d.reason}:${d.group_id}`)).toEqual([`record_too_large:${big}`]);
    expect(letters[0]!.message).toMatch(/over the 49152-byte ceiling \(kafka\.max_value_bytes\)/);
    // Every other group of the same partitions went through.
    const packed = await readTopic(env.kafka, names.packed, (rs) => rs.length >= 7);
    expect(new Set(packed.map((r) => r.key)).size).toBe(7);
    expect(packed.map((r) => r.key)).not.toContain(big);
  });

  test('/metrics reports records, dead letters and lag per stage, and /healthz answers', async () => {
    const text = await (await fetch(`http://127.0.0.1:${PORT}/metrics`)).text();
    // All three stages in one process run fused: one transaction per batch, records counted per stage.
    expect(text).toMatch(/rollout_stream_records_in_total\{stage="accumulate"\} \d+/);
    expect(text).toMatch(/rollout_stream_records_in_total\{stage="pack"\} 7/);
    expect(text).toMatch(/rollout_stream_records_out_total\{stage="pack",topic="[^"]+rollout\.packed"\} 7/);
    expect(text).toMatch(/rollout_stream_dead_letters_total\{stage="accumulate",reason="record_too_large"\} 1/);
    expect(text).toMatch(/rollout_stream_transaction_seconds_count\{stage="accumulate\+postprocess\+pack"\} \d+/);
    expect(text).toMatch(/rollout_stream_transaction_seconds_count\{stage="batch-metrics"\} \d+/);
    // Where the fused transaction's time goes: each step's send and offsets, each downstream stage's processing, the commit.
    for (const [stage, phase] of [
      ['accumulate', 'send'],
      ['accumulate', 'send_offsets'],
      ['postprocess', 'process'],
      ['postprocess', 'send'],
      ['pack', 'process'],
      ['pack', 'send_offsets'],
      ['accumulate+postprocess+pack', 'commit'],
    ]) {
      expect(text).toMatch(new RegExp(`rollout_stream_transaction_phase_seconds_count\\{stage="${stage!.replace(/\+/g, '\\+')}",phase="${phase}"\\} [1-9]\\d*`));
    }
    const health = await fetch(`http://127.0.0.1:${PORT}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ stages: ['accumulate', 'postprocess', 'pack', 'batch-metrics'], fused: true });
  });

  test('/healthz answers 503 naming the runner, its state, since when, why and on which partitions when a stage is stopped by the poison policy', async () => {
    const STOP_PORT = 19473;
    const stopEnv = await testEnv('limits-stop', [
      [['runtime', 'metrics_port'], STOP_PORT],
      [['runtime', 'poison'], { policy: 'stop', attempts: 1, backoff_ms: 0 }],
      [['accumulate', 'batch_end_grace_ms'], 200],
    ]);
    const events = [...generateEvents({ batches: 1, groupsPerBatch: 4, generations: 4, seed: 5, profile: 'small', runId: `${stopEnv.prefix}run` })];
    const firstRow = events.find((e) => e.kind === 'row');
    const bad = firstRow?.kind === 'row' ? firstRow.row.group_id : '';
    const stopped = await startPipeline({
      config: stopEnv.config,
      configDir: process.cwd(),
      stages: ['accumulate', 'postprocess', 'pack'],
      log: quiet,
      faults: [{ point: 'throw-on-group', stage: 'postprocess', groupId: bad }],
    });
    try {
      expect((await fetch(`http://127.0.0.1:${STOP_PORT}/healthz`)).status).toBe(200);
      const producer = await connectRowProducer(stopEnv);
      await producer.send(events);
      await producer.disconnect();
      let res = await fetch(`http://127.0.0.1:${STOP_PORT}/healthz`);
      for (const until = Date.now() + 60_000; res.status !== 503 && Date.now() < until; res = await fetch(`http://127.0.0.1:${STOP_PORT}/healthz`)) await sleep(250);
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        stages: ['accumulate', 'postprocess', 'pack', 'batch-metrics'],
        fused: true,
        unhealthy: [
          {
            runner: 'accumulate+postprocess+pack',
            state: 'stopped_by_policy',
            since: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
            reason: expect.stringMatching(/^postprocess failed 1 time\(s\) on .* \(key [^)]+\): Error: injected fault postprocess\.throw-on-group/),
            partitions: [expect.any(Number)],
          },
        ],
      });
      // The batch-metrics aggregator's gauge reaches /metrics too.
      expect(await (await fetch(`http://127.0.0.1:${STOP_PORT}/metrics`)).text()).toMatch(/^rollout_stream_open_batches \d+$/m);
    } finally {
      await stopped.stop();
      await stopEnv.close();
    }
  });
});

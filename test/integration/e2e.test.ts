import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runOffline } from '../../cli/offline.js';
import { collectExpectations, generateEvents, parseFaultSpec, type LoadgenEvent } from '../../loadgen/index.js';
import { formatJsonLine, parseJsonLine } from '../../json-form/form.js';
import { AvroBodyCodec, TopicCodec } from '../../streams/codecs/codec.js';
import { startPipeline, type RunningPipeline } from '../../streams/runtime/pipeline.js';
import { RowProducer } from '../../tools/row-producer.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { HEADER_BYTES } from '../../streams/codecs/wire-format.js';
import { testEnv, type TestEnv } from './helpers.js';
import { readTopic } from './topic-reader.js';

const quiet = { info: () => undefined, warn: (m: string) => console.warn(m), error: (m: string) => console.error(m) };

/** The packed/metrics/dead-letter lines the offline runner produces for the same rows. */
async function offlineAll(env: TestEnv, events: LoadgenEvent[]): Promise<string[]> {
  const lines: string[] = [];
  const input = events
    .filter((e) => e.kind !== 'garbage')
    .map((e) => (e.kind === 'row' ? formatJsonLine({ kind: 'row', record: e.row }) : formatJsonLine({ kind: 'batch_end', end: e.end })));
  await runOffline('all', env.config, input, (l) => void lines.push(l));
  return lines;
}

// Separate stages (three transactions per group) and fused (one), intermediate
// records by reference (the default) and in full: the same records, byte for byte.
describe.each([
  { mode: 'separate stages', fused: false, intermediate: 'reference' },
  { mode: 'fused stages', fused: true, intermediate: 'reference' },
  { mode: 'separate stages', fused: false, intermediate: 'full' },
  { mode: 'fused stages', fused: true, intermediate: 'full' },
])('the pipeline on the real broker, $mode, intermediate records $intermediate', ({ fused, intermediate }) => {
  let env: TestEnv;
  let pipeline: RunningPipeline;

  beforeAll(async () => {
    // zstd on every stage's output here (the other pipeline tests run the default, none).
    env = await testEnv(`${fused ? 'e2e-fused' : 'e2e'}-${intermediate}`, [
      [['kafka', 'compression'], 'zstd'],
      [['accumulate', 'batch_end_grace_ms'], 300],
      [['runtime', 'metrics_port'], 0],
      [['runtime', 'fused'], fused],
      [['runtime', 'intermediate_records'], intermediate],
    ]);
    pipeline = await startPipeline({ config: env.config, configDir: process.cwd(), stages: ['accumulate', 'postprocess', 'pack'], log: quiet });
  });

  afterAll(async () => {
    await pipeline?.stop();
    await env?.close();
  });

  test('shuffled rows of several batches become exactly the packed groups the offline runner produces, byte for byte, the same group and batch metrics, and the expected dead letters', async () => {
    const events = [
      ...generateEvents({
        batches: 3,
        groupsPerBatch: 6,
        generations: 4,
        seed: 11,
        profile: 'small',
        runId: `${env.prefix}run`,
        faults: parseFaultSpec('dup=0.05,conflict=0.05,out_of_range=0.05,nan=0.05,mixed_agents=0.1,task_mismatch=0.1,garbage=0.03,missing=0.04'),
      }),
    ];
    const expected = collectExpectations(events);
    const names = topicNames(env.prefix);
    const rowCodec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), env.registry).init();
    const producer = new RowProducer({ kafka: env.ops, topic: names.rowCompleted, codec: rowCodec, compression: 'lz4' });
    await producer.connect();
    await producer.send(events);
    await producer.disconnect();

    const offline = (await offlineAll(env, events)).map(parseJsonLine);
    const offlinePacked = new Map<string, Buffer>();
    const packedBody = new AvroBodyCodec('packed');
    for (const l of offline) if (l.kind === 'packed') offlinePacked.set(l.packed.group_id, packedBody.encodeFramed(l.packed, 0).subarray(HEADER_BYTES));
    const offlineDead = offline.filter((l) => l.kind === 'dead_letter').map((l) => (l.kind === 'dead_letter' ? l.deadLetter : null)!);

    expect(offlinePacked.size).toBe(expected.completeGroups.size);
    const packed = await readTopic(env.kafka, names.packed, (rs) => rs.length >= offlinePacked.size);
    expect(packed.length).toBe(offlinePacked.size);
    for (const r of packed) {
      const want = offlinePacked.get(r.key);
      expect(want, `unexpected packed group ${r.key}`).toBeDefined();
      expect(r.value.subarray(HEADER_BYTES).equals(want!), `packed bytes of ${r.key}`).toBe(true);
    }

    // What the intermediate topics carry: references to the rows, or the rows.
    const groupCodec = new TopicCodec('groupComplete', subjectOf(names.groupComplete), env.registry);
    const penalizedCodec = new TopicCodec('penalized', subjectOf(names.penalized), env.registry);
    const groupRecords = await readTopic(env.kafka, names.groupComplete, (rs) => rs.length >= expected.completeGroups.size);
    const penalizedRecords = await readTopic(env.kafka, names.penalized, (rs) => rs.length >= offlinePacked.size);
    for (const r of groupRecords) {
      const g = await groupCodec.decode(r.value);
      expect(g.row_refs?.length ?? g.rows.length, `rows of ${r.key}`).toBe(4);
      expect(g.row_refs !== undefined, `group-complete ${r.key} by reference`).toBe(intermediate === 'reference');
    }
    for (const r of penalizedRecords) expect((await penalizedCodec.decode(r.value)).row_refs !== undefined).toBe(intermediate === 'reference');

    const expectedDead = expected.deadLetters.length;
    const dlCodec = new TopicCodec('deadLetter', subjectOf(names.deadLetter), env.registry);
    const dead = await readTopic(env.kafka, names.deadLetter, (rs) => rs.length >= expectedDead);
    const got = (await Promise.all(dead.map((r) => dlCodec.decode(r.value)))).map((d) => `${d.reason}:${d.group_id}`).sort();
    const want = expected.deadLetters.map((e) => `${e.reason}:${e.group_id}`).sort();
    expect(got).toEqual(want);
    // The offline runner agrees on every dead letter it can see (garbage never reaches it as bytes).
    const offlineWant = offlineDead.map((d) => `${d.reason}:${d.group_id}`).sort();
    expect(got.filter((x) => !x.startsWith('undecodable:'))).toEqual(offlineWant);
    // Group metrics and batch metrics (aggregated across partitions) equal the offline ones.
    const offlineMetrics = new Map<string, Record<string, number>>();
    for (const l of offline) {
      if (l.kind === 'metrics') offlineMetrics.set(`${l.metrics.scope}:${l.metrics.group_id ?? l.metrics.batch_id}`, l.metrics.values);
    }
    expect([...offlineMetrics.keys()].filter((k) => k.startsWith('batch:')).length).toBe(3);
    const metricsCodec = new TopicCodec('metrics', subjectOf(names.metrics), env.registry);
    const metricRecords = await readTopic(env.kafka, names.metrics, (rs) => rs.length >= offlineMetrics.size);
    const gotMetrics = new Map<string, Record<string, number>>();
    for (const r of metricRecords) {
      const m = await metricsCodec.decode(r.value);
      const key = `${m.scope}:${m.group_id ?? m.batch_id}`;
      expect(gotMetrics.has(key), `metrics ${key} written once`).toBe(false);
      gotMetrics.set(key, m.values);
    }
    expect(gotMetrics).toEqual(offlineMetrics);
    // Undecodable dead letters keep the original bytes.
    for (const d of await Promise.all(dead.map((r) => dlCodec.decode(r.value)))) {
      if (d.reason === 'undecodable') expect(d.records[0]!.value!.length).toBeGreaterThan(0);
    }
  });
});

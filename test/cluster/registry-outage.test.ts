/**
 * SPEC §8.1, the registry's part: while the schema registry is down the
 * stages keep processing records whose schema ids they know; a record whose
 * id they have not seen waits (a rate-limited log line, no dead letter, no
 * crash) and goes on when the registry is back; a stage that starts while
 * the registry is down fails after a bounded wait with an error that says so.
 */
import avro from 'avsc';
import { afterEach, describe, expect, test } from 'vitest';
import { generateEvents, type LoadgenEvent } from '../../loadgen/index.js';
import { avroSchema } from '../../schemas/index.js';
import { rowCompletedToAvro } from '../../streams/codecs/record-mapping.js';
import { HEADER_BYTES, writeHeader } from '../../streams/codecs/wire-format.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { assertExactlyOnce, expectedRun } from '../integration/exactly-once-expectations.js';
import { connectRowProducer, sendInSlices, testEnv, type TestEnv } from '../integration/helpers.js';
import { kill, sleep, startStage, waitForLog, writeTestConfig, type StageProcess } from '../integration/stage-processes.js';
import { deleteTopicsWithPrefix, reportRun, startRegistry, stopRegistry } from './cluster.js';
import { PackedWatch } from './packed-watch.js';

const OUTAGE_MS = 30_000;
let procs: StageProcess[] = [];
let env: TestEnv | undefined;
let watch: PackedWatch | undefined;
let registryDown = false;

afterEach(async (ctx) => {
  await reportRun('registry', ctx.task.result?.state === 'fail', procs, env);
  await Promise.all(procs.map((p) => kill(p)));
  procs = [];
  if (registryDown) await startRegistry().catch(() => undefined);
  registryDown = false;
  await watch?.stop().catch(() => undefined);
  // A failed test's topics stay for inspection (kafka-dump-log on the nodes' data); the rest go.
  if (env && ctx.task.result?.state !== 'fail') await deleteTopicsWithPrefix(env.admin, env.prefix).catch(() => undefined);
  await env?.close();
  env = undefined;
});

/** row-completed's schema with one more field (a default, so BACKWARD compatible): a writer the stages have not seen. */
function evolvedRowSchema(): object {
  const s = avroSchema('rowCompleted') as { fields: unknown[] };
  return { ...s, fields: [...s.fields, { name: 'note', type: ['null', 'string'], default: null }] };
}

describe('schema registry outage', () => {
  test('stopping the registry for 30 s loses nothing, dead-letters nothing, and an unseen schema id waits and then goes on', async () => {
    env = await testEnv('cl-registry');
    const names = topicNames(env.prefix);
    const all: LoadgenEvent[] = [...generateEvents({ batches: 5, groupsPerBatch: 24, generations: 4, seed: 21, profile: 'small', runId: `${env.prefix}run` })];
    // One group of the middle batch is written, during the outage, with a schema id no stage has seen.
    const rows = all.filter((e): e is Extract<LoadgenEvent, { kind: 'row' }> => e.kind === 'row');
    const special = rows[Math.floor(rows.length / 2)]!.row.group_id;
    const held = rows.filter((e) => e.row.group_id === special);
    const flowing = all.filter((e) => !(e.kind === 'row' && e.row.group_id === special));
    const want = await expectedRun(env.config, all);
    const evolvedId = await env.registry.register(subjectOf(names.rowCompleted), evolvedRowSchema());
    const evolved = avro.Type.forSchema(evolvedRowSchema() as avro.Schema, { wrapUnions: 'auto' });

    const configPath = writeTestConfig(env.prefix);
    procs = ['accumulate', 'postprocess', 'pack'].map((s) => startStage(s, s, configPath));
    for (const p of procs) expect(await waitForLog(p, p.name === 'pack' ? /info running pack/ : /restored partitions/, 90_000), `${p.name} started`).toBeDefined();
    watch = new PackedWatch(env.kafka, names.packed);
    await watch.start();

    // The rows of `special` go last in the event order: send them into the outage by hand.
    const sending = sendInSlices(await connectRowProducer(env), flowing, 30, 1500);
    await sleep(10_000);
    await stopRegistry();
    registryDown = true;
    const downAt = Date.now();

    const producer = env.kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
    await producer.connect();
    const messages = held.map((e) => {
      const body = evolved.toBuffer({ ...rowCompletedToAvro({ kind: 'row', row: e.row }), note: 'written with a newer schema' });
      const value = Buffer.allocUnsafe(HEADER_BYTES + body.length);
      writeHeader(value, evolvedId);
      body.copy(value, HEADER_BYTES);
      return { key: e.row.group_id, value };
    });
    await producer.send({ topic: names.rowCompleted, acks: -1, messages });
    await producer.disconnect();

    // A stage that starts now cannot register its schemas: it fails after its bounded wait, saying why.
    const late = startStage('late-accumulate', 'accumulate', writeTestConfig(env.prefix, { kafka: { registry_startup_wait_ms: 4000 } }));
    const code = await Promise.race([late.exited, sleep(60_000).then(() => 'still running')]);
    expect(code, 'a stage starting without a registry stops').not.toBe(0);
    expect(code).not.toBe('still running');
    expect(late.log.join('\n')).toMatch(/registering \S+-value at http:\/\/127\.0\.0\.1:\d+\/apis\/ccompat\/v7 failed \(\d+ attempts over \d+ s\): .*ECONNREFUSED.*is the registry up/);

    await sleep(downAt + OUTAGE_MS - Date.now());
    const upAt = Date.now();
    const during = watch.groupsBetween(downAt, upAt);
    console.log(`registry down ${upAt - downAt} ms: ${during} groups packed meanwhile`);
    expect(during, 'known schema ids are processed while the registry is down').toBeGreaterThan(0);
    const waits = procs[0]!.log.filter((l) => l.includes(`schema id ${evolvedId} is not known here and the registry does not answer`));
    expect(waits.length, 'the waiting record says so').toBeGreaterThan(0);
    expect(waits.length, 'at a limited rate').toBeLessThanOrEqual(Math.ceil(OUTAGE_MS / 15_000) + 1);
    expect(watch.arrivals.some((a) => a.key === special), 'the unseen-id group waits').toBe(false);

    await startRegistry();
    registryDown = false;
    await sending;
    // Every group, the unseen-id one included, exactly once and equal to the offline runner; no dead letter.
    await assertExactlyOnce(env.kafka, env.registry, env.prefix, want, 120_000);
    expect(await waitForLog(procs[0]!, new RegExp(`schema id ${evolvedId} fetched from .* after waiting \\d+ s`), 1000)).toBeDefined();
    for (const p of procs) expect(p.child.exitCode, `${p.name} still runs`).toBeNull();
  });
});

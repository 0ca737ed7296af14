/**
 * The container image (Dockerfile, `./rollout-stream image build`) as a user
 * runs it: podman, host network, the local broker. One image runs every
 * command; `run` serves /readyz (503 until the stages have their partitions,
 * then 200) and /healthz, logs JSON lines, packs a loadgen batch byte-equal
 * to the offline runner, and stops within runtime.shutdown_timeout_ms on
 * SIGTERM with nothing lost. scripts/test.sh builds the image before this
 * tier; run alone, the test builds it.
 */
import { execFile, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runOffline } from '../../cli/offline.js';
import { formatJsonLine, parseJsonLine } from '../../json-form/form.js';
import { generateEvents, type LoadgenEvent } from '../../loadgen/index.js';
import { AvroBodyCodec, TopicCodec } from '../../streams/codecs/codec.js';
import { HEADER_BYTES } from '../../streams/codecs/wire-format.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { RowProducer } from '../../tools/row-producer.js';
import { testEnv, type TestEnv } from '../integration/helpers.js';
import { readTopic } from '../integration/topic-reader.js';

const ROOT = join(import.meta.dirname, '..', '..');
const IMAGE_SH = join(ROOT, 'scripts', 'image.sh');
const run = promisify(execFile);
const podman = (args: string[], timeout = 60_000) => run(IMAGE_SH, ['podman', ...args], { cwd: ROOT, timeout, maxBuffer: 64 * 1024 * 1024 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const image = spawnSync(IMAGE_SH, ['name'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();

async function status(url: string): Promise<number> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(1_000) })).status;
  } catch {
    return 0; // not listening yet
  }
}

describe('the container image', () => {
  let env: TestEnv;
  const name = `rs-it-${randomUUID().slice(0, 8)}`;
  const port = 19_000 + (process.pid % 900);
  let started = false;

  beforeAll(async () => {
    const exists = spawnSync(IMAGE_SH, ['podman', 'image', 'exists', image], { cwd: ROOT });
    if (exists.status !== 0) await run(IMAGE_SH, ['build'], { cwd: ROOT, timeout: 900_000, maxBuffer: 64 * 1024 * 1024 });
    env = await testEnv('image', [[['accumulate', 'batch_end_grace_ms'], 300]]);
  }, 960_000);

  afterAll(async () => {
    if (started) await podman(['rm', '-f', name]).catch(() => undefined);
    await env?.close();
  });

  test('one image runs every command: --version and topics create', async () => {
    const v = await podman(['run', '--rm', '--network=host', image, '--version']);
    expect(v.stdout.trim()).toMatch(/^rollout-stream \d+\.\d+\.\d+$/);
    const prefix = `it.image-topics.${randomUUID().slice(0, 8)}.`;
    const t = await podman([
      'run', '--rm', '--network=host',
      '-e', `KAFKA_BROKERS=${env.config.kafka.brokers.join(',')}`,
      '-e', `SCHEMA_REGISTRY_URL=${env.config.kafka.schema_registry_url}`,
      '-e', `TOPIC_PREFIX=${prefix}`,
      image, 'topics', 'create',
    ]);
    const listed = await env.admin.listTopics();
    expect(listed.filter((x) => x.startsWith(prefix)).length, t.stdout + t.stderr).toBeGreaterThanOrEqual(5);
  });

  test('run: /readyz 503 then 200, a batch packed byte-equal to offline, JSON logs, SIGTERM stops in time with nothing lost', async () => {
    await podman([
      'run', '-d', '--name', name, '--network=host',
      '-e', `KAFKA_BROKERS=${env.config.kafka.brokers.join(',')}`,
      '-e', `SCHEMA_REGISTRY_URL=${env.config.kafka.schema_registry_url}`,
      '-e', `TOPIC_PREFIX=${env.prefix}`,
      // Host network: keep the probes on loopback (the image's default is 0.0.0.0).
      '-e', 'METRICS_HOST=127.0.0.1',
      '-e', `METRICS_PORT=${port}`,
      image, 'run',
    ]);
    started = true;
    const seen: number[] = [];
    const t0 = Date.now();
    while (Date.now() - t0 < 120_000) {
      const s = await status(`http://127.0.0.1:${port}/readyz`);
      if (seen[seen.length - 1] !== s) seen.push(s);
      if (s === 200) break;
      await sleep(100);
    }
    expect(seen[seen.length - 1], `readyz statuses ${seen.join(' → ')}`).toBe(200);
    expect(seen, 'readyz answered 503 before the stages had their partitions').toContain(503);
    expect(await status(`http://127.0.0.1:${port}/healthz`)).toBe(200);
    // The image's own HEALTHCHECK command agrees.
    const hc = await podman(['healthcheck', 'run', name]).then(() => 0, (e: { code?: number }) => e.code ?? 1);
    expect(hc).toBe(0);

    const events: LoadgenEvent[] = [...generateEvents({ batches: 1, groupsPerBatch: 4, generations: 4, seed: 5, profile: 'small', runId: `${env.prefix}run` })];
    const names = topicNames(env.prefix);
    const producer = new RowProducer({ kafka: env.ops, topic: names.rowCompleted, codec: await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), env.registry).init() });
    await producer.connect();
    await producer.send(events);
    await producer.disconnect();
    const lines: string[] = [];
    await runOffline(
      'all',
      env.config,
      events.map((e) => (e.kind === 'row' ? formatJsonLine({ kind: 'row', record: e.row }) : e.kind === 'batch_end' ? formatJsonLine({ kind: 'batch_end', end: e.end }) : '')).filter(Boolean),
      (l) => void lines.push(l),
    );
    const body = new AvroBodyCodec('packed');
    const want = new Map<string, Buffer>();
    for (const l of lines.map(parseJsonLine)) if (l.kind === 'packed') want.set(l.packed.group_id, body.encodeFramed(l.packed, 0).subarray(HEADER_BYTES));
    expect(want.size).toBe(4);
    const packed = await readTopic(env.kafka, names.packed, (rs) => rs.length >= want.size);
    expect(packed.map((r) => r.key).sort()).toEqual([...want.keys()].sort());
    for (const r of packed) expect(r.value.subarray(HEADER_BYTES).equals(want.get(r.key)!), `packed bytes of ${r.key}`).toBe(true);

    const stopAt = Date.now();
    await podman(['kill', '--signal', 'TERM', name]);
    const waited = await podman(['wait', name], 60_000);
    const stopMs = Date.now() - stopAt;
    expect(waited.stdout.trim(), 'exit code after SIGTERM').toBe('0');
    expect(stopMs).toBeLessThan(env.config.runtime.shutdown_timeout_ms);
    const logs = await podman(['logs', name]);
    const logLines = (logs.stdout + logs.stderr).split('\n').filter((l) => l.trim() !== '');
    const parsed = logLines.map((l) => JSON.parse(l) as { level: string; msg: string });
    expect(parsed.some((l) => l.level === 'info' && /^SIGTERM: stopping/.test(l.msg))).toBe(true);
    expect(parsed[parsed.length - 1]!.msg).toBe('stopped');
    // Nothing lost, nothing twice after the stop.
    const again = await readTopic(env.kafka, names.packed, (rs) => rs.length >= want.size);
    expect(again.length).toBe(want.size);
  });
});

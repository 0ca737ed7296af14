/**
 * The kafkajs send-retry fix (issue 14, streams/kafka/kafkajs/send-retry.ts)
 * only holds when it is installed before kafkajs loads. Issue 25 item 3.3:
 * every entry point that builds a client (the stage runtime's, the ops
 * commands', the row reader's and the TypeScript publisher library's) has
 * it in force whatever it imports first, and a client built without it is
 * an error (`client_unpatched`), not a silent gap: from the adapter's one
 * factory (`createKafka`) and from `new Kafka(...)` directly.
 *
 * Each case runs in a fresh process, since what decides it is which module
 * loads kafkajs first.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const KAFKAJS_DIR = join(ROOT, 'streams', 'kafka', 'kafkajs');
const at = (rel: string) => JSON.stringify(join(ROOT, rel));
const CONFIG = `{ brokers: ['127.0.0.1:1'], client_id: 'patch-test', client: 'kafkajs', max_message_bytes: 1048576 }`;

/** Runs `body` as an ES module in a new Node process (tsx); resolves with its last stdout line, parsed. */
function inFreshProcess(body: string): Promise<Record<string, unknown>> {
  const script = `
    const { createRequire } = await import('node:module');
    const require = createRequire(${at('package.json')});
    const sendMessagesFixed = () => String(require('kafkajs/src/producer/sendMessages.js')).includes('Promise.allSettled(requests)');
    const attempt = (fn) => { try { fn(); return 'ok'; } catch (e) { return e.code ?? e.message; } };
    ${body}`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, env: { ...process.env, KAFKAJS_NO_PARTITIONER_WARNING: '1' } });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`exit ${code}: ${err}`));
      resolve(JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, unknown>);
    });
  });
}

/** What a process that imports `module` first and builds a client with `build` (an expression giving a kafkajs Kafka) sees. */
function entryPoint(module: string, build: string): Promise<Record<string, unknown>> {
  return inFreshProcess(`
    const m = await import(${at(module)});
    const { kafkaSendRetryPatched } = await import(${at('streams/kafka/kafkajs/send-retry.ts')});
    const kafka = await (${build});
    console.log(JSON.stringify({ patched: kafkaSendRetryPatched, sendMessagesFixed: sendMessagesFixed(), producer: attempt(() => kafka.producer({ idempotent: true })) }));`);
}

const ENTRY_POINTS: Array<[string, string, string]> = [
  ['the adapter factory (createKafka)', 'streams/kafka/kafkajs/client.ts', `m.createKafka(${CONFIG})`],
  ['the stage runtime (createKafkaClient)', 'streams/kafka/kafkajs/adapter.ts', `m.createKafkaClient(${CONFIG}).kafka`],
  ['the runtime by kafka.client (createClient)', 'streams/kafka/clients.ts', `m.createClient(${CONFIG}).then((c) => c.kafka)`],
  ['the ops commands (createOpsClient)', 'streams/kafka/kafkajs/ops-client.ts', `m.createOpsClient(${CONFIG}).kafka`],
  ['the row reader (createRowReader)', 'streams/kafka/kafkajs/offset-reader.ts', `(m.createRowReader(${CONFIG}), (await import(${at('streams/kafka/kafkajs/client.ts')})).createKafka(${CONFIG}))`],
  [
    'the TypeScript publisher library (streams/publish/publisher.ts, createPublisher builds createOpsClient)',
    'streams/publish/publisher.ts',
    `(await import(${at('streams/kafka/kafkajs/ops-client.ts')})).createOpsClient(${CONFIG}).kafka`,
  ],
  ['the command line (cli/main.ts loads the patches first)', 'streams/kafka/kafkajs/speedups.ts', `(await import(${at('streams/kafka/kafkajs/ops-client.ts')})).createOpsClient(${CONFIG}).kafka`],
];

describe('the kafkajs send-retry fix', () => {
  test.each(ENTRY_POINTS)('is in force for a client built through %s, imported first', async (_name, module, build) => {
    expect(await entryPoint(module, build)).toEqual({ patched: true, sendMessagesFixed: true, producer: 'ok' });
  });

  test('a kafkajs loaded before the fix makes every construction refuse with client_unpatched: the factories, and a producer of new Kafka()', async () => {
    const seen = await inFreshProcess(`
      const { Kafka } = require('kafkajs');
      const { createKafka } = await import(${at('streams/kafka/kafkajs/client.ts')});
      const { createKafkaClient } = await import(${at('streams/kafka/kafkajs/adapter.ts')});
      const { createOpsClient } = await import(${at('streams/kafka/kafkajs/ops-client.ts')});
      const { kafkaSendRetryPatched, kafkaSendRetryProblem } = await import(${at('streams/kafka/kafkajs/send-retry.ts')});
      let message = null;
      try { createKafka(${CONFIG}); } catch (e) { message = e.message; }
      console.log(JSON.stringify({
        patched: kafkaSendRetryPatched,
        sendMessagesFixed: sendMessagesFixed(),
        createKafka: attempt(() => createKafka(${CONFIG})),
        createKafkaClient: attempt(() => createKafkaClient(${CONFIG})),
        createOpsClient: attempt(() => createOpsClient(${CONFIG})),
        direct: attempt(() => new Kafka({ brokers: ['127.0.0.1:1'] }).producer()),
        sameProblem: message === kafkaSendRetryProblem,
        message,
      }));`);
    expect(seen).toMatchObject({
      patched: false,
      sendMessagesFixed: false,
      createKafka: 'client_unpatched',
      createKafkaClient: 'client_unpatched',
      createOpsClient: 'client_unpatched',
      direct: 'client_unpatched',
      sameProblem: true,
    });
    expect(seen.message).toMatch(/^kafkajs was loaded before streams\/kafka\/kafkajs\/send-retry\.ts could install its send-retry fix/);
  });

  test('every module of the adapter that loads kafkajs at run time loads ./speedups.js (and with it the fix) before it', () => {
    const files = readdirSync(KAFKAJS_DIR).filter((f) => f.endsWith('.ts'));
    const loaders: string[] = [];
    for (const f of files) {
      const text = readFileSync(join(KAFKAJS_DIR, f), 'utf8');
      const imports = [...text.matchAll(/^(?:import|export)\s+(type\s+)?[^'"]*?(?:from\s+)?['"]([^'"]+)['"]/gm)].map((m) => ({ type: m[1] !== undefined, spec: m[2]! }));
      const first = imports.findIndex((i) => !i.type && (i.spec === 'kafkajs' || i.spec.startsWith('kafkajs/')));
      if (first < 0) continue;
      loaders.push(f);
      const fix = imports.findIndex((i) => !i.type && (i.spec === './speedups.js' || i.spec === './send-retry.js'));
      expect(fix >= 0 && fix < first, `${f} imports kafkajs before ./speedups.js`).toBe(true);
    }
    expect(loaders.sort()).toEqual(expect.arrayContaining(['adapter.ts', 'admin.ts', 'client.ts', 'compression.ts', 'scan.ts']));
  });

  test('only the adapter factory constructs a kafkajs client', () => {
    const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    const users: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
        const rel = join(dir, e.name);
        if (e.isDirectory()) walk(rel);
        else if (/\.(ts|mts)$/.test(e.name) && /new Kafka\(/.test(code(readFileSync(join(ROOT, rel), 'utf8')))) users.push(rel);
      }
    };
    for (const d of ['bench', 'cli', 'streams', 'tools', 'loadgen']) walk(d);
    expect(users).toEqual([join('streams', 'kafka', 'kafkajs', 'client.ts')]);
  });
});

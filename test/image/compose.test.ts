/**
 * docker-compose.yml run by podman-compose (Debian's, through
 * `./rollout-stream image compose`), with the images of
 * `./rollout-stream image build-compose` in place of the public broker and
 * registry images (nothing can be pulled here): the broker, the registry and
 * the stages become healthy by their compose healthchecks, `topics create`
 * and the loadgen batch exit 0, and the trainer (the Python package's
 * PackedConsumer) trains on every group the offline runner packs from the
 * same batch, each once. Every published port is on 127.0.0.1, on ports of
 * their own (the suite's local broker holds 9092 and 8081). The stack runs
 * on the compose network (podman's netavark bridge); it is torn down before
 * (a killed run's leftovers) and after.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runOffline } from '../../cli/offline.js';
import { loadConfig } from '../../config/load.js';
import { parseJsonLine } from '../../json-form/form.js';

const ROOT = join(import.meta.dirname, '..', '..');
const IMAGE_SH = join(ROOT, 'scripts', 'image.sh');
const exec = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const PROJECT = 'rs-compose-test';
const ports = { KAFKA_PORT: 19_392, REGISTRY_PORT: 18_381, METRICS_PORT: 19_464 };
const loadgen = { LOADGEN_GROUPS: '12', LOADGEN_SEED: '9', LOADGEN_RUN_ID: 'compose-test', LOADGEN_PROFILE: 'small' };
// What the compose file reads, and nothing of the suite's own broker settings.
const env: NodeJS.ProcessEnv = { ...process.env, ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])), ...loadgen };
for (const k of ['TOPIC_PREFIX', 'ROLLOUT_STREAM_CONFIG', 'KAFKA_IMAGE', 'REGISTRY_IMAGE', 'ROLLOUT_STREAM_IMAGE', 'TRAINER_IMAGE', 'TRAINER_GROUP']) delete env[k];

const SERVICES = ['kafka', 'registry', 'topics', 'stages', 'loadgen', 'trainer'] as const;
const name = (service: (typeof SERVICES)[number]) => `${PROJECT}_${service}_1`;
const image = (args: string[], timeout = 120_000) => exec(IMAGE_SH, args, { cwd: ROOT, env, timeout, maxBuffer: 64 * 1024 * 1024 });
const podman = (args: string[], timeout = 120_000) => image(['podman', ...args], timeout);
const compose = (args: string[], timeout = 180_000) => image(['compose', '-p', PROJECT, '-f', join(ROOT, 'docker-compose.yml'), ...args], timeout);

async function removeAll(): Promise<void> {
  await compose(['down']).catch(() => undefined);
  // down stops at what it cannot stop; remove the project's containers and network by name.
  await podman(['rm', '-f', '--ignore', ...SERVICES.map(name)]).catch(() => undefined);
  await podman(['network', 'rm', '-f', `${PROJECT}_default`]).catch(() => undefined);
}

async function state(service: (typeof SERVICES)[number]): Promise<{ status: string; exitCode: number }> {
  const out = await podman(['inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}', name(service)]).catch(() => ({ stdout: 'missing -1' }));
  const [status, code] = out.stdout.trim().split(' ');
  return { status: status!, exitCode: Number(code) };
}

async function waitFor(what: string, check: () => Promise<boolean>, ms: number): Promise<number> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (await check()) return Date.now() - t0;
    await sleep(1_000);
  }
  throw new Error(`${what}: not within ${ms / 1000} s`);
}

const healthy = (service: (typeof SERVICES)[number]) => () =>
  podman(['healthcheck', 'run', name(service)], 60_000).then(
    () => true,
    () => false,
  );

async function logs(service: (typeof SERVICES)[number]): Promise<string> {
  const out = await podman(['logs', name(service)]).catch((e: { stdout?: string; stderr?: string }) => ({ stdout: e.stdout ?? '', stderr: e.stderr ?? '' }));
  return `${out.stdout}${out.stderr}`;
}

const trained = (text: string): string[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{"trained"'))
    .map((l) => (JSON.parse(l) as { trained: string }).trained);

describe('docker-compose.yml under podman-compose', () => {
  beforeAll(async () => {
    // Layer-cached after the first build (scripts/test.sh builds them beside the image).
    await image(['build-compose'], 900_000);
    await removeAll();
  }, 960_000);

  afterAll(async () => {
    await removeAll();
  }, 180_000);

  test('broker, registry and stages healthy, topics created, a loadgen batch packed, the trainer gets every group once', async () => {
    const t0 = Date.now();
    await compose(['up', '-d']);

    // Published on 127.0.0.1 only.
    for (const service of ['kafka', 'registry', 'stages'] as const) {
      const out = await podman(['inspect', '--format', '{{json .HostConfig.PortBindings}}', name(service)]);
      // (an exposed port the file does not publish has null)
      const bindings = Object.values(JSON.parse(out.stdout) as Record<string, Array<{ HostIp: string; HostPort: string }> | null>).flatMap((b) => b ?? []);
      expect(bindings.length, `${service} publishes a port`).toBeGreaterThan(0);
      for (const b of bindings) expect(b.HostIp, `${service} port ${b.HostPort}`).toBe('127.0.0.1');
    }

    // The healthchecks of the compose file, run by hand (podman's timers need systemd).
    const timings: Record<string, number> = {};
    for (const service of ['kafka', 'registry', 'stages'] as const) {
      timings[service] = await waitFor(`${service} healthy`, healthy(service), 180_000).catch(async (e: Error) => {
        throw new Error(`${e.message}\n${(await logs(service)).slice(-3000)}`);
      });
    }
    const readyz = await fetch(`http://127.0.0.1:${ports.METRICS_PORT}/readyz`, { signal: AbortSignal.timeout(2_000) });
    expect(readyz.status, 'the stages /readyz through the published port').toBe(200);
    expect(await state('topics')).toEqual({ status: 'exited', exitCode: 0 });

    await waitFor('loadgen done', async () => (await state('loadgen')).status === 'exited', 120_000);
    expect(await state('loadgen'), await logs('loadgen')).toEqual({ status: 'exited', exitCode: 0 });

    // The groups the same batch packs to, offline (the stages run with the defaults, as here).
    const dry = await podman(['run', '--rm', '--network=none', (await image(['name'])).stdout.trim(), 'loadgen', '--dry-run', '--quiet', '--batches', '1', '--groups', loadgen.LOADGEN_GROUPS, '--seed', loadgen.LOADGEN_SEED, '--run-id', loadgen.LOADGEN_RUN_ID, '--profile', loadgen.LOADGEN_PROFILE]);
    const out: string[] = [];
    await runOffline('all', loadConfig({ env: {} }).config, dry.stdout.split('\n').filter(Boolean), (l) => void out.push(l));
    const want = out.map(parseJsonLine).flatMap((l) => (l.kind === 'packed' ? [l.packed.group_id] : []));
    expect(want.length).toBe(Number(loadgen.LOADGEN_GROUPS));

    await waitFor('the trainer trained on every group', async () => trained(await logs('trainer')).length >= want.length, 120_000).catch(async (e: Error) => {
      throw new Error(`${e.message}\n${(await logs('trainer')).slice(-3000)}\n${(await logs('stages')).slice(-3000)}`);
    });
    await sleep(3_000); // anything delivered twice would show by now
    const got = trained(await logs('trainer'));
    expect([...got].sort(), 'every group once').toEqual([...want].sort());
    expect(await healthy('stages')(), 'stages still healthy').toBe(true);
    console.log(`compose: healthy after ${JSON.stringify(timings)} ms; ${got.length} groups trained ${Math.round((Date.now() - t0) / 1000)} s after up`);
  }, 480_000);
});

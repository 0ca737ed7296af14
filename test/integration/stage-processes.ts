/**
 * Stage services as real child processes (`./rollout-stream run`), for the
 * crash, scale and broker-restart tests: start, SIGKILL, SIGTERM, restart.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { randomUUID } from 'node:crypto';

const ROOT = join(import.meta.dirname, '..', '..');

export interface StageProcess {
  name: string;
  child: ChildProcess;
  log: string[];
  exited: Promise<number | null>;
}

/** Writes a config file for test processes (short session timeout so a killed instance is noticed quickly). */
export function writeTestConfig(prefix: string, extra: Record<string, unknown> = {}): string {
  const path = join(tmpdir(), `rs-${randomUUID()}.json`);
  const config = {
    topics: { prefix },
    accumulate: { batch_end_grace_ms: 300 },
    runtime: { session_timeout_ms: 6000, metrics_port: 0 },
    ...extra,
  };
  writeFileSync(path, JSON.stringify(config));
  return path;
}

export function startStage(name: string, stages: string, configPath: string, extraArgs: string[] = []): StageProcess {
  const args = ['--import', 'tsx', join(ROOT, 'cli', 'main.ts'), 'run', '--stages', stages, '--config', configPath, ...extraArgs];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, ROLLOUT_STREAM_CONFIG: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log: string[] = [];
  // RS_TEST_STAGE_LOGS=DIR: every stage process's whole output also goes to DIR/<name>-<pid>.log (for a failure's post-mortem).
  const logDir = process.env.RS_TEST_STAGE_LOGS;
  const file = logDir ? join(logDir, `${name}-${child.pid}.log`) : null;
  const keep = (b: Buffer) => {
    if (file) appendFileSync(file, b);
    for (const line of b.toString().split('\n')) if (line.trim()) log.push(line);
    if (log.length > 400) log.splice(0, log.length - 400);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { name, child, log, exited };
}

export async function kill(p: StageProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill(signal);
  await p.exited;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The first line of `p`'s log matching `pattern`, waiting up to `ms` for it; undefined if none came. */
export async function waitForLog(p: StageProcess, pattern: RegExp, ms: number): Promise<string | undefined> {
  const until = Date.now() + ms;
  for (;;) {
    const hit = p.log.find((l) => pattern.test(l));
    if (hit !== undefined || Date.now() >= until) return hit;
    await sleep(200);
  }
}

/**
 * SIGKILLs one of `procs` (chosen by `rand`) `kills` times: waits
 * `wait[0] + rand() * wait[1]` ms, kills, waits `down[0] + rand() * down[1]`
 * ms, then puts `restart(victim)` in its place. Returns the victims' names.
 */
export async function killAtRandomMoments(
  procs: StageProcess[],
  rand: () => number,
  o: { kills: number; wait: [number, number]; down: [number, number]; restart: (victim: StageProcess) => StageProcess },
): Promise<string[]> {
  const killed: string[] = [];
  for (let k = 0; k < o.kills; k++) {
    await sleep(o.wait[0] + rand() * o.wait[1]);
    const i = Math.floor(rand() * procs.length);
    const victim = procs[i]!;
    await kill(victim, 'SIGKILL');
    killed.push(victim.name);
    await sleep(o.down[0] + rand() * o.down[1]);
    procs[i] = o.restart(victim);
  }
  return killed;
}

/** The last `n` log lines whose message (timestamp left out) differs from every later one's, with repeat counts. */
export function distinctTail(log: string[], n: number): string[] {
  const seen = new Map<string, number>();
  const out: string[] = [];
  for (let i = log.length - 1; i >= 0 && out.length < n; i--) {
    const message = log[i]!.replace(/^\S+Z /, '');
    const count = seen.get(message);
    seen.set(message, (count ?? 0) + 1);
    if (count === undefined) out.push(log[i]!);
  }
  return out.reverse().map((l) => {
    const times = seen.get(l.replace(/^\S+Z /, ''))!;
    return times > 1 ? `${l}   [×${times}]` : l;
  });
}

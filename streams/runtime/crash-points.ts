/**
 * Named crash points, for tests only: inert unless armed, which only the
 * hidden `run --crash-at POINT[:N]` option does (cli/run.ts). An armed
 * point SIGKILLs the process the Nth time (default 1st) it is reached, so
 * the crash-safety tests can stop a real stage process at each delicate
 * moment deterministically, beside the random-moment kills:
 *
 * - `fence.after`: a task's sink fenced the previous owner, nothing restored
 * - `restore.during`: after the first changelog record was applied
 * - `restore.after`: state restored, before the task processes anything
 * - `tx.after-send`: a transaction's first records sent, not committed
 * - `tx.after-downstream`: fused, a later node processed, before its send
 * - `tx.after-offsets`: every group's offsets sent, before the commit
 * - `tx.after-commit`: committed, before the batch is released to the consumer
 * - `chunks.mid-set`: a send of a chunk set acknowledged with chunks still to
 *   send (the Nth arrival: after the Nth such send; streams/chunks/chunking-sink.ts)
 *
 * In process (the topology test driver, streams/testing/) nothing is
 * killed: a handler set with `setCrashHandler` hears every arrival, armed or
 * not, and decides which in-memory instance stops dead there. The SIGKILL
 * arming above works the same with or without one.
 */
import { RolloutStreamError } from '../../errors/index.js';

export const CRASH_POINTS = ['fence.after', 'restore.during', 'restore.after', 'tx.after-send', 'tx.after-downstream', 'tx.after-offsets', 'tx.after-commit', 'chunks.mid-set'] as const;

export type CrashPoint = (typeof CRASH_POINTS)[number];

const armed = new Map<CrashPoint, { at: number; seen: number }>();

/** Hears each arrival at a crash point, in the async context of the code that reached it. */
export type CrashHandler = (point: CrashPoint) => void;

let handler: CrashHandler | null = null;

/** Installs `h` (null: none) and returns the one it replaces. For in-process tests only. */
export function setCrashHandler(h: CrashHandler | null): CrashHandler | null {
  const previous = handler;
  handler = h;
  return previous;
}

/** Parses `tx.after-send` or `tx.after-send:3`; throws a `usage` error listing the points. */
export function parseCrashPoint(spec: string): { point: CrashPoint; at: number } {
  const m = /^([a-z.-]+)(?::(\d+))?$/.exec(spec);
  const point = m?.[1] as CrashPoint | undefined;
  const at = m?.[2] === undefined ? 1 : Number(m[2]);
  if (!m || !point || !CRASH_POINTS.includes(point) || at < 1) {
    throw new RolloutStreamError('usage', `--crash-at ${spec}: expected POINT[:N] with N ≥ 1, POINT one of ${CRASH_POINTS.join(', ')} (a test-only option)`);
  }
  return { point, at };
}

export function armCrashPoint(point: CrashPoint, at = 1): void {
  armed.set(point, { at, seen: 0 });
}

/** Tells the crash handler (if any) of this arrival; kills the process here when `point` is armed and this is its Nth arrival. */
export function crashPoint(point: CrashPoint): void {
  handler?.(point);
  const a = armed.get(point);
  if (!a) return;
  a.seen += 1;
  if (a.seen < a.at) return;
  process.stderr.write(`crash point ${point} reached (${a.seen}): SIGKILL\n`);
  process.kill(process.pid, 'SIGKILL');
}

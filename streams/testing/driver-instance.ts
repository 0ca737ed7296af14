/**
 * One process of the topology test driver: a pipeline (`startPipeline`, the
 * real stage runners) on its own connection to the in-memory cluster, and
 * the async context its code runs in. The context is how an in-process crash
 * finds its victim: `crashPoint` (streams/runtime/crash-points.ts) tells the
 * driver's handler of every arrival, and the handler asks the instance whose
 * context reached it. Stopping dead takes the process's connection (every
 * later Kafka call never answers), its timers (tickers, backoffs) and,
 * unless a test keeps it for a while, its group sessions.
 */
import { AsyncLocalStorage, createHook } from 'node:async_hooks';
import type { PipelineStage } from '../../config/schema.js';
import type { RolloutStreamError } from '../../errors/index.js';
import { setCrashHandler, type CrashHandler, type CrashPoint } from '../runtime/crash-points.js';
import type { RunningPipeline } from '../runtime/pipeline.js';
import type { MemoryConnection } from './memory-connection.js';

export type InstanceState = 'starting' | 'running' | 'crashed' | 'stopped' | 'refused';

const context = new AsyncLocalStorage<DriverInstance>();

export class DriverInstance {
  state: InstanceState = 'starting';
  /** Set once `startPipeline` resolved (a crash during start-up leaves it null). */
  pipeline: RunningPipeline | null = null;
  /** The first fatal error a runner reported (the process would exit non-zero). */
  fatal: RolloutStreamError | null = null;
  /** Where it stopped dead: a crash point, `crash` when a test crashed it, null while alive. */
  crashedAt: CrashPoint | 'crash' | null = null;
  /** Arrivals at each crash point so far. */
  readonly reached = new Map<CrashPoint, number>();
  /** Its log lines, `level: message`. */
  readonly logs: string[] = [];
  /** Settles when it stops dead, with where. */
  readonly died: Promise<CrashPoint | 'crash'>;
  /** Timers its code set and has not cleared (they die with it). */
  readonly timers = new Set<NodeJS.Timeout>();
  private armed: { point: CrashPoint; at: number } | null = null;
  private markDead!: (at: CrashPoint | 'crash') => void;

  constructor(
    readonly name: string,
    readonly connection: MemoryConnection,
    readonly stages: readonly PipelineStage[],
    private readonly onArmedPoint: (instance: DriverInstance, point: CrashPoint) => void,
  ) {
    this.died = new Promise((resolve) => (this.markDead = resolve));
  }

  get alive(): boolean {
    return this.state === 'starting' || this.state === 'running';
  }

  /** Stops dead at the `at`-th arrival at `point` from now on (default the next one). */
  crashAt(point: CrashPoint, at = 1): void {
    this.armed = { point, at: (this.reached.get(point) ?? 0) + at };
  }

  /** Runs `fn` as this process's code (its timers and crash points are this instance's). */
  run<T>(fn: () => T): T {
    return context.run(this, fn);
  }

  /** The process stops dead: no Kafka call answers any more, its timers are gone (its sessions are the driver's to expire). */
  die(at: CrashPoint | 'crash'): void {
    if (!this.alive) return;
    this.state = 'crashed';
    this.crashedAt = at;
    this.connection.kill();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.markDead(at);
  }

  log(level: 'info' | 'warn' | 'error', message: string): void {
    this.logs.push(`${level}: ${message}`);
    if (process.env.TOPOLOGY_DRIVER_LOG) process.stderr.write(`[${this.name}] ${level}: ${message}\n`);
  }

  /** Called by the crash handler in this instance's context. */
  arrive(point: CrashPoint): void {
    if (!this.alive) return;
    const n = (this.reached.get(point) ?? 0) + 1;
    this.reached.set(point, n);
    if (this.armed?.point === point && n >= this.armed.at) {
      this.armed = null;
      this.onArmedPoint(this, point);
    }
  }
}

const onCrashPoint: CrashHandler = (point) => context.getStore()?.arrive(point);

/** Timers by async id, so that a timer that fired or was cleared is forgotten. */
const timerOwners = new Map<number, { instance: DriverInstance; timer: NodeJS.Timeout }>();
const timerHook = createHook({
  init(asyncId, type, _trigger, resource) {
    if (type !== 'Timeout') return;
    const instance = context.getStore();
    if (!instance) return;
    const timer = resource as NodeJS.Timeout;
    // A dead process sets no timers (its code may still run to its next Kafka call).
    if (!instance.alive) return void queueMicrotask(() => clearTimeout(timer));
    instance.timers.add(timer);
    timerOwners.set(asyncId, { instance, timer });
  },
  destroy(asyncId) {
    const owner = timerOwners.get(asyncId);
    if (!owner) return;
    owner.instance.timers.delete(owner.timer);
    timerOwners.delete(asyncId);
  },
});

let users = 0;
let previousHandler: CrashHandler | null = null;

/** While any driver is open: the crash handler and the timer tracking are installed. */
export function retainInstanceHooks(): void {
  if (users++ > 0) return;
  previousHandler = setCrashHandler(onCrashPoint);
  timerHook.enable();
}

export function releaseInstanceHooks(): void {
  if (--users > 0) return;
  setCrashHandler(previousHandler);
  previousHandler = null;
  timerHook.disable();
  timerOwners.clear();
}

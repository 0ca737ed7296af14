/**
 * One health state per runner (docs/design-streams-redesign.md, "Health"),
 * and the /healthz answer over all runners of a process: 200 with
 * `{ stages, fused }` while every runner is healthy; 503 with `unhealthy`
 * naming each runner that is `stalled`, `fenced`, `stopped_by_policy` or
 * `failed`, since when, why, and on which partitions.
 *
 * The runner reports what happens (a restore begins, a task is fenced, a
 * partition is stopped); the state is derived from those facts when asked,
 * so a fenced task that is rebuilt in time never shows as unhealthy.
 */
export type HealthState = 'starting' | 'restoring' | 'running' | 'rebuilding' | 'stalled' | 'fenced' | 'stopped_by_policy' | 'failed' | 'stopping';

export const UNHEALTHY_STATES: ReadonlySet<HealthState> = new Set(['stalled', 'fenced', 'stopped_by_policy', 'failed']);

export interface RunnerHealth {
  runner: string;
  state: HealthState;
  /** When the runner entered this state (ISO 8601). */
  since: string;
  reason: string | null;
  partitions: number[];
}

interface Fact {
  since: number;
  reason: string;
}

export class HealthTracker {
  private phase: 'starting' | 'running' | 'stopping' = 'starting';
  private restoringSince: number | null = null;
  private failed: Fact | null = null;
  private stalled: (Fact & { partitions: number[] }) | null = null;
  private readonly rebuildingParts = new Map<number, Fact>();
  private readonly fenced = new Map<number, Fact>();
  private readonly stopped = new Map<number, Fact>();
  private last: { state: HealthState; since: number } = { state: 'starting', since: Date.now() };

  /**
   * @param runner name shown in /healthz (e.g. `accumulate+postprocess+pack`)
   * @param fencedGraceMs a task fenced for longer than this without being rebuilt is `fenced` (runtime.stall_warn_ms)
   */
  constructor(
    readonly runner: string,
    private readonly fencedGraceMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  started(): void {
    if (this.phase === 'starting') this.phase = 'running';
  }

  stopping(): void {
    this.phase = 'stopping';
  }

  restoring(on: boolean): void {
    this.restoringSince = on ? (this.restoringSince ?? this.now()) : null;
  }

  /** A partition's task failed and is being rebuilt; `fenced`: because a newer producer owns its id. */
  rebuilding(partition: number, reason: string, fenced: boolean): void {
    if (!this.rebuildingParts.has(partition)) this.rebuildingParts.set(partition, { since: this.now(), reason });
    if (fenced && !this.fenced.has(partition)) this.fenced.set(partition, { since: this.now(), reason });
  }

  /** The partition's task is in place again (or the partition is no longer ours). */
  rebuilt(partition: number): void {
    this.rebuildingParts.delete(partition);
    this.fenced.delete(partition);
  }

  stoppedByPolicy(partition: number, reason: string): void {
    if (!this.stopped.has(partition)) this.stopped.set(partition, { since: this.now(), reason });
  }

  /** A partition left this instance: whatever was wrong with it is the next owner's to report. */
  released(partition: number): void {
    this.rebuilt(partition);
    this.stopped.delete(partition);
  }

  setStalled(reason: string | null, partitions: number[] = []): void {
    if (reason === null) this.stalled = null;
    else this.stalled = { since: this.stalled?.since ?? this.now(), reason, partitions };
  }

  fail(reason: string): void {
    this.failed ??= { since: this.now(), reason };
  }

  get isFailed(): boolean {
    return this.failed !== null;
  }

  /** The runner's state now, with since/reason/partitions of the fact that decides it. */
  snapshot(): RunnerHealth {
    const now = this.now();
    const at = (state: HealthState, since: number | null, reason: string | null = null, partitions: number[] = []): RunnerHealth => {
      if (this.last.state !== state) this.last = { state, since: since ?? now };
      return { runner: this.runner, state, since: new Date(since ?? this.last.since).toISOString(), reason, partitions };
    };
    const earliest = (m: Map<number, Fact>) => [...m.values()].reduce((a, f) => (f.since < a.since ? f : a));
    if (this.failed) return at('failed', this.failed.since, this.failed.reason);
    if (this.stopped.size > 0) {
      const f = earliest(this.stopped);
      return at('stopped_by_policy', f.since, f.reason, [...this.stopped.keys()].sort((a, b) => a - b));
    }
    const lateFenced = [...this.fenced].filter(([, f]) => now - f.since > this.fencedGraceMs);
    if (lateFenced.length > 0) {
      const f = lateFenced.map(([, x]) => x).reduce((a, x) => (x.since < a.since ? x : a));
      return at('fenced', f.since, f.reason, lateFenced.map(([p]) => p).sort((a, b) => a - b));
    }
    if (this.stalled) return at('stalled', this.stalled.since, this.stalled.reason, this.stalled.partitions);
    if (this.phase === 'stopping') return at('stopping', null);
    if (this.phase === 'starting') return at('starting', null);
    if (this.restoringSince !== null) return at('restoring', this.restoringSince);
    if (this.rebuildingParts.size > 0) {
      const f = earliest(this.rebuildingParts);
      return at('rebuilding', f.since, f.reason, [...this.rebuildingParts.keys()].sort((a, b) => a - b));
    }
    return at('running', null);
  }
}

/**
 * The /healthz answer: `ok` unless some runner is in an unhealthy state;
 * the body is `base` (`{ stages, fused }`) when healthy, plus `unhealthy`
 * when not.
 */
export function healthReport<B extends object>(runners: RunnerHealth[], base: B): { ok: boolean; detail: B | (B & { unhealthy: RunnerHealth[] }) } {
  const unhealthy = runners.filter((r) => UNHEALTHY_STATES.has(r.state));
  return unhealthy.length === 0 ? { ok: true, detail: base } : { ok: false, detail: { ...base, unhealthy } };
}

/**
 * The /readyz answer: ready once every runner has joined its group and is
 * `running` (not starting, restoring state, rebuilding a task or stopping),
 * so a probe sees an instance that has its partitions and their state.
 */
export function readinessReport(runners: RunnerHealth[]): { ok: boolean; detail: { ready: boolean; runners: Array<Pick<RunnerHealth, 'runner' | 'state' | 'since'>> } } {
  const ok = runners.length > 0 && runners.every((r) => r.state === 'running');
  return { ok, detail: { ready: ok, runners: runners.map(({ runner, state, since }) => ({ runner, state, since })) } };
}

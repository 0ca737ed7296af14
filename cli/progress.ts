/**
 * Progress display for long-running commands (loadgen, replay): a redrawn
 * bar on a terminal, plain periodic lines otherwise (logs, CI, pipes).
 * Everything goes to stderr so stdout stays data. The formatting helpers
 * are pure; the reporter takes its clock and writer as arguments.
 */

/** `1234` → `"1.2 kB"`, decimal units (what network throughput is quoted in). */
export function formatBytes(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let v = bytes;
  let i = 0;
  while (Math.abs(v) >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : 1)} ${units[i]}`;
}

/** Seconds as `m:ss` or `h:mm:ss`; `--:--` when unknown (NaN, infinite, negative). */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '--:--';
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** A count per second with sensible precision: `0.5`, `12.3`, `850`, `12.0k`. */
export function formatRate(perSecond: number): string {
  if (!Number.isFinite(perSecond)) return '-';
  if (perSecond >= 10_000) return `${(perSecond / 1000).toFixed(1)}k`;
  if (perSecond >= 100) return perSecond.toFixed(0);
  return perSecond.toFixed(1);
}

/** `[#####-----]` for a fraction in [0, 1] (clamped), `width` characters between the brackets. */
export function renderBar(fraction: number, width = 24): string {
  const f = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0;
  const filled = Math.round(f * width);
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
}

export interface ProgressSnapshot {
  /** Units done so far (rows, records). */
  done: number;
  /** Expected total, or null when unknown (no bar, no ETA). */
  total: number | null;
  bytes: number;
  elapsedMs: number;
}

/** Rate and ETA of a snapshot: units/s, bytes/s, seconds left (NaN when unknown). */
export function progressRates(p: ProgressSnapshot): { perSecond: number; bytesPerSecond: number; etaSeconds: number } {
  const secs = p.elapsedMs / 1000;
  const perSecond = secs > 0 ? p.done / secs : 0;
  const left = p.total === null ? Number.NaN : Math.max(0, p.total - p.done);
  return { perSecond, bytesPerSecond: secs > 0 ? p.bytes / secs : 0, etaSeconds: perSecond > 0 ? left / perSecond : Number.NaN };
}

/**
 * One progress line. `tty`: `[####----]  45% 1234/2740 rows  12.3 MB  850 rows/s  ETA 0:02`;
 * plain: `1234/2740 rows (45%), 12.3 MB, 850 rows/s, 0:01 elapsed, ETA 0:02`.
 */
export function formatProgress(p: ProgressSnapshot, unit: string, tty: boolean): string {
  const { perSecond, etaSeconds } = progressRates(p);
  const count = p.total === null ? `${p.done} ${unit}` : `${p.done}/${p.total} ${unit}`;
  const pct = p.total === null || p.total === 0 ? null : Math.min(100, Math.floor((100 * p.done) / p.total));
  const rate = `${formatRate(perSecond)} ${unit}/s`;
  if (tty) {
    const bar = pct === null ? '' : `${renderBar(pct / 100)} ${String(pct).padStart(3)}% `;
    const eta = p.total === null ? '' : `  ETA ${formatDuration(etaSeconds)}`;
    return `${bar}${count}  ${formatBytes(p.bytes)}  ${rate}${eta}`;
  }
  const parts = [pct === null ? count : `${count} (${pct}%)`, formatBytes(p.bytes), rate, `${formatDuration(p.elapsedMs / 1000)} elapsed`];
  if (p.total !== null) parts.push(`ETA ${formatDuration(etaSeconds)}`);
  return parts.join(', ');
}

export interface ProgressReporterOptions {
  unit: string;
  total: number | null;
  tty: boolean;
  write: (text: string) => void;
  /** Label in front of plain lines, e.g. `loadgen`. */
  label: string;
  now?: () => number;
  /** Minimum gap between redraws (tty, default 100 ms) or lines (plain, default 2000 ms). */
  intervalMs?: number;
}

/** Throttled progress output: a redrawn line on a terminal, periodic plain lines otherwise. */
export class ProgressReporter {
  private readonly now: () => number;
  private readonly started: number;
  private readonly interval: number;
  private last = Number.NEGATIVE_INFINITY;
  private drawn = false;

  constructor(private readonly o: ProgressReporterOptions) {
    this.now = o.now ?? Date.now;
    this.started = this.now();
    this.interval = o.intervalMs ?? (o.tty ? 100 : 2000);
  }

  elapsedMs(): number {
    return this.now() - this.started;
  }

  /** Reports `done`/`bytes` if the interval has passed since the last output. */
  update(done: number, bytes: number): void {
    const t = this.now();
    if (t - this.last < this.interval) return;
    this.last = t;
    this.emit(done, bytes);
  }

  /** Draws the final state (and ends the redrawn line on a terminal). */
  finish(done: number, bytes: number): void {
    this.emit(done, bytes);
    if (this.o.tty && this.drawn) this.o.write('\n');
  }

  private emit(done: number, bytes: number): void {
    const line = formatProgress({ done, total: this.o.total, bytes, elapsedMs: this.elapsedMs() }, this.o.unit, this.o.tty);
    if (this.o.tty) {
      this.o.write(`\r\x1b[K${this.o.label}: ${line}`);
      this.drawn = true;
    } else {
      this.o.write(`${this.o.label}: ${line}\n`);
    }
  }
}

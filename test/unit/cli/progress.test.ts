import { describe, expect, test } from 'vitest';
import { formatBytes, formatDuration, formatProgress, formatRate, progressRates, ProgressReporter, renderBar } from '../../../cli/progress.js';

describe('progress formatting', () => {
  test('bytes use decimal units with one decimal below 100', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(999)).toBe('999 B');
    expect(formatBytes(1234)).toBe('1.2 kB');
    expect(formatBytes(12_345_678)).toBe('12.3 MB');
    expect(formatBytes(456_000_000)).toBe('456 MB');
    expect(formatBytes(2.5e12)).toBe('2.5 TB');
  });

  test('durations read as m:ss or h:mm:ss, unknown as --:--', () => {
    expect(formatDuration(0)).toBe('0:00');
    expect(formatDuration(5.4)).toBe('0:05');
    expect(formatDuration(62)).toBe('1:02');
    expect(formatDuration(3723)).toBe('1:02:03');
    expect(formatDuration(Number.NaN)).toBe('--:--');
    expect(formatDuration(Number.POSITIVE_INFINITY)).toBe('--:--');
    expect(formatDuration(-1)).toBe('--:--');
  });

  test('rates keep a sensible precision', () => {
    expect(formatRate(0.5)).toBe('0.5');
    expect(formatRate(12.34)).toBe('12.3');
    expect(formatRate(850.2)).toBe('850');
    expect(formatRate(12_345)).toBe('12.3k');
  });

  test('the bar fills in proportion and clamps out-of-range fractions', () => {
    expect(renderBar(0, 10)).toBe('[----------]');
    expect(renderBar(0.5, 10)).toBe('[#####-----]');
    expect(renderBar(1, 10)).toBe('[##########]');
    expect(renderBar(7, 4)).toBe('[####]');
    expect(renderBar(Number.NaN, 4)).toBe('[----]');
  });

  test('rate and ETA follow from done, total and elapsed time', () => {
    const r = progressRates({ done: 500, total: 2000, bytes: 1_000_000, elapsedMs: 2000 });
    expect(r.perSecond).toBe(250);
    expect(r.bytesPerSecond).toBe(500_000);
    expect(r.etaSeconds).toBe(6);
    expect(progressRates({ done: 0, total: 10, bytes: 0, elapsedMs: 0 }).etaSeconds).toBeNaN();
    expect(progressRates({ done: 5, total: null, bytes: 0, elapsedMs: 1000 }).etaSeconds).toBeNaN();
  });

  test('a terminal line shows a bar, percent, counts, volume, rate and ETA', () => {
    const line = formatProgress({ done: 1234, total: 2740, bytes: 12_300_000, elapsedMs: 1452 }, 'rows', true);
    expect(line).toBe('[###########-------------]  45% 1234/2740 rows  12.3 MB  850 rows/s  ETA 0:02');
  });

  test('a plain line has no bar and says the elapsed time', () => {
    const line = formatProgress({ done: 1234, total: 2740, bytes: 12_300_000, elapsedMs: 1452 }, 'rows', false);
    expect(line).toBe('1234/2740 rows (45%), 12.3 MB, 850 rows/s, 0:01 elapsed, ETA 0:02');
    expect(formatProgress({ done: 7, total: null, bytes: 10, elapsedMs: 1000 }, 'records', false)).toBe('7 records, 10 B, 7.0 records/s, 0:01 elapsed');
  });

  test('the reporter writes plain lines at most once per interval and always at the end', () => {
    let now = 0;
    const out: string[] = [];
    const r = new ProgressReporter({ unit: 'rows', total: 100, tty: false, write: (t) => out.push(t), label: 'loadgen', now: () => now, intervalMs: 1000 });
    r.update(1, 10);
    now = 500;
    r.update(2, 20);
    now = 1000;
    r.update(50, 500);
    now = 1200;
    r.finish(100, 1000);
    expect(out).toHaveLength(3);
    expect(out.every((l) => l.startsWith('loadgen: ') && l.endsWith('\n'))).toBe(true);
    expect(out[2]).toContain('100/100 rows (100%)');
  });

  test('on a terminal the reporter redraws one line and ends it when finished', () => {
    let now = 0;
    const out: string[] = [];
    const r = new ProgressReporter({ unit: 'rows', total: 10, tty: true, write: (t) => out.push(t), label: 'loadgen', now: () => now });
    r.update(1, 1);
    now = 200;
    r.update(5, 5);
    r.finish(10, 10);
    expect(out.slice(0, 3).every((l) => l.startsWith('\r\x1b[K'))).toBe(true);
    expect(out[out.length - 1]).toBe('\n');
  });
});

/**
 * The benchmark commands still run end to end on the real broker and print
 * what bench/README.md documents (a smoke check of the harness, not a speed
 * test: no figure is asserted beyond being a positive number).
 */
import { describe, expect, test } from 'vitest';
import { launcher } from './launcher.js';

const number = (out: string, label: RegExp): number => {
  const m = label.exec(out);
  if (!m) throw new Error(`no ${label} in:\n${out}`);
  return Number(m[1]);
};

describe('benchmark commands', () => {
  test('bench e2e runs the load generator through every stage, every group arrives packed, and it prints rows/s, latency, RSS of each process and the ratio line', async () => {
    const run = await launcher(['bench', 'e2e', '--profile', 'small', '--batches', '2', '--groups', '2', '--generations', '4', '--rate', '200']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const out = run.stdout;
    expect(out).toMatch(/^profile\s+small \(4 groups × 4 rows; 4 packed\)$/m);
    expect(out).toMatch(/^stages\s+fused \(one transaction per batch\) × 1 instance\(s\); packed wire trainer$/m);
    expect(out).toMatch(/^latency \(batch 2\+\) p50 \d+ ms, p90 \d+ ms, p99 \d+ ms, max \d+ ms \(2 groups after the first batch\)$/m);
    expect(number(out, /^rows\/s\s+([\d.]+)$/m)).toBeGreaterThan(0);
    expect(out).toMatch(/^latency\s+p50 \d+ ms, p90 \d+ ms, p99 \d+ ms, max \d+ ms/m);
    expect(out).toMatch(/^tx phases \(mean ms\) accumulate send [\d.]+, send_offsets [\d.]+ · postprocess process [\d.]+, send [\d.]+, send_offsets [\d.]+ · pack process [\d.]+, send [\d.]+, send_offsets [\d.]+ · accumulate\+postprocess\+pack commit [\d.]+ \(\d+\)/m);
    expect(out).toMatch(/^RSS peak\s+stages\[0\] accumulate,postprocess,pack \d+ MiB; bench \d+ MiB/m);
    expect(number(out, /^broker raw\s+([\d.]+) MB\/s/m)).toBeGreaterThan(0);
    const lines = out.trim().split('\n');
    expect(lines[lines.length - 1]).toMatch(/^ratio e2e\/raw: \d+\.\d{3}$/);
    expect(out).not.toMatch(/dead letters/);
  });

  test('bench tx times a stage transaction against a plain send and ends with the ratio line', async () => {
    const run = await launcher(['bench', 'tx', '--steps', '20', '--record-bytes', '1000']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    for (const phase of ['plain', 'begin', 'send', 'sendOffsets', 'commit', 'tx']) {
      expect(run.stdout).toMatch(new RegExp(`^${phase}\\s+[\\d.]+\\s+[\\d.]+\\s+[\\d.]+$`, 'm'));
    }
    const lines = run.stdout.trim().split('\n');
    expect(lines[lines.length - 1]).toMatch(/^ratio tx\/plain: \d+\.\d{2}$/);
  });

  test('bench e2e refuses a soak without a rate, naming the flag', async () => {
    const run = await launcher(['bench', 'e2e', '--duration', '30']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--duration needs --rate/);
  });
});

/**
 * The benchmark commands still run end to end on the real broker and print
 * what bench/README.md documents (a smoke check of the harness, not a speed
 * test: no figure is asserted beyond being a positive number).
 */
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../../config/load.js';
import { createKafka } from '../../streams/kafka/kafkajs/client.js';
import { launcher } from './launcher.js';

const number = (out: string, label: RegExp): number => {
  const m = label.exec(out);
  if (!m) throw new Error(`no ${label} in:\n${out}`);
  return Number(m[1]);
};

describe('benchmark commands', () => {
  test('bench e2e runs the load generator through every stage, every group arrives packed, and it prints rows/s, latency, RSS of each process, the ratio lines and the write amplification', async () => {
    const run = await launcher(['bench', 'e2e', '--profile', 'small', '--batches', '2', '--groups', '2', '--generations', '4', '--rate', '200']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const out = run.stdout;
    expect(out).toMatch(/^profile\s+small \(4 groups × 4 rows; 4 packed\)$/m);
    expect(out).toMatch(/^stages\s+fused \(one transaction per batch\) × 1 instance\(s\); packed wire trainer$/m);
    expect(out).toMatch(/^intermediate\s+reference \(runtime\.intermediate_records\); packed topic compression zstd; record limit \d+ \(kafka\.max_message_bytes\)$/m);
    expect(out).toMatch(/^latency \(batch 2\+\) p50 \d+ ms, p90 \d+ ms, p99 \d+ ms, max \d+ ms \(2 groups after the first batch\)$/m);
    expect(number(out, /^rows\/s\s+([\d.]+)$/m)).toBeGreaterThan(0);
    expect(out).toMatch(/^latency\s+p50 \d+ ms, p90 \d+ ms, p99 \d+ ms, max \d+ ms/m);
    expect(out).toMatch(/^tx phases \(mean ms\) accumulate send [\d.]+, send_offsets [\d.]+ · postprocess process [\d.]+, send [\d.]+, send_offsets [\d.]+ · pack process [\d.]+, send [\d.]+, send_offsets [\d.]+ · accumulate\+postprocess\+pack commit [\d.]+ \(\d+\)/m);
    expect(out).toMatch(/^RSS peak\s+stages\[0\] accumulate,postprocess,pack \d+ MiB; bench \d+ MiB/m);
    expect(number(out, /^broker raw\s+([\d.]+) MB\/s/m)).toBeGreaterThan(0);
    const lines = out.trim().split('\n');
    expect(lines.slice(-4)).toEqual([
      expect.stringMatching(/^ratio e2e\/raw: (\d+\.\d{3}|0\.000\d{3})$/),
      expect.stringMatching(/^bytes by topic /),
      expect.stringMatching(/^write amplification: \d+\.\d{2}$/),
      expect.stringMatching(/^ratio rows\/raw: (\d+\.\d{3}|0\.000\d{3})$/),
    ]);
    // Every row is written at least once (row-completed); the rest is what the pipeline adds.
    const amplification = number(out, /^write amplification: (\d+\.\d{2})$/m);
    expect(Number.isFinite(amplification) && amplification >= 1, `write amplification ${amplification}`).toBe(true);
    const ratio = number(out, /^ratio rows\/raw: (\d+\.\d+)$/m);
    expect(Number.isFinite(ratio) && ratio > 0, `ratio rows/raw ${ratio}`).toBe(true);
    expect(number(out, /^bytes by topic\s+row-completed [\d.]+ MB \((\d+\.\d{2})×\)( · [\w.-]+ [\d.]+ MB \(\d+\.\d{2}×\))+$/m)).toBeGreaterThanOrEqual(1);
    expect(out).toMatch(/^bytes by topic .* · packed [\d.]+ MB/m);
    expect(out).not.toMatch(/dead letters/);
  });

  test('bench e2e --max-record-bytes creates the run\'s topics at that limit: rows and packed groups above it travel as chunk sets and every group arrives packed', async () => {
    const run = await launcher(['bench', 'e2e', '--profile', 'small', '--batches', '2', '--groups', '2', '--generations', '4', '--rate', '200', '--max-record-bytes', '2KiB']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const out = run.stdout;
    expect(out).toMatch(/^intermediate\s+.*; record limit 2048 \(--max-record-bytes; larger records as chunk sets\)$/m);
    expect(number(out, /^rows\/s\s+([\d.]+)$/m)).toBeGreaterThan(0);
    // The small profile's rows (~1.9 kB) are over 2 KiB with their headers: row-completed carries them as chunk sets, more bytes than the rows.
    expect(number(out, /^bytes by topic\s+row-completed [\d.]+ MB \((\d+\.\d{2})×\)/m)).toBeGreaterThan(1.1);
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

  test('bench e2e --format gym-result sends NeMo-Gym results, accumulate converts every one, every group arrives packed, and the ratio counts row bytes', async () => {
    const run = await launcher(['bench', 'e2e', '--profile', 'small', '--batches', '2', '--groups', '2', '--generations', '4', '--rate', '200', '--format', 'gym-result']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const out = run.stdout;
    expect(out).toMatch(/^profile\s+small \(4 groups × 4 rows; 4 packed\)$/m);
    expect(out).toMatch(/^input\s+GymResults \(--format gym-result\): 16 sent, converted back to rows by accumulate$/m);
    expect(out).toMatch(/^MB\/s \(row bytes\)\s+[\d.]+$/m);
    // A GymResult carries each turn's whole prompt again, and its numbers as JSON text: it outweighs its row.
    expect(number(out, /^MB\/s \(GymResults\)\s+[\d.]+ \(([\d.]+)× the row bytes\)$/m)).toBeGreaterThan(1);
    expect(number(out, /^rows\/s\s+([\d.]+)$/m)).toBeGreaterThan(0);
    expect(number(out, /^stage CPU\s+([\d.]+) ms\/row \([\d.]+ s user\+system of the stage process\(es\) while measuring\); this process \(producer, readers\) [\d.]+ ms\/row(; broker \(JVM\) [\d.]+ ms\/row)?$/m)).toBeGreaterThan(0);
    expect(out).toMatch(/^ratio e2e\/raw: (\d+\.\d{3}|0\.000\d{3})$/m);
    expect(number(out, /^write amplification: (\d+\.\d{2})$/m)).toBeGreaterThanOrEqual(1);
    const lines = out.trim().split('\n');
    expect(lines[lines.length - 1]).toMatch(/^ratio rows\/raw: (\d+\.\d{3}|0\.000\d{3})$/);
    expect(out).not.toMatch(/dead letters/);
  });

  test('bench ingest prints each pair and the median of both ratios per profile, exits 0 and deletes its scratch topics', async () => {
    const run = await launcher(['bench', 'ingest', '--rows', '4', '--repeat', '2']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const sections = run.stdout.trim().split(/^(?=profile )/m);
    expect(sections.map((s) => /^profile\s+([\w-]+):/.exec(s)?.[1])).toEqual(['published-max', 'router-replay']);
    for (const section of sections) {
      expect(section).toMatch(/^profile\s+[\w-]+: 4 GymResults \(1 group × 16, seed 1\); JSON text [\d.]+ MB \(mean \d+ kB, max \d+ kB\)$/m);
      for (const pair of [1, 2]) {
        expect(section).toMatch(new RegExp(`^convert pair ${pair}\\s+parse [\\d.]+ µs/row \\([\\d.]+ MB/s of JSON\\), ingest [\\d.]+ µs/row: ratio \\d+\\.\\d{3}$`, 'm'));
        expect(section).toMatch(
          new RegExp(`^publish pair ${pair}\\s+raw [\\d.]+ rows/s [\\d.]+ MB/s \\(cpu [\\d.]+ ms/MB\\), publisher [\\d.]+ rows/s [\\d.]+ MB/s \\(cpu [\\d.]+ ms/MB\\): ratio \\d+\\.\\d{3}$`, 'm'),
        );
      }
      expect(section).not.toMatch(/pair 3/);
      expect(section).toMatch(/^convert median\s+parse [\d.]+ µs\/row, ingest [\d.]+ µs\/row over 2 pairs/m);
      const median = /^publish median\s+raw .* over 2 pairs .* \((\d+) records incl\. (\d+) BatchEnds\), (\d+) partitions, acks=-1, idempotent/m.exec(section);
      expect(median, section).not.toBeNull();
      // The 4 GymResults and one BatchEnd per partition.
      expect([Number(median![1]), Number(median![2])]).toEqual([4 + Number(median![3]), Number(median![3])]);
      expect(number(section, /^ratio ingest\/parse: (\d+\.\d{3})$/m)).toBeGreaterThan(0);
      expect(number(section, /^ratio publish\/raw: (\d+\.\d{3})$/m)).toBeGreaterThan(0);
    }
    // The scratch topics it named on stderr are gone.
    const topics = [...run.stderr.matchAll(/publishing to (\S+rollout\.row-completed)/g)].map((m) => m[1]!);
    expect(topics).toHaveLength(2);
    const admin = createKafka(loadConfig({}).config.kafka, 'test-bench-smoke').admin();
    await admin.connect();
    try {
      const left = new Set(await admin.listTopics());
      expect(topics.filter((t) => left.has(t))).toEqual([]);
    } finally {
      await admin.disconnect();
    }
  });

  test('bench ingest --no-publish measures the conversion only, and an unknown profile is refused naming the flag', async () => {
    const run = await launcher(['bench', 'ingest', '--profile', 'published-max', '--rows', '4', '--repeat', '1', '--no-publish']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/^ratio ingest\/parse: \d+\.\d{3}$/m);
    expect(run.stdout).toMatch(/^publish\s+skipped \(--no-publish\)$/m);
    expect(run.stdout).not.toMatch(/ratio publish\/raw/);
    const bad = await launcher(['bench', 'ingest', '--profile', 'default']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--profile must be published-max or router-replay, got default/);
  });

  test('bench e2e refuses a soak without a rate, and an unknown --intermediate, naming the flag', async () => {
    const run = await launcher(['bench', 'e2e', '--duration', '30']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--duration needs --rate/);
    const bad = await launcher(['bench', 'e2e', '--intermediate', 'none']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--intermediate must be reference or full, got none/);
  });
});

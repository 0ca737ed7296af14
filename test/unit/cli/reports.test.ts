import { describe, expect, test } from 'vitest';
import { UsageError } from '../../../tools/command.js';
import { formatDemoSummary, stageCounts } from '../../../cli/demo-summary.js';
import { percentile } from '../../../tools/percentile.js';
import { parseDemoArgs } from '../../../cli/demo.js';
import { captureIo } from '../../../cli/io.js';
import { formatLoadgenSummary, parseLoadgenArgs, runLoadgen } from '../../../cli/loadgen.js';
import { compareMetrics, formatRerunReport } from '../../../cli/rerun-postprocess.js';
import { formatTable } from '../../../cli/table.js';
import { stageLatencies, type TraceRecord } from '../../../cli/trace.js';
import { loadConfig } from '../../../config/load.js';
import { generateEvents } from '../../../loadgen/index.js';
import { formatJsonLine } from '../../../json-form/form.js';

describe('latency and stage summaries', () => {
  test('percentiles take the sorted value at floor(len*p/100), capped at the last', () => {
    expect(percentile([5, 1, 4, 2, 3], 50)).toBe(3);
    expect(percentile([5, 1, 4, 2, 3], 99)).toBe(5);
    expect(percentile([10], 50)).toBe(10);
    expect(percentile([], 50)).toBeNaN();
    expect(percentile(Array.from({ length: 100 }, (_, i) => i + 1), 99)).toBe(100);
  });

  test('stage counts come from the runtime counters with the topic prefix stripped', () => {
    const counts = stageCounts(
      [
        { name: 'rollout_stream_records_in_total', values: [{ labels: { stage: 'pack' }, value: 4 }, { labels: { stage: 'accumulate' }, value: 20 }] },
        {
          name: 'rollout_stream_records_out_total',
          values: [
            { labels: { stage: 'accumulate', topic: 'p.rollout.group-complete' }, value: 4 },
            { labels: { stage: 'pack', topic: 'p.rollout.packed' }, value: 4 },
          ],
        },
        { name: 'rollout_stream_dead_letters_total', values: [{ labels: { stage: 'accumulate', reason: 'nan_logprobs' }, value: 2 }] },
      ],
      'p.',
    );
    expect(counts).toEqual([
      { stage: 'accumulate', recordsIn: 20, out: { 'rollout.group-complete': 4 }, deadLetters: 2 },
      { stage: 'pack', recordsIn: 4, out: { 'rollout.packed': 4 }, deadLetters: 0 },
    ]);
  });

  test('the demo summary reports throughput and p50/p99 latency', () => {
    const text = formatDemoSummary({
      prefix: 'demo.x.',
      profile: 'small',
      batches: 1,
      groups: 2,
      generations: 4,
      rowsProduced: 8,
      garbageProduced: 0,
      bytesProduced: 8000,
      stages: [],
      deadLetters: new Map([['nan_logprobs', [1, 1]]]),
      replays: [2, 2],
      groupsPacked: 2,
      groupsExpected: 2,
      latenciesMs: [100, 300],
      elapsedMs: 2000,
      totalMs: 5000,
    });
    expect(text).toContain('2 of 2 expected groups');
    expect(text).toContain('4.0 rows/s');
    expect(text).toContain('p50 300 ms, p99 300 ms');
    expect(text).toMatch(/nan_logprobs\s+1\s+1/);
    expect(text).toContain('2 identical rows dropped silently (expected 2)');
  });

  test('stage latencies run from the last row to the first record of each later stage', () => {
    const rec = (role: TraceRecord['role'], timestamp: number): TraceRecord => ({ topic: role, role, partition: 0, offset: '0', timestamp, size: 1, what: '' });
    expect(stageLatencies([rec('rowCompleted', 100), rec('rowCompleted', 250), rec('groupComplete', 300), rec('penalized', 330), rec('packed', 400), rec('packed', 900)])).toEqual({
      accumulateMs: 50,
      postprocessMs: 30,
      packMs: 70,
      totalMs: 150,
    });
    expect(stageLatencies([rec('rowCompleted', 1), rec('deadLetter', 5)])).toEqual({ accumulateMs: null, postprocessMs: null, packMs: null, totalMs: null });
  });
});

describe('re-run comparison', () => {
  test('only metrics that changed somewhere are reported, with means over the groups that have them', () => {
    const before: Record<string, Record<string, number>> = { a: { x: 1, y: 2 }, b: { x: 3, y: 2 } };
    const after: Record<string, Record<string, number>> = { a: { x: 1, y: 0, unwanted_token_rate: 0.5 }, b: { x: 3, y: 2, unwanted_token_rate: 0 } };
    expect(compareMetrics(['a', 'b'], (id) => before[id]!, (id) => after[id]!)).toEqual([
      { name: 'unwanted_token_rate', groupsChanged: 2, meanBefore: null, meanAfter: 0.25 },
      { name: 'y', groupsChanged: 1, meanBefore: 2, meanAfter: 1 },
    ]);
  });

  test('the report marks changed rewards and counts them', () => {
    const text = formatRerunReport(
      {
        sandboxPrefix: 's.',
        groups: 1,
        penalized: 1,
        deadLetters: [],
        rewards: [
          { group_id: 'g', row_index: 0, before: 1, after: 0 },
          { group_id: 'g', row_index: 1, before: 0.5, after: 0.5 },
        ],
        metrics: [],
      },
      'p.',
    );
    expect(text).toContain('1 of 2 rewards changed');
    expect(text.split('\n').filter((l) => l.endsWith('changed') && l.startsWith('g '))).toHaveLength(1);
  });

  test('tables align columns under a dashed rule', () => {
    expect(formatTable(['a', 'num'], [['xx', 1], ['y', 22]], [1])).toBe('a   num\n--  ---\nxx    1\ny    22\n');
  });
});

describe('loadgen and demo arguments', () => {
  test('sizes default to the profile and a dry run gets a reproducible run id', () => {
    const a = parseLoadgenArgs(['--profile', 'small', '--dry-run']);
    expect(a.options).toMatchObject({ batches: 3, groupsPerBatch: 4, generations: 4, seed: 1, runId: 'lg1', profile: 'small' });
    expect(a.rate).toBeNull();
    const live = parseLoadgenArgs(['--seed', '9', '--rate', '50'], () => 'abc');
    expect(live.options.runId).toBe('lg9-abc');
    expect(live.options.rowsPerSecond).toBe(50);
  });

  test('bad sizes, rates, profiles and fault specs are refused before anything runs', () => {
    expect(() => parseLoadgenArgs(['--groups', '0'])).toThrow(UsageError);
    expect(() => parseLoadgenArgs(['--rate', '-1'])).toThrow(/--rate/);
    expect(() => parseLoadgenArgs(['--profile', 'huge'])).toThrow(/--profile/);
    expect(() => parseLoadgenArgs(['--faults', 'dup=2'])).toThrow(/faults\.dup/);
    expect(() => parseDemoArgs(['--batches', 'x'])).toThrow(/--batches/);
    expect(parseDemoArgs(['--batches', '1', '--groups', '4', '--keep'])).toMatchObject({ batches: 1, groups: 4, keep: true, generations: 4 });
  });

  test('a dry run writes the generated rows and batch ends as JSON lines and counts garbage it cannot write', async () => {
    const args = parseLoadgenArgs(['--profile', 'small', '--batches', '2', '--groups', '3', '--faults', 'garbage=0.2,nan=0.1', '--seed', '4', '--dry-run', '--quiet']);
    const io = captureIo();
    const { config } = loadConfig({ file: undefined });
    const summary = await runLoadgen(args, config, io);
    const want = [...generateEvents(args.options)]
      .filter((e) => e.kind !== 'garbage')
      .map((e) => (e.kind === 'row' ? formatJsonLine({ kind: 'row', record: e.row }) : formatJsonLine({ kind: 'batch_end', end: e.end })));
    expect(io.lines()).toEqual(want);
    expect(summary.batchEnds).toBe(2);
    expect(summary.garbage).toBeGreaterThan(0);
    expect(summary.faults.garbage).toBe(summary.garbage);
    expect(io.stderr()).toBe('');
    const text = formatLoadgenSummary(summary);
    expect(text).toContain(`rows        ${summary.rows}`);
    expect(text).toContain('dry run');
    expect(text).toContain(`garbage=${summary.faults.garbage}`);
  });
});

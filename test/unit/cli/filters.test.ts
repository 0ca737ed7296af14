import { describe, expect, test } from 'vitest';
import { UsageError } from '../../../tools/command.js';
import { checkUnambiguous, parseDlqArgs, parseOffsets, selectDeadLetters, type DlqEntry } from '../../../cli/dlq.js';
import { parseReplayArgs, parseTime } from '../../../cli/replay.js';
import { matchesFilter, recordIdentity, recordJsonLine, resolveTopic, skipByKey } from '../../../cli/topic-records.js';
import { parseJsonLine } from '../../../json-form/form.js';
import { sampleDeadLetter, sampleGroup, sampleMetrics, samplePacked, samplePenalized, sampleRow } from '../../fixtures/records.js';

describe('topic arguments', () => {
  test('a base name resolves under the configured prefix', () => {
    expect(resolveTopic('rollout.packed', 'prod.')).toEqual({ topic: 'prod.rollout.packed', role: 'packed', prefix: 'prod.' });
  });

  test('a full name is taken as is and its prefix derived', () => {
    expect(resolveTopic('sandbox.x.rollout.dead-letter', 'prod.')).toEqual({ topic: 'sandbox.x.rollout.dead-letter', role: 'deadLetter', prefix: 'sandbox.x.' });
    expect(resolveTopic('rollout.row-completed', '')).toEqual({ topic: 'rollout.row-completed', role: 'rowCompleted', prefix: '' });
  });

  test('a topic that is not one of ours is a usage error', () => {
    expect(() => resolveTopic('orders', '')).toThrow(UsageError);
    expect(() => resolveTopic('x.rollout-stream.accumulate-changelog', '')).toThrow(/not one of ours/);
  });
});

describe('record filters', () => {
  const row = { role: 'rowCompleted' as const, value: { kind: 'row' as const, row: sampleRow(1) } };
  const end = { role: 'rowCompleted' as const, value: { kind: 'batch_end' as const, end: { batch_id: 'b1', num_rows: 8 } } };

  test('every record kind names its group and batch; a BatchEnd has no group', () => {
    expect(recordIdentity(row)).toEqual({ group_id: 'g-1', batch_id: 'b1' });
    expect(recordIdentity(end)).toEqual({ group_id: null, batch_id: 'b1' });
    const group = sampleGroup();
    expect(recordIdentity({ role: 'groupComplete', value: group })).toEqual({ group_id: group.group_id, batch_id: group.batch_id });
    const metrics = sampleMetrics();
    expect(recordIdentity({ role: 'metrics', value: metrics })).toEqual({ group_id: metrics.group_id, batch_id: metrics.batch_id });
    const dl = sampleDeadLetter();
    expect(recordIdentity({ role: 'deadLetter', value: dl })).toEqual({ group_id: dl.group_id, batch_id: dl.batch_id });
  });

  test('a filter matches only its group and batch, and absent criteria match everything', () => {
    const id = { group_id: 'g-1', batch_id: 'b1' };
    expect(matchesFilter(id, {})).toBe(true);
    expect(matchesFilter(id, { groupId: 'g-1' })).toBe(true);
    expect(matchesFilter(id, { groupId: 'g-2' })).toBe(false);
    expect(matchesFilter(id, { batchId: 'b1', groupId: 'g-1' })).toBe(true);
    expect(matchesFilter(id, { batchId: 'b2' })).toBe(false);
    expect(matchesFilter({ group_id: null, batch_id: 'b1' }, { groupId: 'g-1' })).toBe(false);
  });

  test('records of another group are skipped by key, except on the metrics topic keyed by batch', () => {
    expect(skipByKey('packed', 'g-2', { groupId: 'g-1' })).toBe(true);
    expect(skipByKey('packed', 'g-1', { groupId: 'g-1' })).toBe(false);
    expect(skipByKey('metrics', 'b1', { groupId: 'g-1' })).toBe(false);
    expect(skipByKey('rowCompleted', 'b1', { batchId: 'b1' })).toBe(false);
  });

  test('each record kind prints as the JSON line of SPEC §9 that reads back', () => {
    expect(parseJsonLine(recordJsonLine(end))).toEqual({ kind: 'batch_end', end: { batch_id: 'b1', num_rows: 8 } });
    expect(parseJsonLine(recordJsonLine(row)).kind).toBe('row');
    expect(parseJsonLine(recordJsonLine({ role: 'groupComplete', value: sampleGroup() })).kind).toBe('group');
    expect(parseJsonLine(recordJsonLine({ role: 'penalized', value: samplePenalized() })).kind).toBe('penalized');
    expect(parseJsonLine(recordJsonLine({ role: 'packed', value: samplePacked() })).kind).toBe('packed');
    expect(parseJsonLine(recordJsonLine({ role: 'metrics', value: sampleMetrics() })).kind).toBe('metrics');
    const dl = sampleDeadLetter();
    const line = JSON.parse(recordJsonLine({ role: 'deadLetter', value: dl })) as { dead_letter: Record<string, unknown> };
    expect(line.dead_letter).toMatchObject({ reason: dl.reason, message: dl.message, group_id: dl.group_id, stage: dl.stage });
    expect((line.dead_letter.records as unknown[]).length).toBe(dl.records.length);
  });
});

describe('replay arguments', () => {
  test('the start is the beginning, an offset (negative: from the end) or a time', () => {
    expect(parseReplayArgs(['--topic', 'rollout.packed']).from).toEqual({ kind: 'beginning' });
    expect(parseReplayArgs(['--topic', 'rollout.packed', '--from-offset', '12']).from).toEqual({ kind: 'offset', offset: 12n });
    expect(parseReplayArgs(['--topic', 'rollout.packed', '--from-offset=-5']).from).toEqual({ kind: 'offset', offset: -5n });
    expect(parseReplayArgs(['--topic', 'rollout.packed', '--from-time', '2024-05-01T12:00:00Z']).from).toEqual({ kind: 'time', timeMs: Date.parse('2024-05-01T12:00:00Z') });
  });

  test('times are ISO-8601 or epoch milliseconds', () => {
    expect(parseTime('1700000000000')).toBe(1_700_000_000_000);
    expect(parseTime('2023-11-14T22:13:20.000Z')).toBe(1_700_000_000_000);
    expect(() => parseTime('yesterday')).toThrow(UsageError);
  });

  test('contradictory or incomplete flags are usage errors', () => {
    expect(() => parseReplayArgs([])).toThrow(/--topic is required/);
    expect(() => parseReplayArgs(['--topic', 'rollout.packed', '--from-offset', '1', '--from-time', '1'])).toThrow(/not both/);
    expect(() => parseReplayArgs(['--topic', 'rollout.packed', '--to-topic', 'x', '--to-prefix', 'y.'])).toThrow(/not both/);
    expect(() => parseReplayArgs(['--topic', 'rollout.packed', '--rerun-postprocess', '--sandbox-prefix', 's.'])).toThrow(/group-complete/);
    expect(() => parseReplayArgs(['--topic', 'rollout.group-complete', '--rerun-postprocess'])).toThrow(/--sandbox-prefix/);
    expect(() => parseReplayArgs(['--topic', 'rollout.packed', '--limit', '0'])).toThrow(/--limit/);
    expect(() => parseReplayArgs(['--topic', 'rollout.packed', '--from-offset', 'x'])).toThrow(/integer/);
  });

  test('destinations pick the mode', () => {
    expect(parseReplayArgs(['--topic', 'rollout.packed', '--to-prefix', 'copy.']).mode).toEqual({ kind: 'republish', toTopic: null, toPrefix: 'copy.' });
    expect(parseReplayArgs(['--topic', 'rollout.group-complete', '--rerun-postprocess', '--sandbox-prefix', 's.']).mode).toEqual({ kind: 'rerun', sandboxPrefix: 's.' });
    const a = parseReplayArgs(['--topic', 'rollout.packed', '--group', 'g', '--batch', 'b', '--limit', '3']);
    expect(a).toMatchObject({ mode: { kind: 'print' }, filter: { groupId: 'g', batchId: 'b' }, limit: 3 });
  });
});

describe('dead-letter selection', () => {
  const entry = (partition: number, offset: string, reason: string, group: string, stage = 'accumulate'): DlqEntry => ({
    partition,
    offset,
    timestamp: 0,
    record: { ...sampleDeadLetter(), reason: reason as DlqEntry['record']['reason'], group_id: group, stage, batch_id: 'b1' },
  });
  const entries = [entry(0, '3', 'nan_logprobs', 'g1'), entry(1, '3', 'undecodable', 'g2'), entry(1, '4', 'nan_logprobs', 'g3', 'postprocess')];

  test('offsets are bare or partition:offset pairs', () => {
    expect(parseOffsets('3, 1:4')).toEqual([
      { partition: null, offset: '3' },
      { partition: 1, offset: '4' },
    ]);
    expect(() => parseOffsets('1:x')).toThrow(UsageError);
  });

  test('reason, stage, group and offsets narrow the selection together', () => {
    expect(selectDeadLetters(entries, { reason: 'nan_logprobs' }).map((e) => e.record.group_id)).toEqual(['g1', 'g3']);
    expect(selectDeadLetters(entries, { reason: 'nan_logprobs', stage: 'postprocess' }).map((e) => e.record.group_id)).toEqual(['g3']);
    expect(selectDeadLetters(entries, { groupId: 'g2' })).toHaveLength(1);
    expect(selectDeadLetters(entries, { offsets: parseOffsets('1:3') }).map((e) => e.record.group_id)).toEqual(['g2']);
    expect(selectDeadLetters(entries, { offsets: parseOffsets('4') }).map((e) => e.record.group_id)).toEqual(['g3']);
    expect(selectDeadLetters(entries, {})).toHaveLength(3);
  });

  test('a bare offset present on two partitions is refused as ambiguous', () => {
    const s = { offsets: parseOffsets('3') };
    expect(() => checkUnambiguous(selectDeadLetters(entries, s), s)).toThrow(/partition:offset/);
  });

  test('redrive without a selection needs --all', () => {
    expect(() => parseDlqArgs(['redrive'])).toThrow(/--all/);
    expect(parseDlqArgs(['redrive', '--all']).all).toBe(true);
    expect(parseDlqArgs(['redrive', '--reason', 'nan_logprobs', '--dry-run'])).toMatchObject({ sub: 'redrive', dryRun: true, selector: { reason: 'nan_logprobs' } });
    expect(() => parseDlqArgs(['purge'])).toThrow(/list' or 'redrive/);
  });
});

import { describe, expect, test } from 'vitest';
import {
  collectExpectations,
  FAULT_KINDS,
  generateEvents,
  parseFaultSpec,
  summarizeEvents,
  type ExpectedOutcome,
  type FaultKind,
  type LoadgenEvent,
  type LoadgenOptions,
} from '../../../loadgen/index.js';
import type { RolloutRow } from '../../../processors/types.js';
import { fingerprint, SpecAccumulator, type ModelDeadLetter } from './spec-accumulator.js';

const RATES = 'dup=0.04,conflict=0.04,out_of_range=0.04,nan=0.04,missing=0.04,garbage=0.04,mixed_agents=0.12,task_mismatch=0.12';
const BASE: LoadgenOptions = { batches: 24, groupsPerBatch: 16, generations: 8, seed: 11, profile: 'small' };
const RUN: LoadgenOptions = { ...BASE, faults: parseFaultSpec(RATES) };
const events = [...generateEvents(RUN)];
/** The same run without faults, by `group_id/row_index`. */
const cleanRows = new Map<string, RolloutRow>();
for (const ev of generateEvents(BASE)) if (ev.kind === 'row') cleanRows.set(`${ev.row.group_id}/${ev.row.row_index}`, ev.row);

const REASON: Record<FaultKind, string | null> = {
  dup: null,
  conflict: 'duplicate_row_index',
  out_of_range: 'row_index_out_of_range',
  nan: 'nan_logprobs',
  missing: 'incomplete_group',
  garbage: 'undecodable',
  mixed_agents: 'mixed_agents',
  task_mismatch: 'task_index_mismatch',
};

/** Expectations and model dead letters in one comparable form. */
function key(d: ModelDeadLetter | ExpectedOutcome): string {
  if (d.row_indices !== undefined) {
    return `${d.reason}|${d.group_id}|rows=${d.row_indices.join(',')}|missing=${(d.missing_row_indices ?? []).join(',')}`;
  }
  if (d.reason === 'undecodable') return `${d.reason}|${d.group_id}`;
  return `${d.reason}|${d.group_id}|row=${d.row_index}`;
}

describe('fault injection', () => {
  test('every fault kind appears at its configured fraction', () => {
    const stats = summarizeEvents(events);
    const rows = BASE.batches * BASE.groupsPerBatch * BASE.generations;
    const groups = BASE.batches * BASE.groupsPerBatch;
    for (const kind of FAULT_KINDS) {
      const perGroup = kind === 'mixed_agents' || kind === 'task_mismatch';
      const expected = RUN.faults![kind] * (perGroup ? groups : rows);
      // ≈ 3 standard deviations of a binomial count.
      const tolerance = 3 * Math.sqrt(expected);
      expect(stats.faults[kind], kind).toBeGreaterThan(expected - tolerance);
      expect(stats.faults[kind], kind).toBeLessThan(expected + tolerance);
    }
  });

  test('each injected fault carries the outcome SPEC §3 assigns to it', () => {
    const batches = new Map<string, Set<string>>();
    for (const ev of events) {
      if (ev.kind === 'row') batches.set(ev.row.batch_id, (batches.get(ev.row.batch_id) ?? new Set()).add(ev.row.group_id));
    }
    const outcomes: ExpectedOutcome[] = [];
    for (const ev of events) {
      if (ev.kind === 'row' && ev.expect !== undefined) {
        outcomes.push(ev.expect);
        expect(ev.expect.group_id).toBe(ev.row.group_id);
        expect(ev.expect.row_index).toBe(ev.row.row_index);
      } else if (ev.kind === 'garbage') {
        outcomes.push(ev.expect);
        expect(ev.expect.group_id).toBe(ev.key);
        expect(ev.bytes[0]).not.toBe(0); // never the Confluent magic byte
      } else if (ev.kind === 'batch_end') {
        outcomes.push(...(ev.expect ?? []));
      }
    }
    for (const o of outcomes) {
      expect(o.reason).toBe(REASON[o.fault]);
      expect(batches.get(o.batch_id)?.has(o.group_id)).toBe(true);
      if (o.fault === 'conflict') expect(['original', 'conflicting']).toContain(o.rejected_copy);
      if (o.fault === 'mixed_agents' || o.fault === 'task_mismatch') expect(o.row_indices).toHaveLength(8);
      if (o.fault === 'missing') expect(o.row_indices!.length + o.missing_row_indices!.length).toBe(8);
    }
    expect(new Set(outcomes.map((o) => o.fault))).toEqual(new Set(FAULT_KINDS));
  });

  test.each(['on_arrival', 'on_completion'] as const)(
    'a SPEC §3 accumulator checking groups %s produces exactly the expected dead letters and nothing else',
    (mode) => {
      const model = new SpecAccumulator(mode);
      for (const ev of events) model.feed(ev);
      const expected = collectExpectations(events);
      expect(model.deadLetters.map(key).sort()).toEqual(expected.deadLetters.map(key).sort());
      expect(model.droppedReplays).toBe(expected.silentlyDropped.length);
      expect([...model.emitted.keys()].sort()).toEqual([...expected.completeGroups.keys()].sort());
      for (const rows of model.emitted.values()) expect(rows).toHaveLength(8);
    },
  );

  test('the first copy of a conflicting pair wins and the later one is the dead letter', () => {
    const model = new SpecAccumulator('on_completion');
    for (const ev of events) model.feed(ev);
    const withoutTime = (r: RolloutRow): string => fingerprint({ ...r, produced_at: null });
    let checked = 0;
    for (const ev of events) {
      if (ev.kind !== 'row' || ev.expect?.fault !== 'conflict') continue;
      const winner = model.emitted.get(ev.row.group_id)?.find((r) => r.row_index === ev.row.row_index);
      if (winner === undefined) continue; // its group failed for another reason
      const original = withoutTime(cleanRows.get(`${ev.row.group_id}/${ev.row.row_index}`)!);
      expect(withoutTime(ev.row) === original).toBe(ev.expect.rejected_copy === 'original');
      expect(withoutTime(winner) === original).toBe(ev.expect.rejected_copy === 'conflicting');
      checked++;
    }
    expect(checked).toBeGreaterThan(10);
  });

  test('groups without a fault carry exactly the rows of the same run without faults', () => {
    const touched = new Set<string>();
    for (const ev of events) {
      const e = ev.kind === 'batch_end' ? (ev.expect ?? []) : ev.kind === 'row' && ev.expect ? [ev.expect] : [];
      for (const o of e) if (o.fault !== 'garbage') touched.add(o.group_id);
    }
    let compared = 0;
    for (const ev of events) {
      if (ev.kind !== 'row' || touched.has(ev.row.group_id)) continue;
      expect(fingerprint(ev.row)).toBe(fingerprint(cleanRows.get(`${ev.row.group_id}/${ev.row.row_index}`)!));
      compared++;
    }
    // At these rates most groups carry some fault; a few hundred rows stay clean.
    expect(compared).toBeGreaterThan(200);
  });

  test('with one row per group a conflicting copy can only meet a closed group, and group faults cannot occur', () => {
    const single: LoadgenEvent[] = [
      ...generateEvents({ ...BASE, batches: 4, generations: 1, faults: parseFaultSpec('conflict=0.3,missing=0.3,mixed_agents=0.5') }),
    ];
    const outcomes = single.flatMap((e) => (e.kind === 'row' && e.expect ? [e.expect] : []));
    expect(outcomes.length).toBeGreaterThan(0);
    expect(outcomes.every((o) => o.fault === 'conflict' && o.reason === 'group_already_closed')).toBe(true);
    // A group keeps at least one row, so a lone row is never dropped as missing.
    expect(single.every((e) => e.kind !== 'batch_end' || e.expect === undefined)).toBe(true);
    const model = new SpecAccumulator('on_arrival');
    for (const ev of single) model.feed(ev);
    expect(model.deadLetters.map(key).sort()).toEqual(collectExpectations(single).deadLetters.map(key).sort());
  });
});

import { describe, expect, test } from 'vitest';
import {
  DEFAULT_START_TIME_MS,
  generateEvents,
  parseFaultSpec,
  type LoadgenEvent,
  type LoadgenOptions,
} from '../../../loadgen/index.js';
import type { RolloutRow } from '../../../processors/types.js';
import { parseLoadgenArgs } from '../../../cli/loadgen.js';

const SMALL: LoadgenOptions = { batches: 2, groupsPerBatch: 4, generations: 4, seed: 42, profile: 'small' };

function sameBytes(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

function rowsOf(events: LoadgenEvent[]): RolloutRow[] {
  return events.flatMap((e) => (e.kind === 'row' ? [e.row] : []));
}

describe('generateEvents', () => {
  test('the same seed yields identical events, typed arrays, routes, media and faults included', () => {
    const opts: LoadgenOptions = {
      ...SMALL,
      shape: { routes: { layers: 2, topk: 2, numExperts: 8 }, media: { groupRate: 1, itemShape: [2, 4] } },
      faults: parseFaultSpec('dup=0.1,conflict=0.1,nan=0.1,garbage=0.1,mixed_agents=0.2'),
    };
    const a = [...generateEvents(opts)];
    const b = [...generateEvents(opts)];
    expect(b).toEqual(a);
    const first = rowsOf(a)[0] as RolloutRow;
    expect(first.message_log[1]?.routed_experts?.data).toBeInstanceOf(Int8Array);
    expect(first.input_message_log[0]?.media?.image?.data).toBeInstanceOf(Uint8Array);
  });

  test('a different seed yields different rows', () => {
    const a = rowsOf([...generateEvents(SMALL)]);
    const b = rowsOf([...generateEvents({ ...SMALL, seed: 43 })]);
    expect(a.length).toBe(b.length);
    const same = a.filter((row, i) => {
      const other = b[i] as RolloutRow;
      return sameBytes(row.message_log[1]!.token_ids, other.message_log[1]!.token_ids);
    });
    expect(same).toHaveLength(0);
  });

  test('ids follow b000001 / <run>-b000001-g0003 and row_index = group_index * N + i', () => {
    const events = [...generateEvents({ ...SMALL, runId: 'runA', firstBatch: 7 })];
    const rows = rowsOf(events);
    for (const row of rows) {
      expect(row.batch_id).toMatch(/^b00000[78]$/);
      expect(row.group_id).toBe(`runA-${row.batch_id}-g${String(row.group_index).padStart(4, '0')}`);
      expect(row.num_generations).toBe(4);
      expect(row.row_index).toBeGreaterThanOrEqual(row.group_index * 4);
      expect(row.row_index).toBeLessThan(row.group_index * 4 + 4);
    }
    const keys = rows.map((r) => `${r.group_id}/${r.row_index}`);
    expect(new Set(keys).size).toBe(2 * 4 * 4);
    expect(rows.filter((r) => r.batch_id === 'b000007')).toHaveLength(16);
  });

  test('with a batch id prefix, batch ids are <prefix>-b000001 and everything else is as without', () => {
    const plain = [...generateEvents({ ...SMALL, runId: 'runA' })];
    const scoped = [...generateEvents({ ...SMALL, runId: 'runA', batchIdPrefix: 'runA' })];
    const ids = scoped.flatMap((e) => (e.kind === 'row' ? [e.row.batch_id] : e.kind === 'batch_end' ? [e.end.batch_id] : []));
    expect(new Set(ids)).toEqual(new Set(['runA-b000001', 'runA-b000002']));
    const unscope = (b: string) => b.replace(/^runA-/, '');
    expect(rowsOf(scoped).map((r) => ({ ...r, batch_id: unscope(r.batch_id) }))).toEqual(rowsOf(plain));
    expect(rowsOf(scoped).map((r) => r.group_id)).toEqual(rowsOf(plain).map((r) => r.group_id));
  });

  test('the loadgen command derives batch ids from the run id: unique per live run, the same for the same --run-id', () => {
    const live = ['--profile', 'small', '--batches', '1', '--groups', '2'];
    const batchIds = (argv: string[]) => new Set(rowsOf([...generateEvents(parseLoadgenArgs(argv).options)]).map((r) => r.batch_id));
    const [a, b] = [parseLoadgenArgs(live).options, parseLoadgenArgs(live).options];
    expect(a.runId).not.toBe(b.runId);
    expect([...batchIds(live)][0]).not.toBe([...batchIds(live)][0]);
    expect(batchIds([...live, '--run-id', 'r7'])).toEqual(new Set(['r7-b000001']));
    expect(batchIds([...live, '--run-id', 'r7'])).toEqual(batchIds([...live, '--run-id', 'r7']));
    expect(batchIds([...live, '--dry-run'])).toEqual(new Set(['lg1-b000001']));
  });

  test('each BatchEnd follows all rows of its batch and its num_rows equals them', () => {
    const events = [...generateEvents({ ...SMALL, batches: 3 })];
    let current: string[] = [];
    const ends = [];
    for (const ev of events) {
      if (ev.kind === 'row') current.push(ev.row.batch_id);
      else if (ev.kind === 'batch_end') {
        ends.push(ev.end);
        expect(new Set(current)).toEqual(new Set([ev.end.batch_id]));
        expect(ev.end.num_rows).toBe(current.length);
        current = [];
      }
    }
    expect(ends.map((e) => e.batch_id)).toEqual(['b000001', 'b000002', 'b000003']);
  });

  test('with faults, BatchEnd still counts the batch as groups × N: distinct rows sent plus rows never sent', () => {
    const events = [...generateEvents({ ...SMALL, batches: 4, faults: parseFaultSpec('dup=0.1,conflict=0.1,out_of_range=0.1,nan=0.1,missing=0.15,garbage=0.1') })];
    const sent = new Map<string, Set<string>>();
    for (const ev of events) {
      if (ev.kind === 'row' && ev.expect?.fault !== 'out_of_range') {
        const s = sent.get(ev.row.batch_id) ?? new Set();
        s.add(`${ev.row.group_id}/${ev.row.row_index}`);
        sent.set(ev.row.batch_id, s);
      }
      if (ev.kind === 'batch_end') {
        const missing = (ev.expect ?? []).reduce((n, e) => n + (e.missing_row_indices?.length ?? 0), 0);
        expect((sent.get(ev.end.batch_id)?.size ?? 0) + missing).toBe(ev.end.num_rows);
      }
    }
  });

  test('rows of a group complete out of order and groups of a batch interleave', () => {
    const rows = rowsOf([...generateEvents({ ...SMALL, batches: 1, groupsPerBatch: 8, generations: 8 })]);
    const byGroup = new Map<string, number[]>();
    rows.forEach((r, i) => byGroup.set(r.group_id, [...(byGroup.get(r.group_id) ?? []), i]));
    const outOfOrder = [...byGroup.keys()].filter((g) => {
      const idx = rows.filter((r) => r.group_id === g).map((r) => r.row_index);
      return idx.some((x, i) => i > 0 && x < (idx[i - 1] as number));
    });
    expect(outOfOrder.length).toBeGreaterThan(4);
    // Interleaving: some group's arrivals are not contiguous.
    const interleaved = [...byGroup.values()].filter((pos) => (pos.at(-1) as number) - (pos[0] as number) + 1 > pos.length);
    expect(interleaved.length).toBeGreaterThan(4);
  });

  test('a zero reorder window sends rows in index order', () => {
    const rows = rowsOf([...generateEvents({ ...SMALL, batches: 1, reorderWindowGroups: 0 })]);
    expect(rows.map((r) => r.row_index)).toEqual(Array.from({ length: 16 }, (_, i) => i));
  });

  test('delay hints model the configured row rate and produced_at follows them', () => {
    const events = [...generateEvents({ ...SMALL, batches: 4, groupsPerBatch: 25, rowsPerSecond: 59 })];
    const rows = events.filter((e) => e.kind === 'row');
    const total = events.reduce((s, e) => s + e.delayMs, 0);
    expect(events.every((e) => e.delayMs >= 0)).toBe(true);
    const rate = rows.length / (total / 1000);
    expect(rate).toBeGreaterThan(59 * 0.9);
    expect(rate).toBeLessThan(59 * 1.1);
    let clock = DEFAULT_START_TIME_MS;
    for (const ev of events) {
      clock += ev.delayMs;
      if (ev.kind === 'row') expect(Math.abs((ev.row.produced_at as number) - clock)).toBeLessThanOrEqual(0.5 + 1e-6);
    }
  });

  test('rows of a group share prompt, request, prompt_idx, agent, task and weight version', () => {
    const rows = rowsOf([...generateEvents({ ...SMALL, batches: 3, groupsPerBatch: 6, profile: 'default', shape: { generatedTokens: { median: 40, max: 200 } } })]);
    const groups = new Map<string, RolloutRow[]>();
    for (const r of rows) groups.set(r.group_id, [...(groups.get(r.group_id) ?? []), r]);
    for (const members of groups.values()) {
      const [first, ...rest] = members as [RolloutRow, ...RolloutRow[]];
      for (const r of rest) {
        // Byte and string comparisons: deep-equal over thousands of typed-array elements is slow.
        expect(r.input_message_log).toHaveLength(1);
        expect(sameBytes(r.input_message_log[0]!.token_ids, first.input_message_log[0]!.token_ids)).toBe(true);
        expect(r.input_message_log[0]!.content).toBe(first.input_message_log[0]!.content);
        expect(JSON.stringify(r.request)).toBe(JSON.stringify(first.request));
        expect(r.prompt_idx).toBe(first.prompt_idx);
        expect(r.agent_ref).toEqual(first.agent_ref);
        expect(r.task_index).toBe(first.task_index);
        expect(r.weight_version).toBe(first.weight_version);
        // Equal content, separate buffers: no row can change a sibling.
        expect(r.input_message_log[0]?.token_ids).not.toBe(first.input_message_log[0]?.token_ids);
      }
    }
    const batchOf = (r: RolloutRow): number => Number(r.batch_id.slice(1)) - 1;
    expect(rows.every((r) => r.weight_version <= batchOf(r) && r.weight_version >= batchOf(r) - 1)).toBe(true);
  });

  test('invalid sizes and options are refused when the generator is created, before any event', () => {
    expect(() => generateEvents({ ...SMALL, generations: 0 })).toThrow(/generations/);
    expect(() => generateEvents({ ...SMALL, groupsPerBatch: 1.5 })).toThrow(/groupsPerBatch/);
    expect(() => generateEvents({ ...SMALL, profile: 'huge' as never })).toThrow(/unknown profile/);
    expect(() => generateEvents({ ...SMALL, rowsPerSecond: 0 })).toThrow(/rowsPerSecond/);
    expect(() => generateEvents({ ...SMALL, shape: { routes: { numExperts: 300, dtype: 'int8' } } })).toThrow(/int8/);
    expect(() => generateEvents({ ...SMALL, faults: { ...parseFaultSpec('none'), nan: 2 } })).toThrow(/nan/);
    expect([...generateEvents({ ...SMALL, batches: 0 })]).toEqual([]);
  });
});

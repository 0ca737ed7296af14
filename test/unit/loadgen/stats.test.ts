import { describe, expect, test } from 'vitest';
import {
  addToStats,
  emptyStats,
  estimateRowBytes,
  generateEvents,
  parseFaultSpec,
  rowTokenCounts,
  summarizeEvents,
  type LoadgenOptions,
} from '../../../loadgen/index.js';

const OPTS: LoadgenOptions = { batches: 3, groupsPerBatch: 4, generations: 4, seed: 8, profile: 'small' };

describe('summarizeEvents', () => {
  test('counts rows, garbage, batch ends, tokens and the modelled duration', () => {
    const events = [...generateEvents({ ...OPTS, faults: parseFaultSpec('garbage=0.2,dup=0.1') })];
    const stats = summarizeEvents(events);
    const rows = events.flatMap((e) => (e.kind === 'row' ? [e.row] : []));
    expect(stats.events).toBe(events.length);
    expect(stats.rows).toBe(rows.length);
    expect(stats.garbage).toBe(events.filter((e) => e.kind === 'garbage').length);
    expect(stats.garbage).toBeGreaterThan(0);
    expect(stats.batchEnds).toBe(3);
    expect(stats.tokens).toBe(rows.reduce((n, r) => n + r.message_log.reduce((k, m) => k + m.token_ids.length, 0), 0));
    expect(stats.generatedTokens).toBe(rows.reduce((n, r) => n + rowTokenCounts(r).generated, 0));
    expect(stats.generatedTokens).toBeLessThan(stats.tokens);
    expect(stats.durationMs).toBeCloseTo(events.reduce((n, e) => n + e.delayMs, 0), 6);
    expect(stats.faults.dup).toBe(events.filter((e) => e.kind === 'row' && e.expect?.fault === 'dup').length);
    expect(stats.faults.garbage).toBe(stats.garbage);
  });

  test('missing rows are counted from the BatchEnd expectations', () => {
    const events = [...generateEvents({ ...OPTS, batches: 6, faults: parseFaultSpec('missing=0.2') })];
    const stats = summarizeEvents(events);
    const sent = events.filter((e) => e.kind === 'row').length;
    expect(stats.faults.missing).toBe(6 * 16 - sent);
    expect(stats.faults.missing).toBeGreaterThan(0);
  });

  test('folding events one by one gives the same totals as summarizing them', () => {
    const events = [...generateEvents(OPTS)];
    const folded = events.reduce(addToStats, emptyStats());
    expect(folded).toEqual(summarizeEvents(events));
  });

  test('the byte estimate covers the tensors and the JSON of every row', () => {
    const events = generateEvents({ ...OPTS, profile: 'router-replay', groupsPerBatch: 1, batches: 1, shape: { generatedTokens: { median: 200, max: 1000 } } });
    for (const ev of events) {
      if (ev.kind !== 'row') continue;
      const row = ev.row;
      const tensors = [...row.input_message_log, ...row.message_log].reduce(
        (n, m) => n + m.token_ids.byteLength + (m.generation_logprobs?.byteLength ?? 0) + (m.routed_experts?.data.byteLength ?? 0),
        0,
      );
      const json = JSON.stringify(row.full_result).length + JSON.stringify(row.request).length;
      const estimate = estimateRowBytes(row);
      expect(estimate).toBeGreaterThan(tensors + json);
      expect(estimate).toBeLessThan((tensors + json) * 1.1 + 2048);
      // Routed experts dominate: 384 B per generated token.
      expect(estimate).toBeGreaterThan(384 * rowTokenCounts(row).generated);
    }
  });
});

import { describe, expect, test } from 'vitest';
import { deriveRng, generateEvents, planGroup, planRow, PROFILES, resolveShape } from '../../../loadgen/index.js';
import { isGenerated } from './row-helpers.js';

describe('profiles', () => {
  test('published-max averages about 3.3k tokens per row (197k tokens/s at 59 rows/s)', () => {
    const shape = resolveShape(PROFILES['published-max']);
    let tokens = 0;
    let count = 0;
    for (let g = 0; g < 500; g++) {
      const rng = deriveRng(2024, 'test-group', g);
      const group = planGroup(shape, rng);
      for (let i = 0; i < 16; i++, count++) tokens += planRow(shape, group, rng).totalTokens;
    }
    expect(tokens / count).toBeGreaterThan((197_000 / 59) * 0.95);
    expect(tokens / count).toBeLessThan((197_000 / 59) * 1.05);
    expect(PROFILES['published-max'].rowsPerSecond).toBe(59);
    expect(PROFILES['published-max'].generations).toBe(16);
    expect(shape.routes).toBeNull();
  });

  test('built published-max rows have the planned sizes', () => {
    const events = [...generateEvents({ batches: 1, groupsPerBatch: 8, generations: 16, seed: 3, profile: 'published-max' })];
    const built = events.flatMap((e) => (e.kind === 'row' ? [e.row] : []));
    const mean = built.reduce((n, r) => n + r.message_log.reduce((k, m) => k + m.token_ids.length, 0), 0) / built.length;
    expect(mean).toBeGreaterThan(3339 * 0.7);
    expect(mean).toBeLessThan(3339 * 1.3);
    expect(built.every((r) => r.num_generations === 16)).toBe(true);
  });

  test('router-replay carries 48×8 int8 routes: 384 bytes per generated token', () => {
    const events = generateEvents({
      batches: 1,
      groupsPerBatch: 1,
      generations: 2,
      seed: 1,
      profile: 'router-replay',
      shape: { generatedTokens: { median: 300, max: 2000 } },
    });
    for (const ev of events) {
      if (ev.kind !== 'row') continue;
      for (const m of ev.row.message_log.filter(isGenerated)) {
        expect(m.routed_experts!.shape).toEqual([m.token_ids.length, 48, 8]);
        expect(m.routed_experts!.data.byteLength).toBe(384 * m.token_ids.length);
      }
    }
  });

  test('router-replay-32k makes groups of 8 rows of 32,768 tokens with routes, over 100 MB of routes per group', () => {
    const events = [...generateEvents({ batches: 1, groupsPerBatch: 1, generations: PROFILES['router-replay-32k'].generations, seed: 3, profile: 'router-replay-32k' })];
    const rows = events.flatMap((e) => (e.kind === 'row' ? [e.row] : []));
    expect(rows).toHaveLength(8);
    let routeBytes = 0;
    for (const row of rows) {
      expect(row.message_log.reduce((n, m) => n + m.token_ids.length, 0)).toBe(32_768);
      for (const m of row.message_log.filter(isGenerated)) routeBytes += m.routed_experts!.data.byteLength;
    }
    expect(routeBytes).toBeGreaterThan(100_000_000);
  });

  test('the small profile makes rows of tens of tokens', () => {
    const events = [...generateEvents({ batches: 4, groupsPerBatch: 4, generations: 4, seed: 1, profile: 'small' })];
    const sizes = events.flatMap((e) => (e.kind === 'row' ? [e.row.message_log.reduce((n, m) => n + m.token_ids.length, 0)] : []));
    const mean = sizes.reduce((a, b) => a + b, 0) / sizes.length;
    expect(mean).toBeGreaterThan(10);
    expect(mean).toBeLessThan(100);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(256);
  });

  test('a 64k-token row with 48×8 routes is built in a fraction of a second', () => {
    const started = performance.now();
    const events = generateEvents({
      batches: 1,
      groupsPerBatch: 1,
      generations: 1,
      seed: 9,
      profile: 'router-replay',
      shape: { generatedTokens: { median: 60_000, sigma: 0, min: 60_000, max: 60_000 }, turns: { max: 1 } },
    });
    const row = [...events].flatMap((e) => (e.kind === 'row' ? [e.row] : []))[0]!;
    const elapsed = performance.now() - started;
    const reply = row.message_log[1]!;
    expect(reply.token_ids.length).toBe(60_000);
    expect(reply.routed_experts!.data.byteLength).toBe(60_000 * 384);
    // Generous for a shared 2-core machine; an allocation per token would take seconds.
    expect(elapsed).toBeLessThan(3000);
  });
});

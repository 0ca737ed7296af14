/**
 * Runner health (streams/runtime/health.ts) and the /healthz answer: 200
 * with `{ stages, fused }` while healthy; 503 naming each runner that is
 * stalled, fenced for longer than the grace, stopped by the poison policy or
 * failed.
 */
import { describe, expect, test } from 'vitest';
import { HealthTracker, healthReport } from '../../../streams/runtime/health.js';

function tracker(graceMs = 1000) {
  let now = 1_000_000;
  const h = new HealthTracker('accumulate+postprocess+pack', graceMs, () => now);
  return { h, advance: (ms: number) => (now += ms) };
}

const base = { stages: ['accumulate', 'postprocess', 'pack', 'batch-metrics'], fused: true };

describe('runner health', () => {
  test('starting, restoring, running, rebuilding and stopping are healthy', () => {
    const { h } = tracker();
    expect(h.snapshot().state).toBe('starting');
    h.started();
    h.restoring(true);
    expect(h.snapshot().state).toBe('restoring');
    h.restoring(false);
    expect(h.snapshot().state).toBe('running');
    h.rebuilding(1, '[transaction_outcome_unknown] x', false);
    expect(h.snapshot()).toMatchObject({ state: 'rebuilding', partitions: [1] });
    h.rebuilt(1);
    expect(h.snapshot().state).toBe('running');
    expect(healthReport([h.snapshot()], base)).toEqual({ ok: true, detail: base });
    h.stopping();
    expect(healthReport([h.snapshot()], base).ok).toBe(true);
  });

  test('a fenced task is unhealthy only when not rebuilt within the grace', () => {
    const { h, advance } = tracker(1000);
    h.started();
    h.rebuilding(3, '[producer_fenced] epoch', true);
    expect(h.snapshot().state).toBe('rebuilding');
    advance(1500);
    expect(h.snapshot()).toMatchObject({ state: 'fenced', partitions: [3], reason: '[producer_fenced] epoch' });
    h.rebuilt(3);
    expect(h.snapshot().state).toBe('running');
  });

  test('stalled, stopped_by_policy and failed answer 503 with since, reason and partitions', () => {
    const { h, advance } = tracker();
    h.started();
    h.setStalled('12 input records behind and nothing committed for 31 s', [0, 2]);
    const t0 = new Date(1_000_000).toISOString();
    advance(5000);
    expect(healthReport([h.snapshot()], base)).toEqual({
      ok: false,
      detail: { ...base, unhealthy: [{ runner: 'accumulate+postprocess+pack', state: 'stalled', since: t0, reason: '12 input records behind and nothing committed for 31 s', partitions: [0, 2] }] },
    });
    h.setStalled(null);
    expect(h.snapshot().state).toBe('running');
    h.stoppedByPolicy(1, 'postprocess failed 3 time(s)');
    expect(h.snapshot()).toMatchObject({ state: 'stopped_by_policy', partitions: [1], reason: 'postprocess failed 3 time(s)' });
    h.fail('[authorization_failed] Transactional Id authorization failed');
    expect(h.snapshot()).toMatchObject({ state: 'failed', reason: '[authorization_failed] Transactional Id authorization failed' });
  });

  test('a partition that leaves the instance takes its policy stop with it', () => {
    const { h } = tracker();
    h.started();
    h.stoppedByPolicy(1, 'x');
    h.released(1);
    expect(h.snapshot().state).toBe('running');
  });

  test('one unhealthy runner makes the process unhealthy; healthy runners are not listed', () => {
    const a = tracker().h;
    const b = new HealthTracker('batch-metrics', 1000);
    a.started();
    b.started();
    a.stoppedByPolicy(0, 'x');
    const r = healthReport([a.snapshot(), b.snapshot()], base);
    expect(r.ok).toBe(false);
    expect((r.detail as { unhealthy: Array<{ runner: string }> }).unhealthy.map((u) => u.runner)).toEqual(['accumulate+postprocess+pack']);
  });
});

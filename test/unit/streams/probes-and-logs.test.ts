/**
 * What a container platform reads from a stage process: /readyz (ready only
 * once every runner has its partitions and their state), /healthz, /metrics
 * on the configured host, JSON log lines with the fields the message names,
 * and the config keys and environment variables that set them.
 */
import { afterEach, describe, expect, test } from 'vitest';
import type { Server } from 'node:http';
import { HealthTracker, healthReport, readinessReport } from '../../../streams/runtime/health.js';
import { RuntimeMetrics, serveMetrics } from '../../../streams/runtime/metrics.js';
import { formatLogLine, messageFields } from '../../../streams/runtime/logger.js';
import { loadConfig } from '../../../config/load.js';
import { packageVersion } from '../../../tools/version.js';
import { readFileSync } from 'node:fs';

describe('/readyz', () => {
  test('503 while any runner starts, restores or rebuilds; 200 when all run', () => {
    const a = new HealthTracker('accumulate', 1000);
    const b = new HealthTracker('pack', 1000);
    const ready = () => readinessReport([a.snapshot(), b.snapshot()]);
    expect(ready().ok).toBe(false); // both starting
    a.started();
    b.started();
    a.restoring(true);
    expect(ready()).toMatchObject({ ok: false, detail: { ready: false, runners: [{ runner: 'accumulate', state: 'restoring' }, { runner: 'pack', state: 'running' }] } });
    a.restoring(false);
    expect(ready().ok).toBe(true);
    b.rebuilding(2, 'x', false);
    expect(ready().ok).toBe(false);
    b.rebuilt(2);
    expect(ready().ok).toBe(true);
    b.stopping();
    expect(ready().ok).toBe(false);
    expect(readinessReport([]).ok).toBe(false);
  });
});

describe('the metrics server', () => {
  let server: Server | null = null;
  afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

  test('serves /readyz and /healthz with their own answers on the configured host', async () => {
    let isReady = false;
    server = await serveMetrics(
      new RuntimeMetrics(),
      { host: '127.0.0.1', port: 0 + 19_464 + (process.pid % 500) },
      () => healthReport([], { stages: [], fused: false }),
      () => ({ ok: isReady, detail: { ready: isReady } }),
    );
    const addr = server!.address();
    expect(addr).toMatchObject({ address: '127.0.0.1' });
    const port = (addr as { port: number }).port;
    const get = async (path: string) => {
      const r = await fetch(`http://127.0.0.1:${port}${path}`);
      return [r.status, await r.text()] as const;
    };
    expect(await get('/readyz')).toEqual([503, '{"ready":false}']);
    isReady = true;
    expect(await get('/readyz')).toEqual([200, '{"ready":true}']);
    expect((await get('/healthz'))[0]).toBe(200);
    expect((await get('/metrics'))[1]).toContain('rollout_stream_');
    expect((await get('/nope'))[0]).toBe(404);
  });

  test('port 0 serves nothing', async () => {
    expect(await serveMetrics(new RuntimeMetrics(), { host: '127.0.0.1', port: 0 }, () => ({ ok: true, detail: {} }), () => ({ ok: true, detail: {} }))).toBeNull();
  });
});

describe('log lines', () => {
  const at = new Date('2026-12-04T03:00:00.000Z');
  test('text is time, level, message', () => {
    expect(formatLogLine('text', 'warn', 'pack: partition 3 not ready', at)).toBe('2026-12-04T03:00:00.000Z warn pack: partition 3 not ready');
  });
  test('json is one object per line with the fields the message names', () => {
    const line = formatLogLine('json', 'warn', 'accumulate+postprocess+pack: partition 2: transaction failed [task_migrated]: x; rebuilding the task in 1 s', at);
    expect(line).not.toContain('\n');
    expect(JSON.parse(line)).toEqual({
      time: '2026-12-04T03:00:00.000Z',
      level: 'warn',
      msg: 'accumulate+postprocess+pack: partition 2: transaction failed [task_migrated]: x; rebuilding the task in 1 s',
      stage: 'accumulate+postprocess+pack',
      partition: 2,
      code: 'task_migrated',
    });
    expect(messageFields('pack: rejoining consumer group rs.pack: partition 0 was fenced by a newer owner')).toEqual({ stage: 'pack', group: 'rs.pack', partition: 0 });
    expect(messageFields('stopped')).toEqual({});
  });
});

describe('configuration', () => {
  test('metrics_host, shutdown_timeout_ms and logging.format have defaults and environment variables', () => {
    const d = loadConfig({ env: {} }).config;
    expect([d.runtime.metrics_host, d.runtime.shutdown_timeout_ms, d.logging.format]).toEqual(['127.0.0.1', 20_000, 'text']);
    const e = loadConfig({ env: { METRICS_HOST: '0.0.0.0', LOG_FORMAT: 'json', METRICS_PORT: '9500' } }).config;
    expect([e.runtime.metrics_host, e.logging.format, e.runtime.metrics_port]).toEqual(['0.0.0.0', 'json', 9500]);
    expect(() => loadConfig({ env: { LOG_FORMAT: 'yaml' } })).toThrow(/logging\.format/);
  });
  test('--version reports package.json', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(packageVersion()).toBe(pkg.version);
  });
});

/**
 * The Prometheus alert rules (deploy/prometheus/alerts.yaml) under
 * `promtool test rules`: every alert has series that fire it and series that
 * do not (alerts.test.yaml), and each alert names only metrics `run` serves.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { RuntimeMetrics } from '../../streams/runtime/metrics.js';

const ROOT = join(import.meta.dirname, '..', '..');
const DIR = join(ROOT, 'deploy', 'prometheus');

// promtool comes from Debian's prometheus package, which scripts/promtool.sh installs as root; a
// machine without it where nobody may install it says so and runs the rest.
const havePromtool = spawnSync('sh', ['-c', 'command -v promtool']).status === 0;
const canInstall = process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v apt-get']).status === 0;
if (!havePromtool && !canInstall) console.warn('alerts.test.ts: promtool is missing and cannot be installed here (not root or no apt-get): the promtool test is skipped on this machine');

describe('alert rules', () => {
  test.runIf(havePromtool || canInstall)('promtool test rules passes', () => {
    const out = execFileSync(join(ROOT, 'scripts', 'promtool.sh'), ['test', 'rules', 'alerts.test.yaml'], { cwd: DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(out).toContain('SUCCESS');
  }, 120_000);

  test('every alert is tested, and names only metrics the stages export', async () => {
    const rules = parse(readFileSync(join(DIR, 'alerts.yaml'), 'utf8')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> };
    const tests = parse(readFileSync(join(DIR, 'alerts.test.yaml'), 'utf8')) as { tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts: unknown[] }> }> };
    const fired = new Set(tests.tests.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)));
    const all = rules.groups.flatMap((g) => g.rules);
    expect(all.map((r) => r.alert).filter((a) => !fired.has(a))).toEqual([]);
    const exported = new Set((await new RuntimeMetrics().registry.getMetricsAsJSON()).map((m) => m.name));
    const used = new Set(all.flatMap((r) => r.expr.match(/rollout_stream_[a-z_]+/g) ?? []));
    expect([...used].filter((m) => !exported.has(m))).toEqual([]);
  });
});

/**
 * The numbers `demo` prints at the end, computed from what it observed:
 * per-stage records in/out (the runtime's Prometheus counters), dead
 * letters by reason (expected vs arrived), throughput, and the latency from
 * a group's last row produced to its packed record. Pure: no Kafka here.
 */
import { percentile } from '../tools/percentile.js';
import { formatBytes, formatRate } from './progress.js';
import { formatTable } from './table.js';

/** The runtime's `events_total{event}` counter summed over stages (e.g. `idempotent_replays`). */
export function eventCount(metrics: MetricJson[], event: string): number {
  let n = 0;
  for (const m of metrics) if (m.name === 'rollout_stream_events_total') for (const v of m.values) if (v.labels.event === event) n += v.value;
  return n;
}

/** prom-client's `getMetricsAsJSON()` entries (the part we read). */
export interface MetricJson {
  name: string;
  values: Array<{ labels: Record<string, string | number>; value: number }>;
}

export interface StageCounts {
  stage: string;
  recordsIn: number;
  /** Output records by topic base name (e.g. `rollout.penalized`). */
  out: Record<string, number>;
  deadLetters: number;
}

/** Per stage: records in, records out by topic (prefix stripped), dead letters; from the runtime's counters. */
export function stageCounts(metrics: MetricJson[], prefix: string): StageCounts[] {
  const byStage = new Map<string, StageCounts>();
  const entry = (stage: string) => {
    let e = byStage.get(stage);
    if (!e) byStage.set(stage, (e = { stage, recordsIn: 0, out: {}, deadLetters: 0 }));
    return e;
  };
  for (const m of metrics) {
    for (const v of m.values) {
      const stage = String(v.labels.stage ?? '');
      if (!stage) continue;
      if (m.name === 'rollout_stream_records_in_total') entry(stage).recordsIn += v.value;
      else if (m.name === 'rollout_stream_records_out_total') {
        const topic = String(v.labels.topic ?? '');
        const base = topic.startsWith(prefix) ? topic.slice(prefix.length) : topic;
        const e = entry(stage);
        e.out[base] = (e.out[base] ?? 0) + v.value;
      } else if (m.name === 'rollout_stream_dead_letters_total') entry(stage).deadLetters += v.value;
    }
  }
  const order = ['accumulate', 'postprocess', 'pack', 'batch-metrics'];
  return [...byStage.values()].sort((a, b) => order.indexOf(a.stage) - order.indexOf(b.stage));
}

export interface DemoObservation {
  prefix: string;
  profile: string;
  batches: number;
  groups: number;
  generations: number;
  rowsProduced: number;
  garbageProduced: number;
  bytesProduced: number;
  stages: StageCounts[];
  /** `reason` → [expected, arrived]. */
  deadLetters: Map<string, [number, number]>;
  /** Identical duplicates dropped silently: [expected, counted by accumulate]. */
  replays: [number, number];
  groupsPacked: number;
  groupsExpected: number;
  /** Per packed group: ms from its last row produced to its packed record's timestamp. */
  latenciesMs: number[];
  /** From the first row produced to the last packed record. */
  elapsedMs: number;
  totalMs: number;
}

export function formatDemoSummary(o: DemoObservation): string {
  const secs = o.elapsedMs / 1000;
  const lines = [
    '',
    `demo summary — prefix '${o.prefix}', profile ${o.profile}, ${o.batches} batches × ${o.groups} groups × ${o.generations} rows`,
    '',
    formatTable(
      ['stage', 'records in', 'records out', 'dead letters'],
      o.stages.map((s) => [
        s.stage,
        s.recordsIn,
        Object.entries(s.out)
          .map(([t, n]) => `${n} ${t}`)
          .join(', ') || '-',
        s.deadLetters,
      ]),
      [1, 3],
    ),
    formatTable(
      ['dead-letter reason', 'expected', 'arrived'],
      [...o.deadLetters].sort(([a], [b]) => a.localeCompare(b)).map(([reason, [want, got]]) => [reason, want, got]),
      [1, 2],
    ),
    `duplicates   ${o.replays[1]} identical rows dropped silently (expected ${o.replays[0]})`,
    `produced     ${o.rowsProduced} rows + ${o.garbageProduced} garbage records, ${formatBytes(o.bytesProduced)}`,
    `packed       ${o.groupsPacked} of ${o.groupsExpected} expected groups`,
    `throughput   ${formatRate(secs > 0 ? o.rowsProduced / secs : 0)} rows/s, ${formatRate(secs > 0 ? o.groupsPacked / secs : 0)} groups/s, ` +
      `${formatBytes(secs > 0 ? o.bytesProduced / secs : 0)}/s (first row produced → last group packed: ${secs.toFixed(2)} s)`,
    `latency      last row produced → packed: p50 ${percentile(o.latenciesMs, 50).toFixed(0)} ms, p99 ${percentile(o.latenciesMs, 99).toFixed(0)} ms, ` +
      `max ${Math.max(...o.latenciesMs, 0).toFixed(0)} ms (${o.latenciesMs.length} groups)`,
    `demo time    ${(o.totalMs / 1000).toFixed(1)} s so far`,
  ];
  return lines.join('\n') + '\n';
}

/**
 * Per-agent verifier metrics (SPEC §4.8, REFERENCE-NOTES 1 and 6): for every
 * numeric or boolean field of an agent's results, `<agent>/<key>/{mean,max,
 * min,median,stddev}`.
 */
import { summaryStats } from './metric-stats.js';
import type { JsonObject } from './types.js';

/**
 * One result's fields as metric inputs: numbers as they are, booleans as
 * 0/1, anything else (strings, objects, null) as null. Every top-level key is
 * kept, because the first result's key set decides which metrics exist.
 */
export function numericResultFields(fullResult: JsonObject): Record<string, number | null> {
  // fromEntries defines own properties, so even a `__proto__` key stays data.
  return Object.fromEntries(
    Object.entries(fullResult).map(([key, value]) => [
      key,
      typeof value === 'number' ? value : typeof value === 'boolean' ? (value ? 1 : 0) : null,
    ]),
  );
}

/** What a row contributes to per-agent metrics. */
export interface AgentResultRow {
  agent: string;
  result_fields: Record<string, number | null>;
}

/**
 * Per-agent metrics over rows in order. An agent's keys are those of its
 * FIRST row only (keys appearing only later are ignored); a key's values are
 * its numeric entries over all that agent's rows, and its mean divides by the
 * agent's row count, so rows where the key is null or missing pull the mean
 * towards 0. A key with no numeric value anywhere emits nothing.
 */
export function perAgentMetrics(rows: readonly AgentResultRow[]): Record<string, number> {
  const byAgent = new Map<string, AgentResultRow[]>();
  for (const row of rows) {
    const list = byAgent.get(row.agent);
    if (list === undefined) byAgent.set(row.agent, [row]);
    else list.push(row);
  }
  const out: Record<string, number> = {};
  for (const [agent, agentRows] of byAgent) {
    for (const key of Object.keys(agentRows[0]!.result_fields)) {
      const values: number[] = [];
      for (const r of agentRows) {
        const v = r.result_fields[key];
        if (typeof v === 'number') values.push(v);
      }
      Object.assign(out, summaryStats(values, agentRows.length, `${agent}/${key}`));
    }
  }
  return out;
}

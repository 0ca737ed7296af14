/**
 * Running totals over generated events, for a progress display and for
 * sizing runs: rows, tokens, an estimate of bytes on the wire, and how many
 * faults of each kind went out.
 */
import type { Message, RolloutRow } from '../processors/types.js';
import type { LoadgenEvent } from './events.js';
import { FAULT_KINDS, type FaultKind } from './fault-spec.js';

export interface LoadgenStats {
  events: number;
  /** Row records, extra copies and faulty rows included. */
  rows: number;
  garbage: number;
  batchEnds: number;
  /** Tokens of every row's `message_log`. */
  tokens: number;
  /** Tokens of assistant messages. */
  generatedTokens: number;
  /** Estimated value bytes (see `estimateRowBytes`), garbage included. */
  bytes: number;
  /** Sum of the delay hints: how long the run takes at the modelled rate. */
  durationMs: number;
  /** Injected faults by kind (`missing` counts rows never sent). */
  faults: Record<FaultKind, number>;
}

export function emptyStats(): LoadgenStats {
  const faults = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  return { events: 0, rows: 0, garbage: 0, batchEnds: 0, tokens: 0, generatedTokens: 0, bytes: 0, durationMs: 0, faults };
}

/** Tokens of a row's `message_log`: all of them, and those of assistant messages. */
export function rowTokenCounts(row: RolloutRow): { total: number; generated: number } {
  let total = 0;
  let generated = 0;
  for (const m of row.message_log) {
    total += m.token_ids.length;
    if (m.role === 'assistant') generated += m.token_ids.length;
  }
  return { total, generated };
}

function messageBytes(m: Message): number {
  let bytes = 16 + m.role.length + m.token_ids.byteLength;
  if (m.generation_logprobs != null) bytes += m.generation_logprobs.byteLength;
  if (m.routed_experts != null) bytes += m.routed_experts.data.byteLength + 16;
  if (m.content != null) bytes += m.content.length;
  for (const t of Object.values(m.media ?? {})) bytes += t.data.byteLength + 16;
  return bytes;
}

/**
 * Approximate Avro value size of a row: tensor bytes (tensors travel raw),
 * text lengths, the JSON strings of `request`/`full_result`/`agent_ref`,
 * and a small constant for ids and framing. Within a few percent of the
 * encoded size for typical rows; good for throughput displays, not for
 * enforcing `max_message_bytes`.
 */
export function estimateRowBytes(row: RolloutRow): number {
  let bytes = 64 + row.batch_id.length + row.group_id.length + (row.instance_label?.length ?? 0);
  bytes += JSON.stringify(row.request).length + JSON.stringify(row.full_result).length + JSON.stringify(row.agent_ref).length;
  for (const m of row.input_message_log) bytes += messageBytes(m);
  for (const m of row.message_log) bytes += messageBytes(m);
  return bytes;
}

/** Adds one event to `stats` (mutated and returned, so it folds). */
export function addToStats(stats: LoadgenStats, ev: LoadgenEvent): LoadgenStats {
  stats.events++;
  stats.durationMs += ev.delayMs;
  if (ev.kind === 'row') {
    stats.rows++;
    const { total, generated } = rowTokenCounts(ev.row);
    stats.tokens += total;
    stats.generatedTokens += generated;
    stats.bytes += estimateRowBytes(ev.row);
    if (ev.expect !== undefined) stats.faults[ev.expect.fault]++;
  } else if (ev.kind === 'garbage') {
    stats.garbage++;
    stats.bytes += ev.bytes.byteLength;
    stats.faults.garbage++;
  } else {
    stats.batchEnds++;
    for (const e of ev.expect ?? []) stats.faults.missing += e.missing_row_indices?.length ?? 0;
  }
  return stats;
}

/** Totals over a whole stream of events (consumes the iterable). */
export function summarizeEvents(events: Iterable<LoadgenEvent>): LoadgenStats {
  const stats = emptyStats();
  for (const ev of events) addToStats(stats, ev);
  return stats;
}

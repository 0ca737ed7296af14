/**
 * A deliberately small model of the accumulate rules of SPEC §3, used only
 * to check the load generator's fault accounting: fed a generated stream,
 * it must produce exactly the dead letters the stream's `expect`s announce.
 * It can check group rules (mixed agents, task index) on every arrival or
 * only on completion, because the generator promises the same outcome for
 * both orders.
 */
import type { LoadgenEvent } from '../../../loadgen/index.js';
import type { RolloutRow } from '../../../processors/types.js';

export interface ModelDeadLetter {
  reason: string;
  group_id: string;
  row_index?: number;
  row_indices?: number[];
  missing_row_indices?: number[];
}

interface GroupState {
  batchId: string;
  n: number;
  groupIndex: number;
  received: Map<number, { fp: string; row: RolloutRow }>;
  closed: boolean;
}

/** A stable fingerprint of a row's whole payload (typed arrays by type and content, NaN kept distinct). */
export function fingerprint(row: RolloutRow): string {
  return JSON.stringify(row, (_k, v: unknown) => {
    if (ArrayBuffer.isView(v)) return { [v.constructor.name]: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
    if (typeof v === 'number' && Number.isNaN(v)) return 'NaN';
    return v;
  });
}

function hasNaN(row: RolloutRow): boolean {
  return row.message_log.some(
    (m) => m.role === 'assistant' && m.generation_logprobs != null && m.generation_logprobs.some((x) => Number.isNaN(x)),
  );
}

export class SpecAccumulator {
  readonly deadLetters: ModelDeadLetter[] = [];
  readonly emitted = new Map<string, RolloutRow[]>();
  droppedReplays = 0;
  private readonly groups = new Map<string, GroupState>();

  constructor(private readonly groupChecks: 'on_arrival' | 'on_completion') {}

  feed(ev: LoadgenEvent): void {
    if (ev.kind === 'garbage') this.deadLetters.push({ reason: 'undecodable', group_id: ev.key });
    else if (ev.kind === 'row') this.row(ev.row);
    else this.batchEnd(ev.end.batch_id);
  }

  private row(row: RolloutRow): void {
    const id = row.group_id;
    let g = this.groups.get(id);
    if (g === undefined) {
      g = { batchId: row.batch_id, n: row.num_generations, groupIndex: row.group_index, received: new Map(), closed: false };
      this.groups.set(id, g);
    }
    const lo = g.groupIndex * g.n;
    if (hasNaN(row)) return void this.deadLetters.push({ reason: 'nan_logprobs', group_id: id, row_index: row.row_index });
    if (row.row_index < lo || row.row_index >= lo + g.n) {
      return void this.deadLetters.push({ reason: 'row_index_out_of_range', group_id: id, row_index: row.row_index });
    }
    const fp = fingerprint(row);
    const prior = g.received.get(row.row_index);
    if (g.closed) {
      if (prior?.fp === fp) this.droppedReplays++;
      else this.deadLetters.push({ reason: 'group_already_closed', group_id: id, row_index: row.row_index });
      return;
    }
    if (prior !== undefined) {
      if (prior.fp === fp) this.droppedReplays++;
      else this.deadLetters.push({ reason: 'duplicate_row_index', group_id: id, row_index: row.row_index });
      return;
    }
    g.received.set(row.row_index, { fp, row });
    const complete = g.received.size === g.n;
    if (this.groupChecks === 'on_arrival' || complete) {
      const problem = groupProblem([...g.received.values()].map((r) => r.row));
      if (problem !== null) {
        g.closed = true;
        const row_indices = [...g.received.keys()].sort((a, b) => a - b);
        return void this.deadLetters.push({ reason: problem, group_id: id, row_indices });
      }
    }
    if (complete) {
      g.closed = true;
      this.emitted.set(id, [...g.received.values()].map((r) => r.row).sort((a, b) => a.row_index - b.row_index));
    }
  }

  private batchEnd(batchId: string): void {
    for (const [id, g] of this.groups) {
      if (g.batchId !== batchId || g.closed || g.received.size === 0) continue;
      g.closed = true;
      const row_indices = [...g.received.keys()].sort((a, b) => a - b);
      const all = Array.from({ length: g.n }, (_, i) => g.groupIndex * g.n + i);
      const missing_row_indices = all.filter((i) => !g.received.has(i));
      this.deadLetters.push({ reason: 'incomplete_group', group_id: id, row_indices, missing_row_indices });
    }
  }
}

function groupProblem(rows: RolloutRow[]): 'mixed_agents' | 'task_index_mismatch' | null {
  const agents = new Set(rows.map((r) => String(r.agent_ref.name)));
  if (agents.size > 1) return 'mixed_agents';
  const tasks = new Set(rows.map((r) => r.task_index ?? null));
  return tasks.size > 1 ? 'task_index_mismatch' : null;
}

/**
 * What the runtime's topology-driver tests share: loadgen events as the
 * records `TopologyTestDriver.produce` takes, and the packed bytes the
 * offline runner makes of them (what exactly once is checked against).
 */
import { runOffline } from '../../../cli/offline.js';
import type { Config } from '../../../config/schema.js';
import { formatJsonLine, parseJsonLine, type JsonLine } from '../../../json-form/form.js';
import type { LoadgenEvent } from '../../../loadgen/index.js';
import { AvroBodyCodec, type RecordTypes } from '../../../streams/codecs/codec.js';
import { HEADER_BYTES } from '../../../streams/codecs/wire-format.js';
import { partitionForKey } from '../../../streams/topics/partitioner.js';

/** The rows and BatchEnds of `events`, as row-completed records. */
export function asRecords(events: LoadgenEvent[]): Array<RecordTypes['rowCompleted']> {
  return events.flatMap((e): Array<RecordTypes['rowCompleted']> => (e.kind === 'row' ? [{ kind: 'row', row: e.row }] : e.kind === 'batch_end' ? [{ kind: 'batch_end', end: e.end }] : []));
}

type OfflineMetrics = Extract<JsonLine, { kind: 'metrics' }>['metrics'];

/** What the offline runner makes of `events` under `config`: packed bytes (after the 5-byte header) by group, and the metrics records. */
export async function offlineOutputs(
  events: LoadgenEvent[],
  config: Config,
): Promise<{ packed: Map<string, Buffer>; metrics: Array<OfflineMetrics> }> {
  const lines: string[] = [];
  const input = events.flatMap((e) =>
    e.kind === 'row' ? [formatJsonLine({ kind: 'row', record: e.row })] : e.kind === 'batch_end' ? [formatJsonLine({ kind: 'batch_end', end: e.end })] : [],
  );
  await runOffline('all', config, input, (l) => void lines.push(l));
  const body = new AvroBodyCodec('packed');
  const packed = new Map<string, Buffer>();
  const metrics: OfflineMetrics[] = [];
  for (const l of lines.map(parseJsonLine)) {
    if (l.kind === 'packed') packed.set(l.packed.group_id, body.encodeFramed(l.packed, 0).subarray(HEADER_BYTES));
    if (l.kind === 'metrics') metrics.push(l.metrics);
  }
  return { packed, metrics };
}

/** Packed bytes (after the 5-byte header) by group, as the offline runner makes them under `config`. */
export async function offlinePacked(events: LoadgenEvent[], config: Config): Promise<Map<string, Buffer>> {
  return (await offlineOutputs(events, config)).packed;
}

/** The first index from the middle on at which every partition has a group with some rows before it and some after (open when a takes over). */
export function splitLeavingOpenGroups(records: Array<RecordTypes['rowCompleted']>, partitions: number): number {
  const rows = records.flatMap((r) => (r.kind === 'row' ? [r.row] : []));
  const size = new Map<string, number>();
  for (const r of rows) size.set(r.group_id, (size.get(r.group_id) ?? 0) + 1);
  for (let i = Math.floor(records.length / 2); i < records.length; i++) {
    const seen = new Map<string, number>();
    for (const r of records.slice(0, i)) if (r.kind === 'row') seen.set(r.row.group_id, (seen.get(r.row.group_id) ?? 0) + 1);
    const open = new Set([...seen].filter(([g, n]) => n < size.get(g)!).map(([g]) => partitionForKey(g, partitions)));
    if (open.size === partitions) return i;
  }
  throw new Error('no split leaves a group open on every partition');
}

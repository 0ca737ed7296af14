/**
 * `trace <group_id>` (SPEC §7, §9): the group's journey over all topics.
 * Each topic is keyed by group id, so only the partitions that can hold the
 * group are read: its murmur2 partition (every partition of row-completed
 * when the rows are not there: a producer with another partitioner), and
 * downstream also the partition numbers its rows were found on (fused
 * stages write there). The metrics topic is keyed by batch id: it is read
 * last, once the batch is known. Prints every record with
 * its coordinates, time and size (a record written as a chunk set once, with
 * its first and last chunk's offsets), the stage latencies from the record
 * timestamps, the dead letters, the rewards and the packed tags.
 */
import type { Config } from '../config/schema.js';
import type { PackedRowTags } from '../processors/types.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import type { OpsClient } from '../streams/kafka/types.js';
import { createRegistry } from '../streams/codecs/schema-registry.js';
import { partitionForKey } from '../streams/topics/partitioner.js';
import { partitionRanges, type PartitionRange, type ScanRecord } from '../streams/ops/topic-scan.js';
import { BASE_TOPIC_NAMES, topicNames, type TopicRole } from '../streams/topics/names.js';
import { UndecodableError } from '../streams/codecs/wire-format.js';
import { parseFlags, UsageError, type Command } from '../tools/command.js';
import { processIo } from './io.js';
import { loadOpsConfig } from './ops-config.js';
import { formatBytes } from './progress.js';
import { formatTable, truncate } from './table.js';
import { RecordDecoder, type DecodedRecord } from './topic-records.js';

export interface TraceRecord {
  topic: string;
  role: TopicRole;
  partition: number;
  offset: string;
  /** Epoch ms. */
  timestamp: number;
  size: number;
  /** What the record is, e.g. `row 3`, `group (4 rows)`, `dead letter nan_logprobs`. */
  what: string;
  /** A record written as a chunk set (a value above its topic's size limit): its last chunk's offset and the chunk count; `offset` is the first chunk's and `size` the whole value's. */
  lastOffset?: string;
  chunks?: number;
}

export interface TraceDeadLetter {
  timestamp: number;
  stage: string;
  reason: string;
  message: string;
  row_indices: number[];
  missing_row_indices: number[];
  offset: string;
}

export interface StageLatencies {
  /** Last row → group-complete. */
  accumulateMs: number | null;
  /** Group-complete → penalized. */
  postprocessMs: number | null;
  /** Penalized → packed. */
  packMs: number | null;
  /** Last row → packed. */
  totalMs: number | null;
}

export interface TraceReport {
  groupId: string;
  batchId: string | null;
  prefix: string;
  records: TraceRecord[];
  latencies: StageLatencies;
  deadLetters: TraceDeadLetter[];
  /** Final rewards from the penalized record, in row order. */
  rewards: Array<{ row_index: number; total_reward: number; original_reward: number }> | null;
  sampleIds: string[] | null;
  tags: PackedRowTags[] | null;
}

const ORDER: TopicRole[] = ['rowCompleted', 'groupComplete', 'penalized', 'metrics', 'packed', 'deadLetter'];

/** Latencies between stages from the first record of each stage (the last row for accumulate's input). */
export function stageLatencies(records: TraceRecord[]): StageLatencies {
  const first = (role: TopicRole) => {
    const ts = records.filter((r) => r.role === role).map((r) => r.timestamp);
    return ts.length === 0 ? null : Math.min(...ts);
  };
  const rowTimes = records.filter((r) => r.role === 'rowCompleted').map((r) => r.timestamp);
  const lastRow = rowTimes.length === 0 ? null : Math.max(...rowTimes);
  const group = first('groupComplete');
  const penalized = first('penalized');
  const packed = first('packed');
  const diff = (a: number | null, b: number | null) => (a === null || b === null ? null : b - a);
  return { accumulateMs: diff(lastRow, group), postprocessMs: diff(group, penalized), packMs: diff(penalized, packed), totalMs: diff(lastRow, packed) };
}

function describe(d: DecodedRecord): string {
  switch (d.role) {
    case 'rowCompleted':
      switch (d.value.kind) {
        case 'row':
          return `row ${d.value.row.row_index}`;
        case 'gym_result':
          return `NeMo-Gym result for row ${d.value.result.row_index}`;
        case 'batch_end':
          return `batch end (${d.value.end.num_rows} rows)`;
      }
      break;
    case 'groupComplete':
      return `group (${(d.value.row_refs ?? d.value.rows).length} rows)`;
    case 'penalized':
      return `penalized (${d.value.rows.length} rows)`;
    case 'metrics':
      return `${d.value.scope} metrics (${Object.keys(d.value.values).length} values)`;
    case 'packed':
      return `packed (${d.value.sample_ids.length} samples, ${d.value.fields.length} fields)`;
    case 'deadLetter':
      return `dead letter ${d.value.reason} (${d.value.stage})`;
  }
}

/** Collects the group's records from `ranges`, decoding each one whose key is `key` (and, for metrics, whose group is `groupId`). */
async function collect(kafka: OpsClient, decoder: RecordDecoder, ranges: Array<PartitionRange & { role: TopicRole }>, key: string, groupId: string, report: TraceReport) {
  const roleOf = new Map(ranges.map((r) => [r.topic, r.role]));
  await kafka.scan(ranges, async (r: ScanRecord) => {
    if (r.key?.toString('utf8') !== key) return;
    const role = roleOf.get(r.topic)!;
    const size = r.value?.length ?? 0;
    const base = {
      topic: r.topic,
      role,
      partition: r.partition,
      offset: r.offset,
      timestamp: Number(r.timestamp),
      size,
      ...(r.chunk?.kind === 'record' ? { lastOffset: r.chunk.lastOffset, chunks: r.chunk.chunks } : {}),
    };
    let d: DecodedRecord;
    try {
      if (!r.value) throw new UndecodableError('record has no value');
      d = await decoder.decode(role, r.value);
    } catch (e) {
      if (!(e instanceof UndecodableError)) throw e;
      report.records.push({ ...base, what: `undecodable (${e.message})` });
      return;
    }
    if (d.role === 'metrics' && d.value.group_id !== groupId) return;
    report.records.push({ ...base, what: describe(d) });
    if (d.role === 'rowCompleted' && d.value.kind !== 'batch_end') report.batchId ??= d.value.kind === 'row' ? d.value.row.batch_id : d.value.result.batch_id;
    if (d.role === 'groupComplete') report.batchId ??= d.value.batch_id;
    if (d.role === 'penalized') {
      report.batchId ??= d.value.batch_id;
      report.rewards ??= d.value.rows.map((x) => ({ row_index: x.row_index, total_reward: x.total_reward, original_reward: x.original_reward }));
    }
    if (d.role === 'packed') {
      report.batchId ??= d.value.batch_id;
      report.sampleIds ??= d.value.sample_ids;
      report.tags ??= d.value.tags;
    }
    if (d.role === 'deadLetter') {
      report.batchId ??= d.value.batch_id;
      report.deadLetters.push({
        timestamp: base.timestamp,
        stage: d.value.stage,
        reason: d.value.reason,
        message: d.value.message,
        row_indices: d.value.row_indices,
        missing_row_indices: d.value.missing_row_indices,
        offset: r.offset,
      });
    }
  });
}

/** Reads the group's records on every topic under `config.topics.prefix`. */
export async function runTrace(groupId: string, config: Config): Promise<TraceReport> {
  const prefix = config.topics.prefix;
  const names = topicNames(prefix);
  const kafka = createOpsClient(config.kafka, 'trace');
  const decoder = new RecordDecoder(createRegistry(config.kafka));
  const admin = await kafka.admin();
  const report: TraceReport = { groupId, batchId: null, prefix, records: [], latencies: stageLatencies([]), deadLetters: [], rewards: null, sampleIds: null, tags: null };
  /** The key's murmur2 partition of `role`'s topic (where our producers write it), plus `extra` partitions. */
  const rangesFor = async (role: TopicRole, key: string, extra: number[] = []) => {
    const topic = names[role];
    const n = await admin.partitionCount(topic);
    const parts = [...new Set([partitionForKey(key, n), ...extra.filter((p) => p < n)])];
    return (await partitionRanges(admin, topic, { kind: 'beginning' }, parts)).map((r) => ({ ...r, role }));
  };
  try {
    // Rows: on the murmur2 partition when a publisher of ours (or the Java client's default) wrote
    // them; else a producer with another partitioner did, and every partition is read.
    await collect(kafka, decoder, await rangesFor('rowCompleted', groupId), groupId, groupId, report);
    if (!report.records.some((r) => r.role === 'rowCompleted')) {
      const all = [...Array(await admin.partitionCount(names.rowCompleted)).keys()];
      const rest = (await rangesFor('rowCompleted', groupId, all)).filter((r) => r.partition !== partitionForKey(groupId, all.length));
      await collect(kafka, decoder, rest, groupId, groupId, report);
    }
    // Downstream records sit on the murmur2 partition (separate stages) or on the partition
    // number of the group's rows (fused stages pin them to the input partition).
    const rowPartitions = [...new Set(report.records.filter((r) => r.role === 'rowCompleted').map((r) => r.partition))];
    const groupRoles: TopicRole[] = ['groupComplete', 'penalized', 'packed', 'deadLetter'];
    const ranges = (await Promise.all(groupRoles.map((role) => rangesFor(role, groupId, rowPartitions)))).flat();
    await collect(kafka, decoder, ranges, groupId, groupId, report);
    if (report.batchId !== null) await collect(kafka, decoder, await rangesFor('metrics', report.batchId), report.batchId, groupId, report);
  } finally {
    await admin.close();
  }
  report.records.sort((a, b) => ORDER.indexOf(a.role) - ORDER.indexOf(b.role) || a.timestamp - b.timestamp || Number(BigInt(a.offset) - BigInt(b.offset)));
  report.latencies = stageLatencies(report.records);
  return report;
}

const iso = (ms: number) => new Date(ms).toISOString();
const ms = (x: number | null) => (x === null ? '-' : `${x} ms`);

/** A record's offset; a chunked record's as `offsets a–b (n chunks)`, once. */
export function offsetCell(x: Pick<TraceRecord, 'offset' | 'lastOffset' | 'chunks'>): string {
  return x.chunks !== undefined && x.lastOffset !== undefined ? `offsets ${x.offset}–${x.lastOffset} (${x.chunks} chunks)` : x.offset;
}

/** The human report. */
export function formatTrace(r: TraceReport): string {
  const out: string[] = [`trace of group ${r.groupId}${r.batchId ? ` (batch ${r.batchId})` : ''} under prefix '${r.prefix}'`, ''];
  if (r.records.length === 0) {
    out.push('no records of this group on any topic');
    return out.join('\n') + '\n';
  }
  out.push(
    formatTable(
      ['topic', 'partition', 'offset', 'time', 'size', 'record'],
      r.records.map((x) => [BASE_TOPIC_NAMES[x.role], x.partition, offsetCell(x), iso(x.timestamp), formatBytes(x.size), x.what]),
      [1, 2, 4],
    ),
  );
  const l = r.latencies;
  out.push(
    'stage latencies (record timestamps):',
    `  accumulate   last row → group-complete   ${ms(l.accumulateMs)}`,
    `  postprocess  group-complete → penalized  ${ms(l.postprocessMs)}`,
    `  pack         penalized → packed          ${ms(l.packMs)}`,
    `  total        last row → packed           ${ms(l.totalMs)}`,
    '',
  );
  if (r.deadLetters.length === 0) out.push('dead letters: none', '');
  else {
    out.push(
      'dead letters:',
      formatTable(
        ['time', 'stage', 'reason', 'rows', 'missing', 'message'],
        r.deadLetters.map((d) => [iso(d.timestamp), d.stage, d.reason, d.row_indices.join(',') || '-', d.missing_row_indices.join(',') || '-', truncate(d.message, 100)]),
      ),
    );
  }
  if (r.rewards) out.push(`rewards (final / verifier): ${r.rewards.map((x) => `${x.row_index}: ${x.total_reward} / ${x.original_reward}`).join(', ')}`, '');
  if (r.tags && r.sampleIds) {
    out.push('tags (packed record):');
    r.tags.forEach((t, i) => out.push(`  ${r.sampleIds![i]}: ${JSON.stringify(t)}`));
  } else {
    out.push('tags: not packed');
  }
  return out.join('\n') + '\n';
}

export const traceCommand: Command = {
  name: 'trace',
  summary: "a group's journey over all topics: offsets, times, stage latencies, dead letters, tags",
  usage: `usage: ./rollout-stream trace <group_id> [--prefix P] [--config F] [--json]

Shows every record of one prompt group on every topic (row-completed,
group-complete, penalized, metrics, packed, dead-letter) with partition,
offset, timestamp and size; the stage latencies from the record timestamps
(last row → group-complete → penalized → packed); its dead letters (reason,
message, rows); its rewards and its final tags from the packed record. Only
the partition the group's key hashes to is read on each topic (the metrics
topic is keyed by batch id). Reads with read_committed up to the current end.

Options:
  --prefix P   topic prefix (else TOPIC_PREFIX)
  --config F   config file (brokers, registry)
  --json       the report as one JSON object

Example: ./rollout-stream trace lg1-b000001-g0003 --prefix demo.1a2b3c4d.`,
  async run(argv) {
    const { values, positionals } = parseFlags(argv, { prefix: { type: 'string' }, config: { type: 'string' }, json: { type: 'boolean' } }, true);
    if (positionals.length !== 1) throw new UsageError(`expected one group id, got ${positionals.length === 0 ? 'none' : positionals.join(' ')}`);
    const { config } = loadOpsConfig(values);
    const report = await runTrace(positionals[0]!, config);
    await processIo.out(values.json ? `${JSON.stringify(report)}\n` : formatTrace(report));
    return report.records.length === 0 ? 1 : 0;
  },
};

/**
 * `dlq list | redrive` (SPEC §7, §9): inspect the dead-letter topic and,
 * after a fix, re-publish the original records of chosen dead letters to
 * the topic they came from (their keys, their exact bytes, their partition).
 */
import type { Config } from '../config/schema.js';
import type { DeadLetterRecord } from '../streams/api/dead-letter-record.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import type { OffsetReader, OpsClient, OutgoingRecord } from '../streams/kafka/types.js';
import { createRowReader } from '../streams/kafka/kafkajs/offset-reader.js';
import { createRegistry } from '../streams/codecs/schema-registry.js';
import { partitionRanges, type StartPosition } from '../streams/ops/topic-scan.js';
import { topicNames } from '../streams/topics/names.js';
import { UndecodableError } from '../streams/codecs/wire-format.js';
import { parseFlags, UsageError, type Command } from '../tools/command.js';
import { processIo, type Io } from './io.js';
import { loadOpsConfig } from './ops-config.js';
import { parseTime } from './replay.js';
import { formatTable, truncate } from './table.js';
import { deadLetterLine, RecordDecoder } from './topic-records.js';

/** A dead letter with where it sits on the dead-letter topic. */
export interface DlqEntry {
  partition: number;
  offset: string;
  /** Record timestamp, epoch ms. */
  timestamp: number;
  record: DeadLetterRecord;
}

/** `p:o` names one dead letter; a bare `o` any partition's (refused when ambiguous). */
export interface OffsetRef {
  partition: number | null;
  offset: string;
}

export interface DlqSelector {
  reason?: string | undefined;
  stage?: string | undefined;
  groupId?: string | undefined;
  batchId?: string | undefined;
  offsets?: OffsetRef[] | undefined;
}

/** Parses `--offsets 12,3:40` into references; throws a UsageError for anything else. */
export function parseOffsets(text: string): OffsetRef[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => {
      const m = /^(?:(\d+):)?(\d+)$/.exec(s);
      if (!m) throw new UsageError(`--offsets takes offsets or partition:offset pairs separated by commas, got "${s}"`);
      return { partition: m[1] === undefined ? null : Number(m[1]), offset: String(BigInt(m[2]!)) };
    });
}

/** The entries matching every given criterion (absent criteria match all). */
export function selectDeadLetters(entries: DlqEntry[], s: DlqSelector): DlqEntry[] {
  return entries.filter((e) => {
    if (s.reason !== undefined && e.record.reason !== s.reason) return false;
    if (s.stage !== undefined && e.record.stage !== s.stage) return false;
    if (s.groupId !== undefined && e.record.group_id !== s.groupId) return false;
    if (s.batchId !== undefined && e.record.batch_id !== s.batchId) return false;
    if (s.offsets !== undefined && !s.offsets.some((o) => o.offset === e.offset && (o.partition === null || o.partition === e.partition))) return false;
    return true;
  });
}

/** Throws when a bare offset of `s.offsets` names dead letters on more than one partition. */
export function checkUnambiguous(selected: DlqEntry[], s: DlqSelector): void {
  for (const o of s.offsets ?? []) {
    if (o.partition !== null) continue;
    const parts = new Set(selected.filter((e) => e.offset === o.offset).map((e) => e.partition));
    if (parts.size > 1) {
      throw new UsageError(`offset ${o.offset} exists on partitions ${[...parts].join(', ')} of the dead-letter topic; name one as partition:offset (see dlq list)`);
    }
  }
}

/** Reads every dead letter under the config's prefix (from `from`, default the beginning). */
export async function readDeadLetters(config: Config, io: Io, from: StartPosition = { kind: 'beginning' }): Promise<DlqEntry[]> {
  const topic = topicNames(config.topics.prefix).deadLetter;
  const kafka = createOpsClient(config.kafka, 'dlq');
  const decoder = new RecordDecoder(createRegistry(config.kafka));
  const admin = await kafka.admin();
  let ranges;
  try {
    ranges = await partitionRanges(admin, topic, from);
  } finally {
    await admin.close();
  }
  const entries: DlqEntry[] = [];
  await kafka.scan(ranges, async (r) => {
    try {
      if (!r.value) throw new UndecodableError('record has no value');
      const d = await decoder.decode('deadLetter', r.value);
      if (d.role === 'deadLetter') entries.push({ partition: r.partition, offset: r.offset, timestamp: Number(r.timestamp), record: d.value });
    } catch (e) {
      if (!(e instanceof UndecodableError)) throw e;
      io.err(`dlq: skipped undecodable record ${r.topic}/${r.partition}@${r.offset}: ${e.message}\n`);
    }
  });
  entries.sort((a, b) => a.timestamp - b.timestamp || a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)));
  return entries;
}

/** The list as a table: time, where, stage, reason, group, rows, message. */
export function formatDeadLetterTable(entries: DlqEntry[]): string {
  if (entries.length === 0) return 'no dead letters\n';
  const rows = entries.map((e) => {
    const d = e.record;
    const rowText = d.row_indices.length > 0 ? d.row_indices.join(',') : '-';
    const missing = d.missing_row_indices.length > 0 ? ` (missing ${d.missing_row_indices.join(',')})` : '';
    return [new Date(e.timestamp).toISOString(), `${e.partition}:${e.offset}`, d.stage, d.reason, d.group_id ?? '-', `${rowText}${missing}`, truncate(d.message, 80)];
  });
  const byReason = new Map<string, number>();
  for (const e of entries) byReason.set(e.record.reason, (byReason.get(e.record.reason) ?? 0) + 1);
  const counts = [...byReason].sort().map(([r, n]) => `${r}=${n}`).join(' ');
  return `${formatTable(['time', 'at', 'stage', 'reason', 'group', 'rows', 'message'], rows)}${entries.length} dead letters: ${counts}\n`;
}

/** One JSON line per dead letter: the replay form plus where it sits on the dead-letter topic. */
export function deadLetterJson(e: DlqEntry): string {
  const line = JSON.parse(deadLetterLine(e.record)) as { dead_letter: Record<string, unknown> };
  return JSON.stringify({ dead_letter: { ...line.dead_letter, dlq_partition: e.partition, dlq_offset: e.offset, time: new Date(e.timestamp).toISOString() } });
}

export interface RedriveResult {
  /** Source records re-published (or that would be, in a dry run). */
  republished: Array<{ topic: string; partition: number; offset: string; key: string | null; bytes: number; readBack: boolean }>;
  /** Dead letters of which nothing is re-published, and why (no source records; a source record no longer readable). */
  refused: Array<DlqEntry & { why: string }>;
  dryRun: boolean;
}

/** Reads source records at their coordinates (read_committed); absent: gone (retention) or never committed. */
export type SourceReader = Pick<OffsetReader, 'read'>;

/**
 * Re-publishes the source records of `selected` (key and value as they
 * were, to their topic and partition). A source whose value the dead letter
 * omitted (too large to carry) is read at its coordinates first; a dead
 * letter with a source that is no longer there is refused as a whole. A
 * source record named by several dead letters is sent once. Nothing else
 * of the source is copied (headers: a fused process's hand-off marker would
 * make the stage skip it).
 */
export async function redrive(kafka: OpsClient, selected: DlqEntry[], dryRun: boolean, reader?: SourceReader): Promise<RedriveResult> {
  const result: RedriveResult = { republished: [], refused: [], dryRun };
  const out: OutgoingRecord[] = [];
  const seen = new Set<string>();
  for (const e of selected) {
    if (e.record.records.length === 0) {
      result.refused.push({ ...e, why: 'it carries no source records' });
      continue;
    }
    const values: Array<Buffer | null> = e.record.records.map((r) => r.value);
    const omitted = e.record.records.filter((r) => r.value === null);
    if (omitted.length > 0) {
      if (!reader) {
        result.refused.push({ ...e, why: 'its original values were omitted and no reader was given' });
        continue;
      }
      const found = await readSources(reader, omitted);
      const gone = omitted.filter((r) => !found.has(sourceId(r)));
      if (gone.length > 0) {
        result.refused.push({
          ...e,
          why:
            `its original values were omitted (too large to carry) and ${gone.map((r) => sourceId(r)).join(', ')} can no longer be read ` +
            `(deleted by the topic's retention, or never committed)`,
        });
        continue;
      }
      e.record.records.forEach((r, i) => (values[i] ??= found.get(sourceId(r))!));
    }
    e.record.records.forEach((r, i) => {
      const id = sourceId(r);
      if (r.offset !== '-1' && seen.has(id)) return;
      seen.add(id);
      const value = values[i]!;
      out.push({ topic: r.topic, key: r.key, value, partition: r.partition });
      result.republished.push({ topic: r.topic, partition: r.partition, offset: r.offset, key: r.key?.toString('utf8') ?? null, bytes: value.length, readBack: r.value === null });
    });
  }
  if (dryRun || out.length === 0) return result;
  const sink = await kafka.chunkingSink();
  try {
    await sink.send(out);
  } finally {
    await sink.close();
  }
  return result;
}

const sourceId = (r: { topic: string; partition: number; offset: string }): string => `${r.topic}/${r.partition}@${r.offset}`;

/** The values of `sources` read at their coordinates, by sourceId; an absent one is not in the map. */
async function readSources(reader: SourceReader, sources: Array<{ topic: string; partition: number; offset: string }>): Promise<Map<string, Buffer>> {
  const byPartition = new Map<string, { topic: string; partition: number; offsets: string[] }>();
  for (const r of sources) {
    const k = `${r.topic}/${r.partition}`;
    const entry = byPartition.get(k) ?? byPartition.set(k, { topic: r.topic, partition: r.partition, offsets: [] }).get(k)!;
    entry.offsets.push(r.offset);
  }
  const found = new Map<string, Buffer>();
  for (const { topic, partition, offsets } of byPartition.values()) {
    for (const [offset, rec] of await reader.read(topic, partition, offsets)) {
      if (rec.value) found.set(sourceId({ topic, partition, offset }), Buffer.from(rec.value));
    }
  }
  return found;
}

export function formatRedrive(r: RedriveResult): string {
  const out: string[] = [];
  const topics = [...new Set(r.republished.map((x) => x.topic))];
  for (const x of r.republished) {
    out.push(`${r.dryRun ? 'would re-publish' : 're-published'} ${x.topic}/${x.partition}@${x.offset} key=${x.key ?? '-'} (${x.bytes} bytes${x.readBack ? ', read back at its offset' : ''})`);
  }
  for (const e of r.refused) {
    const where = e.record.records.map((s) => sourceId(s)).join(', ') || 'no source records';
    out.push(`REFUSED dead letter ${e.partition}:${e.offset} (${e.record.reason}, group ${e.record.group_id ?? '-'}): ${e.why}; its sources: ${where}`);
  }
  out.push(
    `${r.dryRun ? 'dry run: would re-publish' : 're-published'} ${r.republished.length} records to ${topics.length > 0 ? topics.join(', ') : 'no topic'}` +
      (r.refused.length > 0 ? `; refused ${r.refused.length} dead letters` : ''),
  );
  return out.join('\n') + '\n';
}

const FLAGS = {
  reason: { type: 'string' },
  stage: { type: 'string' },
  group: { type: 'string' },
  batch: { type: 'string' },
  offsets: { type: 'string' },
  'from-time': { type: 'string' },
  all: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  json: { type: 'boolean' },
  prefix: { type: 'string' },
  config: { type: 'string' },
} as const;

export interface DlqArgs {
  sub: 'list' | 'redrive';
  selector: DlqSelector;
  from: StartPosition;
  all: boolean;
  dryRun: boolean;
  json: boolean;
  config?: string | undefined;
  prefix?: string | undefined;
}

export function parseDlqArgs(argv: string[]): DlqArgs {
  const { values, positionals } = parseFlags(argv, FLAGS, true);
  const sub = positionals[0];
  if (sub !== 'list' && sub !== 'redrive') throw new UsageError(`expected 'list' or 'redrive', got ${sub ?? 'nothing'}`);
  if (positionals.length > 1) throw new UsageError(`unexpected argument ${positionals[1]}`);
  const selector: DlqSelector = {
    reason: values.reason,
    stage: values.stage,
    groupId: values.group,
    batchId: values.batch,
    offsets: values.offsets === undefined ? undefined : parseOffsets(values.offsets),
  };
  const all = values.all ?? false;
  if (sub === 'redrive' && !all && Object.values(selector).every((v) => v === undefined)) {
    throw new UsageError('redrive needs a selection (--reason, --stage, --group, --batch, --offsets) or --all');
  }
  if (sub === 'list' && (values['dry-run'] || all)) throw new UsageError('--dry-run and --all apply to redrive');
  if (sub === 'redrive' && values.json) throw new UsageError('--json applies to list');
  return {
    sub,
    selector,
    from: values['from-time'] === undefined ? { kind: 'beginning' } : { kind: 'time', timeMs: parseTime(values['from-time']) },
    all,
    dryRun: values['dry-run'] ?? false,
    json: values.json ?? false,
    config: values.config,
    prefix: values.prefix,
  };
}

/** Runs `dlq list|redrive`; returns the exit code (1 when a redrive refused something). */
export async function runDlq(args: DlqArgs, config: Config, io: Io): Promise<{ code: number; entries: DlqEntry[]; redrive: RedriveResult | null }> {
  const entries = selectDeadLetters(await readDeadLetters(config, io, args.from), args.selector);
  if (args.sub === 'list') {
    if (args.json) for (const e of entries) await io.out(`${deadLetterJson(e)}\n`);
    else await io.out(formatDeadLetterTable(entries));
    return { code: 0, entries, redrive: null };
  }
  checkUnambiguous(entries, args.selector);
  const reader = createRowReader(config.kafka);
  let result: RedriveResult;
  try {
    result = await redrive(createOpsClient(config.kafka, 'dlq'), entries, args.dryRun, reader);
  } finally {
    await reader.close();
  }
  await io.out(formatRedrive(result));
  return { code: result.refused.length > 0 ? 1 : 0, entries, redrive: result };
}

export const dlqCommand: Command = {
  name: 'dlq',
  summary: 'dead letters: list (filter by reason, stage, group) and redrive to their source topic',
  usage: `usage: ./rollout-stream dlq list    [--reason R] [--stage S] [--group ID] [--batch ID] [--from-time ISO] [--json]
       ./rollout-stream dlq redrive [--reason R] [--stage S] [--group ID] [--batch ID] [--offsets a,b] [--all] [--dry-run]
       (both: [--prefix P] [--config F])

list     prints the dead letters of <prefix>rollout.dead-letter as a table (time, at = partition:offset
         on the dead-letter topic, stage, reason, group, rows, message) and counts by reason;
         --json prints one JSON line per dead letter instead
redrive  re-publishes the original records carried by the selected dead letters (their keys and
         exact bytes, to their source topic and partition), e.g. after fixing the producer or
         the config, and says how many. A dead letter whose original values were omitted (too
         large to carry) has them read back at their source offsets first; it is refused when
         they are gone (retention). Records redriven into rollout.group-complete or
         rollout.penalized are processed once, in fused as in separate mode, and a group that
         was packed already is not packed again. Needs a selection or --all; --dry-run only
         lists what would be sent.

Selection:
  --reason R     e.g. nan_logprobs, incomplete_group, undecodable (all: docs/formats.md#dead-letter)
  --stage S      accumulate | postprocess | pack
  --group ID     one group
  --batch ID     one batch
  --offsets L    dead letters at these offsets of the dead-letter topic: o or partition:o, comma-separated
  --from-time T  only dead letters written at or after T (ISO-8601 or epoch ms)

Examples:
  ./rollout-stream dlq list --reason incomplete_group
  ./rollout-stream dlq redrive --group lg1-b000002-g0005 --dry-run
  ./rollout-stream dlq redrive --offsets 0:12,3:7`,
  async run(argv) {
    const args = parseDlqArgs(argv);
    const { config } = loadOpsConfig(args);
    return (await runDlq(args, config, processIo)).code;
  },
};

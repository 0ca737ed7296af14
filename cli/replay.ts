/**
 * `replay` (SPEC §7, §9): reads one of our topics from an offset or a time
 * up to the end offsets captured at start (read_committed), filters by group
 * or batch, and prints the records as JSON lines, re-publishes their
 * original bytes to another topic or prefix, or re-runs postprocess on
 * group-complete records into a sandbox prefix.
 */
import type { Config } from '../config/schema.js';
import { resolvePostprocessConfig } from '../processors/postprocess.js';
import { RolloutStreamError } from '../errors/index.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import type { IdempotentSink, OpsAdmin, OpsClient, OutgoingRecord } from '../streams/kafka/types.js';
import { createRegistry } from '../streams/codecs/schema-registry.js';
import type { SchemaRegistryClient } from '../streams/codecs/schema-registry.js';
import { partitionRanges, type ScanRecord, type StartPosition } from '../streams/ops/topic-scan.js';
import { describeChunkSet } from '../streams/chunks/chunked-scan.js';
import { BASE_TOPIC_NAMES } from '../streams/topics/names.js';
import { withoutHandoff } from '../streams/api/headers.js';
import { createTopics } from '../streams/topics/create.js';
import { UndecodableError } from '../streams/codecs/wire-format.js';
import { parseFlags, UsageError, type Command } from '../tools/command.js';
import { processIo, type Io } from './io.js';
import { intFlag, loadOpsConfig } from './ops-config.js';
import { ProgressReporter } from './progress.js';
import { formatRerunReport, rerunPostprocess, type RerunReport, type SourcedGroup } from './rerun-postprocess.js';
import { matchesFilter, openRowResolver, RecordDecoder, recordIdentity, recordJsonLine, resolveTopic, skipByKey, type RecordFilter, type ResolvedTopic } from './topic-records.js';

export type ReplayMode =
  | { kind: 'print' }
  | { kind: 'republish'; toTopic: string | null; toPrefix: string | null }
  | { kind: 'rerun'; sandboxPrefix: string };

export interface ReplayArgs {
  topic: string;
  from: StartPosition;
  filter: RecordFilter;
  limit: number | null;
  mode: ReplayMode;
  quiet: boolean;
  config?: string | undefined;
  prefix?: string | undefined;
}

const FLAGS = {
  topic: { type: 'string' },
  'from-offset': { type: 'string' },
  'from-time': { type: 'string' },
  group: { type: 'string' },
  batch: { type: 'string' },
  'to-topic': { type: 'string' },
  'to-prefix': { type: 'string' },
  limit: { type: 'string' },
  'rerun-postprocess': { type: 'boolean' },
  'sandbox-prefix': { type: 'string' },
  config: { type: 'string' },
  prefix: { type: 'string' },
  quiet: { type: 'boolean' },
} as const;

/** `2024-05-01T12:00:00Z` (any Date.parse-able ISO time) or epoch milliseconds → epoch ms. */
export function parseTime(text: string): number {
  const ms = /^\d+$/.test(text) ? Number(text) : Date.parse(text);
  if (!Number.isFinite(ms)) throw new UsageError(`--from-time must be an ISO-8601 time (e.g. 2024-05-01T12:00:00Z) or epoch ms, got ${text}`);
  return ms;
}

/** Parses and cross-checks the flags (one start, one destination, rerun only on group-complete). */
export function parseReplayArgs(argv: string[]): ReplayArgs {
  const { values } = parseFlags(argv, FLAGS);
  if (!values.topic) throw new UsageError('--topic is required');
  if (values['from-offset'] !== undefined && values['from-time'] !== undefined) throw new UsageError('give --from-offset or --from-time, not both');
  let from: StartPosition = { kind: 'beginning' };
  if (values['from-offset'] !== undefined) {
    if (!/^-?\d+$/.test(values['from-offset'])) throw new UsageError(`--from-offset must be an integer, got ${values['from-offset']}`);
    from = { kind: 'offset', offset: BigInt(values['from-offset']) };
  } else if (values['from-time'] !== undefined) {
    from = { kind: 'time', timeMs: parseTime(values['from-time']) };
  }
  if (values['to-topic'] !== undefined && values['to-prefix'] !== undefined) throw new UsageError('give --to-topic or --to-prefix, not both');
  const republish = values['to-topic'] !== undefined || values['to-prefix'] !== undefined;
  let mode: ReplayMode = { kind: 'print' };
  if (values['rerun-postprocess']) {
    if (republish) throw new UsageError('--rerun-postprocess writes to --sandbox-prefix; it cannot be combined with --to-topic/--to-prefix');
    if (!values['sandbox-prefix']) throw new UsageError('--rerun-postprocess needs --sandbox-prefix P (where the new penalized and metrics records go)');
    if (!values.topic.endsWith(BASE_TOPIC_NAMES.groupComplete)) {
      throw new UsageError(`--rerun-postprocess reads group-complete records; use --topic ${BASE_TOPIC_NAMES.groupComplete}, not ${values.topic}`);
    }
    mode = { kind: 'rerun', sandboxPrefix: values['sandbox-prefix'] };
  } else if (values['sandbox-prefix'] !== undefined) {
    throw new UsageError('--sandbox-prefix only applies with --rerun-postprocess');
  } else if (republish) {
    mode = { kind: 'republish', toTopic: values['to-topic'] ?? null, toPrefix: values['to-prefix'] ?? null };
  }
  const limit = values.limit === undefined ? null : intFlag('limit', values.limit, 0, 1);
  return {
    topic: values.topic,
    from,
    filter: { groupId: values.group, batchId: values.batch },
    limit,
    mode,
    quiet: values.quiet ?? false,
    config: values.config,
    prefix: values.prefix,
  };
}

export interface ReplaySummary {
  topic: string;
  /** Records read from the topic (before filtering). */
  scanned: number;
  /** Records that matched the filters (printed, re-published or re-run). */
  matched: number;
  /** Undecodable records skipped (printing, or filtering by batch). */
  undecodable: number;
  /** Where re-published records went. */
  target: string | null;
  complete: boolean;
  rerun: RerunReport | null;
}

/**
 * Runs a replay. Prints JSON lines to `io.out` (print mode), the re-run
 * report (rerun mode), and logs and progress to `io.err`.
 */
export async function runReplay(args: ReplayArgs, config: Config, configDir: string, io: Io): Promise<ReplaySummary> {
  const source = resolveTopic(args.topic, config.topics.prefix);
  if (args.mode.kind === 'rerun' && args.mode.sandboxPrefix === source.prefix) {
    throw new UsageError(`--sandbox-prefix must differ from the source prefix '${source.prefix}': the re-run must not write into production topics`);
  }
  // Resolve the new postprocess config before reading anything: a bad one stops here.
  const postprocess = args.mode.kind === 'rerun' ? resolvePostprocessConfig(config.postprocess, { configDir }) : null;
  const kafka = createOpsClient(config.kafka, 'replay');
  const registry = createRegistry(config.kafka);
  const admin = await kafka.admin();
  let ranges;
  let target: { topic: string; samePartitions: boolean } | null = null;
  try {
    const sourcePartitions = await admin.partitionCount(source.topic);
    ranges = await partitionRanges(admin, source.topic, args.from);
    if (args.mode.kind === 'republish') target = await republishTarget(admin, registry, config, source, args.mode, sourcePartitions);
  } finally {
    await admin.close();
  }
  const total = ranges.reduce((n, r) => n + Number(BigInt(r.end) - BigInt(r.start)), 0);
  io.err(`replay: ${source.topic}, ${total} records in range on ${ranges.length} partitions${target ? ` → ${target.topic}` : ''}\n`);

  const summary: ReplaySummary = { topic: source.topic, scanned: 0, matched: 0, undecodable: 0, target: target?.topic ?? null, complete: true, rerun: null };
  // group-complete and penalized records by reference print (and re-run) with their rows.
  const rowReader = source.role === 'groupComplete' || source.role === 'penalized' ? openRowResolver(config, configDir, registry, source.prefix) : null;
  const decoder = new RecordDecoder(registry, rowReader?.rows);
  const reporter = args.quiet ? null : new ProgressReporter({ unit: 'records', total, tty: io.errIsTty, write: io.err, label: 'replay' });
  let bytes = 0;
  const publisher = target ? new Republisher(kafka, target.topic, target.samePartitions) : null;
  await publisher?.connect();
  const groups: SourcedGroup[] = [];
  const needDecode = args.mode.kind !== 'republish' || args.filter.batchId !== undefined || (source.role === 'metrics' && args.filter.groupId !== undefined);

  try {
    const scan = await kafka.scan(
      ranges,
      async (r) => {
        summary.scanned++;
        bytes += r.value?.length ?? 0;
        const key = r.key?.toString('utf8') ?? null;
        if (skipByKey(source.role, key, args.filter)) return;
        let line: string | null = null;
        if (needDecode) {
          if (!r.value) return;
          let decoded;
          try {
            decoded = await decoder.decode(source.role, r.value);
          } catch (e) {
            if (!(e instanceof UndecodableError)) throw e;
            summary.undecodable++;
            if (args.filter.groupId === undefined && args.filter.batchId === undefined) {
              io.err(`replay: skipped undecodable record ${r.topic}/${r.partition}@${r.offset}: ${e.message}\n`);
            }
            return;
          }
          if (!matchesFilter(recordIdentity(decoded), args.filter)) return;
          if (args.mode.kind === 'print') line = recordJsonLine(decoded);
          if (args.mode.kind === 'rerun' && decoded.role === 'groupComplete') groups.push({ group: decoded.value, source: r });
        }
        summary.matched++;
        if (line !== null) await io.out(`${line}\n`);
        if (publisher) await publisher.push(r);
        if (args.limit !== null && summary.matched >= args.limit) return false;
      },
      {
        onProgress: () => reporter?.update(summary.scanned, bytes),
        // A chunk set begun before the start (--from-offset, --from-time) is reported, never printed.
        onChunkSet: (set) => io.err(`replay: ${describeChunkSet(set)}\n`),
      },
    );
    summary.complete = scan.complete || (args.limit !== null && summary.matched >= args.limit);
    if (scan.unfinished.length > 0) io.err(`replay: gave up waiting on ${scan.unfinished.join(', ')} (no progress; an open transaction?)\n`);
    await publisher?.flush();
  } finally {
    await publisher?.disconnect();
    await rowReader?.close();
  }
  reporter?.finish(summary.scanned, bytes);

  if (args.mode.kind === 'rerun') {
    summary.rerun = await rerunPostprocess({ kafka, registry, config, postprocess: postprocess!, groups, sourcePrefix: source.prefix, sandboxPrefix: args.mode.sandboxPrefix });
    await io.out(formatRerunReport(summary.rerun, source.prefix));
  }
  const what = args.mode.kind === 'republish' ? `re-published to ${summary.target}` : args.mode.kind === 'rerun' ? 're-run' : 'printed';
  io.err(`replay: ${summary.matched} of ${summary.scanned} records ${what}${summary.undecodable ? `, ${summary.undecodable} undecodable skipped` : ''}\n`);
  return summary;
}

/** The topic re-published records go to; `--to-prefix` creates the prefix's topics when missing, `--to-topic` must exist. */
async function republishTarget(
  admin: OpsAdmin,
  registry: SchemaRegistryClient,
  config: Config,
  source: ResolvedTopic,
  mode: Extract<ReplayMode, { kind: 'republish' }>,
  sourcePartitions: number,
): Promise<{ topic: string; samePartitions: boolean }> {
  const topic = mode.toTopic ?? `${mode.toPrefix}${BASE_TOPIC_NAMES[source.role]}`;
  // An intermediate topic may be re-published into itself (its stage processes the copies once, and a group
  // packed already is not packed again); the scan stops at the end offsets captured at start, so it never reads its own output.
  if (topic === source.topic && source.role !== 'groupComplete' && source.role !== 'penalized') {
    throw new UsageError(`the target ${topic} is the source topic; only the pipeline's intermediate topics (group-complete, penalized) can be re-published into themselves`);
  }
  if (mode.toPrefix !== null && !(await admin.listTopics()).includes(topic)) {
    await createTopics(admin, registry, { ...config, topics: { ...config.topics, prefix: mode.toPrefix, partitions: sourcePartitions } });
  }
  let n: number;
  try {
    n = await admin.partitionCount(topic);
  } catch (e) {
    if (e instanceof RolloutStreamError && e.code === 'unknown_topic') throw new UsageError(`--to-topic ${topic} does not exist; create it first (or use --to-prefix)`);
    throw e;
  }
  return { topic, samePartitions: n === sourcePartitions };
}

/**
 * Re-publishes original records (key, value, headers: the exact bytes; only
 * the fused hand-off marker is left out, so the copy is processed). With
 * the same partition count it keeps each record's partition, so a BatchEnd
 * written to every partition stays on every partition.
 */
class Republisher {
  private sink: IdempotentSink | null = null;
  private buffer: OutgoingRecord[] = [];
  private buffered = 0;

  constructor(
    private readonly kafka: OpsClient,
    private readonly topic: string,
    private readonly samePartitions: boolean,
  ) {}

  async connect(): Promise<void> {
    this.sink = await this.kafka.chunkingSink();
  }

  async push(r: ScanRecord): Promise<void> {
    // Without the fused hand-off marker: the copy is new input to the stage that reads it.
    this.buffer.push({ topic: this.topic, key: r.key, value: r.value, headers: withoutHandoff(r.headers), ...(this.samePartitions ? { partition: r.partition } : {}) });
    this.buffered += r.value?.length ?? 0;
    if (this.buffered >= 1024 * 1024 || this.buffer.length >= 500) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.buffer.length === 0) return;
    const messages = this.buffer;
    this.buffer = [];
    this.buffered = 0;
    await this.sink!.send(messages);
  }

  async disconnect(): Promise<void> {
    await this.sink?.close();
  }
}

export const replayCommand: Command = {
  name: 'replay',
  summary: 'read a topic from an offset or time, filter, print JSON lines or re-publish',
  usage: `usage: ./rollout-stream replay --topic T [--from-offset O | --from-time ISO] [--group ID] [--batch ID]
                              [--to-topic X | --to-prefix P] [--limit N] [--prefix P] [--config F] [--quiet]
       ./rollout-stream replay --topic rollout.group-complete --rerun-postprocess --config F --sandbox-prefix P
                              [--from-offset O | --from-time ISO] [--group ID] [--batch ID] [--limit N]

Reads topic T (read_committed) from a start position up to the end offsets
captured when it starts, so it always ends. T is a base name resolved with
the prefix (rollout.packed → <prefix>rollout.packed) or a full topic name.
By default each record is printed to stdout as one JSON line (docs/formats.md: rows,
{"batch_end"}, {"group"}, {"penalized"}, {"packed"}, {"metrics"},
{"dead_letter"}); logs and progress go to stderr.

Start (default: the beginning of every partition):
  --from-offset O    offset O on every partition; --from-offset=-N: the last N records of each
  --from-time ISO    the first record at or after this time (ISO-8601 or epoch ms)
Filters:
  --group ID         only records of this group (metrics: its group metrics)
  --batch ID         only records of this batch
  --limit N          stop after N matching records
Destinations (instead of printing):
  --to-topic X       re-publish the original bytes (key, value, headers) to existing topic X;
                     rollout.group-complete and rollout.penalized may be re-published into
                     themselves: the copies are processed once (fused or separate), and a group
                     packed already is not packed again
  --to-prefix P      re-publish to P + T's base name (topics created if missing)
  --rerun-postprocess  postprocess the group-complete records again with the postprocess
                     block of --config, write penalized/metrics/dead letters under
                     --sandbox-prefix P (topics created if needed), and print rewards and
                     metrics before (the production penalized/metrics records) and after
Other:
  --prefix P         topic prefix for base names (else TOPIC_PREFIX)
  --config F         config file (brokers, registry; the postprocess block for a re-run)
  --quiet            no progress output

Examples:
  ./rollout-stream replay --topic rollout.packed --group lg1-b000001-g0003
  ./rollout-stream replay --topic rollout.dead-letter --from-time 2024-05-01T12:00:00Z --limit 10
  ./rollout-stream replay --topic rollout.row-completed --batch b000002 --to-prefix sandbox.
  ./rollout-stream replay --topic rollout.group-complete --batch b000002 --rerun-postprocess \\
      --config penalties.yaml --sandbox-prefix sandbox.`,
  async run(argv) {
    const args = parseReplayArgs(argv);
    const { config, configDir } = loadOpsConfig(args);
    const summary = await runReplay(args, config, configDir, processIo);
    return summary.complete ? 0 : 1;
  },
};

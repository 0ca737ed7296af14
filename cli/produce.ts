/**
 * `produce` (SPEC §2.2, §9): publishes JSON lines from stdin to
 * `rollout.row-completed` through the project's `RolloutPublisher`, so a
 * file of rows or NeMo-Gym results lands exactly where a rollout worker's
 * publisher would put it (murmur2 of the group id, idempotent, acks=all).
 *
 * Every line is judged on its own: a bad line is reported with its number
 * and reason and nothing of it is sent; the good lines are published
 * (a file with one typo should not need a second run for the other
 * thousand rows, and a re-run is harmless anyway: identical records are
 * dropped by accumulate as replays). The exit code is 1 when any line was
 * rejected, so a script still notices. Stdout stays empty.
 */
import { createInterface } from 'node:readline';
import type { Config } from '../config/schema.js';
import { JsonFormError, parseJsonLine } from '../json-form/form.js';
import { batchIdentity } from '../streams/publish/batch-identity.js';
import { createPublisher, PublishValidationError, type PublisherStats, type RolloutPublisher } from '../streams/publish/publisher.js';
import { topicNames } from '../streams/topics/names.js';
import type { GymResult, RolloutRow } from '../processors/types.js';
import { parseFlags, UsageError, type Command } from '../tools/command.js';
import { processIo, type Io } from './io.js';
import { intFlag, loadOpsConfig } from './ops-config.js';
import { formatBytes, ProgressReporter } from './progress.js';

export type ProduceFormat = 'row' | 'gym-result';

export interface ProduceArgs {
  /** Only this kind of record line is accepted; null accepts both. */
  format: ProduceFormat | null;
  /** Write each batch's BatchEnd at the end of input. */
  batchEnd: boolean;
  /** Stamp group_index/row_index/num_generations from each line's position in its batch (groups of N). */
  stampN: number | null;
  quiet: boolean;
  config?: string | undefined;
  prefix?: string | undefined;
}

/** What `produce` needs of a publisher (a fake in unit tests). */
export type ProducePublisher = Pick<RolloutPublisher, 'publishRow' | 'publishResult' | 'endBatch' | 'stats' | 'partitions'>;

export interface RejectedLine {
  line: number;
  /** A `PublishValidationError` reason, or `malformed_line`, `not_a_record`, `wrong_format`. */
  reason: string;
  message: string;
}

export interface ProduceSummary {
  topic: string;
  /** Non-blank lines read. */
  lines: number;
  /** BatchEnds written because of `--batch-end` (also counted in `stats.batchEnds`). */
  autoBatchEnds: number;
  stats: PublisherStats;
  partitions: number;
  rejected: RejectedLine[];
  seconds: number;
}

const FLAGS = {
  format: { type: 'string' },
  'batch-end': { type: 'boolean' },
  'stamp-identity': { type: 'string' },
  config: { type: 'string' },
  prefix: { type: 'string' },
  quiet: { type: 'boolean' },
} as const;

export function parseProduceArgs(argv: string[]): ProduceArgs {
  const { values } = parseFlags(argv, FLAGS);
  const format = values.format ?? null;
  if (format !== null && format !== 'row' && format !== 'gym-result') throw new UsageError(`--format must be row or gym-result, got ${format}`);
  const stamp = values['stamp-identity'];
  return {
    format,
    batchEnd: values['batch-end'] ?? false,
    stampN: stamp === undefined ? null : intFlag('stamp-identity', stamp, 1, 1),
    quiet: values.quiet ?? false,
    config: values.config,
    prefix: values.prefix,
  };
}

/** Per batch, in order of first appearance: records published, and whether an explicit BatchEnd followed the last of them. */
interface BatchSeen {
  published: number;
  /** Record lines of the batch read so far (the `--stamp-identity` position). */
  lines: number;
  closed: boolean;
}

const KIND_NAMES: Record<string, string> = { group: 'group', penalized: 'penalized', packed: 'packed', metrics: 'metrics', dead_letter: 'dead_letter' };

/**
 * Publishes every line of `lines` (1-based line numbers count every line,
 * blank ones included; blank lines are skipped). Record lines go through
 * `publishRow` / `publishResult`, `{"batch_end": …}` lines through
 * `endBatch`; with `args.batchEnd`, each batch that has no explicit
 * BatchEnd after its last record gets one at the end, `num_rows` = the
 * records of that batch published by this run. Validation failures are
 * collected, not thrown; a send failure (broker gone after the client's
 * retries) is thrown.
 */
export async function runProduce(
  args: ProduceArgs,
  lines: AsyncIterable<string>,
  publisher: ProducePublisher,
  io: Io,
  topic: string,
  stop: { requested: boolean } = { requested: false },
): Promise<ProduceSummary> {
  const started = performance.now();
  const reporter = !args.quiet && io.errIsTty ? new ProgressReporter({ unit: 'records', total: null, tty: true, write: io.err, label: 'produce' }) : null;
  const rejected: RejectedLine[] = [];
  const batches = new Map<string, BatchSeen>();
  const batchOf = (id: string): BatchSeen => {
    let b = batches.get(id);
    if (b === undefined) batches.set(id, (b = { published: 0, lines: 0, closed: false }));
    return b;
  };
  let lineNo = 0;
  let nonBlank = 0;
  let autoBatchEnds = 0;
  const reject = (reason: string, message: string) => void rejected.push({ line: lineNo, reason, message });
  const progress = () => {
    const s = publisher.stats();
    reporter?.update(s.rows + s.results + s.batchEnds, s.bytes);
  };

  for await (const text of lines) {
    if (stop.requested) break;
    lineNo++;
    if (text.trim() === '') continue;
    nonBlank++;
    let parsed;
    try {
      parsed = parseJsonLine(text);
    } catch (e) {
      if (!(e instanceof JsonFormError)) throw e;
      reject('malformed_line', e.message);
      continue;
    }
    try {
      if (parsed.kind === 'batch_end') {
        await publisher.endBatch(parsed.end.batch_id, parsed.end.num_rows);
        batchOf(parsed.end.batch_id).closed = true;
      } else if (parsed.kind === 'row' || parsed.kind === 'gym_result') {
        const isRow = parsed.kind === 'row';
        if (args.format !== null && args.format !== (isRow ? 'row' : 'gym-result')) {
          reject('wrong_format', `a ${isRow ? 'row' : 'GymResult'} line, but --format ${args.format}`);
          continue;
        }
        const record = parsed.record as Record<string, unknown>;
        const batchId = typeof record.batch_id === 'string' ? record.batch_id : null;
        const batch = batchId === null ? null : batchOf(batchId);
        if (args.stampN !== null && batch !== null) Object.assign(record, batchIdentity(batch.lines, args.stampN));
        if (batch !== null) batch.lines++;
        if (isRow) await publisher.publishRow(record as unknown as RolloutRow);
        else await publisher.publishResult(record as unknown as GymResult);
        // validation passed, so batch_id is a string and `batch` is set.
        batch!.published++;
        batch!.closed = false;
      } else {
        reject('not_a_record', `a ${KIND_NAMES[parsed.kind] ?? parsed.kind} line cannot be published to rollout.row-completed (expected a row, a GymResult or a batch_end line)`);
      }
    } catch (e) {
      if (!(e instanceof PublishValidationError)) throw e;
      reject(e.reason, e.message);
    }
    progress();
  }
  if (args.batchEnd && !stop.requested) {
    for (const [id, b] of batches) {
      if (b.closed || b.published === 0) continue;
      await publisher.endBatch(id, b.published);
      autoBatchEnds++;
    }
  }
  const stats = publisher.stats();
  reporter?.finish(stats.rows + stats.results + stats.batchEnds, stats.bytes);
  return { topic, lines: nonBlank, autoBatchEnds, stats, partitions: publisher.partitions, rejected, seconds: (performance.now() - started) / 1000 };
}

const SHOWN_REJECTIONS = 100;

/** The closing summary (stderr): what was published where, and every rejected line (the first 100) with its reason. */
export function formatProduceSummary(s: ProduceSummary): string {
  const { stats } = s;
  const used = stats.partitionsUsed;
  const out = [
    `produce summary (→ ${s.topic})`,
    `  lines       ${s.lines} read, ${s.lines - s.rejected.length} accepted, ${s.rejected.length} rejected`,
    `  rows        ${stats.rows}`,
    `  gym results ${stats.results}`,
    `  batch ends  ${stats.batchEnds}${s.autoBatchEnds > 0 ? ` (${s.autoBatchEnds} from --batch-end)` : ''}, each to all ${s.partitions} partitions`,
    `  records     ${stats.records}`,
    `  volume      ${formatBytes(stats.bytes)}`,
    `  partitions  ${used.length > 0 ? used.join(', ') : 'none'} of ${s.partitions} received rows`,
    `  duration    ${s.seconds.toFixed(2)} s`,
  ];
  if (s.rejected.length > 0) {
    out.push(`  rejected lines (nothing of them was sent):`);
    for (const r of s.rejected.slice(0, SHOWN_REJECTIONS)) out.push(`    line ${r.line}: ${r.reason}: ${r.message}`);
    if (s.rejected.length > SHOWN_REJECTIONS) out.push(`    … and ${s.rejected.length - SHOWN_REJECTIONS} more`);
  }
  return `${out.join('\n')}\n`;
}

/** Opens the publisher (config, topic and registry checked before stdin is read), runs, prints the summary. */
export async function produceMain(argv: string[], io: Io = processIo): Promise<number> {
  const args = parseProduceArgs(argv);
  const { config } = loadOpsConfig(args);
  return produceWith(args, config, io);
}

async function produceWith(args: ProduceArgs, config: Config, io: Io): Promise<number> {
  const topic = topicNames(config.topics.prefix).rowCompleted;
  const publisher = await createPublisher(config, { clientSuffix: 'produce' });
  const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const stop = { requested: false };
  const onSignal = () => {
    stop.requested = true;
    io.err('\nproduce: stopping after the lines read so far (Ctrl-C again to abort)\n');
    input.close();
  };
  process.once('SIGINT', onSignal);
  let summary: ProduceSummary;
  try {
    summary = await runProduce(args, input, publisher, io, topic, stop);
  } finally {
    process.off('SIGINT', onSignal);
    await publisher.close();
  }
  if (!args.quiet || summary.rejected.length > 0) io.err(formatProduceSummary(summary));
  if (stop.requested) return 130;
  return summary.rejected.length > 0 ? 1 : 0;
}

export const produceCommand: Command = {
  name: 'produce',
  summary: 'publish JSON lines (rows, NeMo-Gym results, batch ends) from stdin to rollout.row-completed',
  usage: `usage: ./rollout-stream produce [--format row|gym-result] [--batch-end] [--stamp-identity N]
                               [--prefix P] [--config F] [--quiet]

Reads JSON lines (docs/formats.md) from stdin and publishes them to
<prefix>rollout.row-completed the way every publisher does (docs/rules.md#publishing):
keyed by group_id, on partition murmur2(group_id) mod partitions (the Java
client's choice, so rows sent from Python land on the same partition),
idempotent, acks=all. Accepted lines:
  a row object              (the form offline and replay write)
  a GymResult object        (identity fields + gym_row + gym_result, no message_log)
  {"batch_end": {"batch_id": ..., "num_rows": ...}}
                            written to every partition, after everything before it

Each line is validated before anything of it is sent (rows as accumulate
validates them, except that a NaN logprob is sent for the pipeline to
dead-letter; GymResults structurally). A bad line is reported with its line
number and reason and skipped; the other lines are still published. The exit
code is 1 when any line was rejected, 0 otherwise. Nothing is written to
stdout; progress (on a terminal) and the summary go to stderr.

Options:
  --format F           accept only row lines or only gym-result lines; a line of the
                       other kind is rejected (default: both)
  --batch-end          at the end of input, write each batch's BatchEnd (to every
                       partition) with num_rows = that batch's records published by
                       this run; a batch whose last record is already followed by a
                       batch_end line gets none. Without it, only batch_end lines of
                       the input close batches
  --stamp-identity N   set group_index = i // N, row_index = i, num_generations = N on
                       the i-th record line of each batch (from 0, in input order):
                       task rows of groups of N consecutive rows
  --prefix P           topic prefix (else TOPIC_PREFIX, else none)
  --config F           config file (brokers, registry, kafka.max_message_bytes)
  --quiet              no progress and no summary (rejected lines are still reported)

The topic must exist (./rollout-stream topics create).

Examples:
  ./rollout-stream loadgen --profile small --batches 1 --dry-run | ./rollout-stream produce
  ./rollout-stream produce --format gym-result --batch-end < results.jsonl`,
  run: (argv) => produceMain(argv),
};

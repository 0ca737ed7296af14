/**
 * `loadgen` (SPEC §7, §9): synthetic rollout rows from the load generator
 * (`generateEvents`) published to `rollout.row-completed` by `RowProducer`,
 * paced to `--rate` rows/s or as fast as possible; `--dry-run` writes the
 * rows as JSON lines to stdout instead. With `--format gym-result` every row
 * goes out as the NeMo-Gym result it converts back from (SPEC §2.1,
 * `asGymResultEvents`), so accumulate's ingest path carries the load.
 * Progress on stderr; a summary at the end.
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../config/schema.js';
import {
  FAULT_KINDS,
  PROFILES,
  asGymResultEvents,
  generateEvents,
  parseFaultSpec,
  resolveLoadgenOptions,
  type FaultKind,
  type GymResultEvent,
  type LoadgenEvent,
  type LoadgenOptions,
  type ProfileName,
} from '../loadgen/index.js';
import { formatJsonLine } from '../json-form/form.js';
import { TopicCodec } from '../streams/codecs/codec.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import { createRegistry } from '../streams/codecs/schema-registry.js';
import { RowProducer } from '../tools/row-producer.js';
import { subjectOf, topicNames } from '../streams/topics/names.js';
import { createTopics } from '../streams/topics/create.js';
import { parseFlags, UsageError, type Command } from '../tools/command.js';
import { processIo, type Io } from './io.js';
import { intFlag, loadOpsConfig, positiveFlag } from './ops-config.js';
import { formatBytes, formatRate, ProgressReporter } from './progress.js';

/** What each generated row is sent as: the row itself, or the NeMo-Gym result it converts back from. */
export type LoadgenFormat = 'row' | 'gym-result';

export interface LoadgenArgs {
  /** What to generate (sizes, seed, profile, faults, run id, modelled rate). */
  options: LoadgenOptions;
  format: LoadgenFormat;
  /** Rows/s to pace at; null = as fast as possible. */
  rate: number | null;
  dryRun: boolean;
  quiet: boolean;
  config?: string | undefined;
  prefix?: string | undefined;
}

export interface LoadgenSummary {
  runId: string;
  /** Null for a dry run. */
  topic: string | null;
  format: LoadgenFormat;
  /** Rows sent (GymResults with `--format gym-result`). */
  rows: number;
  garbage: number;
  batchEnds: number;
  bytes: number;
  seconds: number;
  /** Fault outcomes injected, by kind (`missing` counts incomplete groups). */
  faults: Record<FaultKind, number>;
}

const FLAGS = {
  batches: { type: 'string' },
  groups: { type: 'string' },
  generations: { type: 'string' },
  rate: { type: 'string' },
  faults: { type: 'string' },
  seed: { type: 'string' },
  profile: { type: 'string' },
  'run-id': { type: 'string' },
  prefix: { type: 'string' },
  config: { type: 'string' },
  format: { type: 'string' },
  'dry-run': { type: 'boolean' },
  quiet: { type: 'boolean' },
} as const;

/** A run id part no other run has: the time in base 36 and 4 random hex digits (two runs in one millisecond differ too). */
export function uniqueRunIdPart(): string {
  return `${Date.now().toString(36)}${randomUUID().slice(0, 4)}`;
}

/** Parses and validates the flags (sizes, profile, fault spec) before anything is produced. */
export function parseLoadgenArgs(argv: string[], uniqueRunId: () => string = uniqueRunIdPart): LoadgenArgs {
  const { values } = parseFlags(argv, FLAGS);
  const profileName = (values.profile ?? 'default') as ProfileName;
  const profile = PROFILES[profileName];
  if (!profile) throw new UsageError(`--profile must be one of ${Object.keys(PROFILES).join(', ')}, got ${values.profile}`);
  const seed = intFlag('seed', values.seed, 1);
  const dryRun = values['dry-run'] ?? false;
  const rate = positiveFlag('rate', values.rate);
  const format = values.format ?? 'row';
  if (format !== 'row' && format !== 'gym-result') throw new UsageError(`--format must be row or gym-result, got ${format}`);
  // A dry run is reproducible; a live run gets fresh ids so it never collides with an earlier one.
  const runId = values['run-id'] ?? (dryRun ? `lg${seed}` : `lg${seed}-${uniqueRunId()}`);
  const options: LoadgenOptions = {
    batches: intFlag('batches', values.batches, 3),
    groupsPerBatch: intFlag('groups', values.groups, profile.groupsPerBatch, 1),
    generations: intFlag('generations', values.generations, profile.generations, 1),
    seed,
    profile: profileName,
    faults: parseFaultSpec(values.faults ?? ''),
    runId,
    // Batch ids too: accumulate remembers a BatchEnd by batch id (a second run's `b000001` would be over
    // at once) and batch metrics aggregate by it. Given the same --run-id, the ids are the same.
    batchIdPrefix: runId,
    ...(rate !== null ? { rowsPerSecond: rate } : {}),
  };
  try {
    resolveLoadgenOptions(options);
  } catch (e) {
    if (e instanceof RangeError) throw new UsageError(e.message);
    throw e;
  }
  return { options, format, rate, dryRun, quiet: values.quiet ?? false, config: values.config, prefix: values.prefix };
}

/** The closing summary: counts, volume, duration, rate, and the injected faults. */
export function formatLoadgenSummary(s: LoadgenSummary): string {
  const faults = FAULT_KINDS.filter((k) => s.faults[k] > 0).map((k) => `${k}=${s.faults[k]}`);
  return [
    `loadgen summary (run id ${s.runId}${s.topic ? ` → ${s.topic}` : ', dry run'}${s.format === 'gym-result' ? ', as NeMo-Gym results' : ''})`,
    s.format === 'gym-result' ? `  gym results ${s.rows}` : `  rows        ${s.rows}`,
    `  garbage     ${s.garbage}${s.topic === null && s.garbage > 0 ? ' (not representable as JSON lines; not written)' : ''}`,
    `  batch ends  ${s.batchEnds}`,
    `  volume      ${formatBytes(s.bytes)}`,
    `  duration    ${s.seconds.toFixed(2)} s`,
    `  throughput  ${formatRate(s.seconds > 0 ? s.rows / s.seconds : 0)} ${s.format === 'gym-result' ? 'results' : 'rows'}/s, ${formatBytes(s.seconds > 0 ? s.bytes / s.seconds : 0)}/s`,
    `  faults      ${faults.length > 0 ? faults.join(' ') : 'none'}`,
  ].join('\n') + '\n';
}

type SentEvent = LoadgenEvent | GymResultEvent;

/** The run's events, rows replaced by GymResults for `--format gym-result`. */
function eventsOf(format: LoadgenFormat, options: LoadgenOptions): Iterable<SentEvent> {
  return format === 'gym-result' ? asGymResultEvents(generateEvents(options)) : generateEvents(options);
}

/** Wraps the event stream: counts faults, stops early when asked. */
function* tap(events: Iterable<SentEvent>, faults: Record<FaultKind, number>, stop: { requested: boolean }): Generator<SentEvent> {
  for (const e of events) {
    if (stop.requested) return;
    if (e.kind === 'batch_end') for (const x of e.expect ?? []) faults[x.fault]++;
    else if (e.expect) faults[e.expect.fault]++;
    yield e;
  }
}

/**
 * Sends each event at its modelled time (the running sum of `delayMs` from
 * the start), so the average rate holds however long each send takes;
 * events already due go out together.
 */
async function sendPaced(producer: RowProducer, events: Iterable<SentEvent>): Promise<void> {
  const t0 = performance.now();
  let due = 0;
  let chunk: SentEvent[] = [];
  for (const e of events) {
    due += e.delayMs;
    const wait = t0 + due - performance.now();
    if (wait > 0) {
      if (chunk.length > 0) await producer.send(chunk);
      chunk = [];
      await new Promise((r) => setTimeout(r, wait));
    }
    chunk.push(e);
    if (chunk.length >= 500) {
      await producer.send(chunk);
      chunk = [];
    }
  }
  if (chunk.length > 0) await producer.send(chunk);
}

/**
 * Runs the load generator: to Kafka (creating the prefix's topics if the
 * row topic is missing) or, with `dryRun`, to `io.out` as JSON lines.
 * Resolves with the summary once every record was acknowledged.
 */
export async function runLoadgen(args: LoadgenArgs, config: Config, io: Io, stop = { requested: false }): Promise<LoadgenSummary> {
  const o = args.options;
  const faults = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  const expectedRows = o.batches * o.groupsPerBatch * o.generations;
  let reporter: ProgressReporter | null = null;
  let started = performance.now();
  const startClock = () => {
    started = performance.now();
    if (!args.quiet) reporter = new ProgressReporter({ unit: 'rows', total: expectedRows, tty: io.errIsTty, write: io.err, label: 'loadgen' });
    return reporter;
  };
  const summary: LoadgenSummary = { runId: o.runId!, topic: null, format: args.format, rows: 0, garbage: 0, batchEnds: 0, bytes: 0, seconds: 0, faults };

  if (args.dryRun) {
    startClock();
    for (const e of tap(eventsOf(args.format, o), faults, stop)) {
      if (e.kind === 'garbage') {
        summary.garbage++;
        continue;
      }
      const line =
        e.kind === 'row'
          ? formatJsonLine({ kind: 'row', record: e.row })
          : e.kind === 'gym_result'
            ? formatJsonLine({ kind: 'gym_result', record: e.result })
            : formatJsonLine({ kind: 'batch_end', end: e.end });
      if (e.kind === 'batch_end') summary.batchEnds++;
      else summary.rows++;
      summary.bytes += line.length + 1;
      await io.out(`${line}\n`);
      (reporter as ProgressReporter | null)?.update(summary.rows, summary.bytes);
    }
  } else {
    const names = topicNames(config.topics.prefix);
    summary.topic = names.rowCompleted;
    const kafka = createOpsClient(config.kafka, 'loadgen');
    const registry = createRegistry(config.kafka);
    const admin = await kafka.admin();
    try {
      if (!(await admin.listTopics()).includes(names.rowCompleted)) {
        const r = await createTopics(admin, registry, config);
        io.err(`loadgen: created ${r.created.length} topics under prefix '${config.topics.prefix}'\n`);
      }
    } finally {
      await admin.close();
    }
    const codec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), registry).init();
    const producer = new RowProducer({
      kafka,
      topic: names.rowCompleted,
      codec,
      flushBytes: 1024 * 1024,
      compression: config.kafka.compression,
    });
    await producer.connect();
    const r = startClock();
    const sent = () => producer.progress.rows + producer.progress.results;
    const timer = r ? setInterval(() => r.update(sent(), producer.progress.bytes), io.errIsTty ? 100 : 2000) : undefined;
    try {
      const events = tap(eventsOf(args.format, { ...o, startTimeMs: Date.now() }), faults, stop);
      if (args.rate === null) await producer.send(events);
      else await sendPaced(producer, events);
    } finally {
      clearInterval(timer);
      await producer.disconnect();
    }
    Object.assign(summary, { rows: sent(), garbage: producer.progress.garbage, batchEnds: producer.progress.batchEnds, bytes: producer.progress.bytes });
  }
  summary.seconds = (performance.now() - started) / 1000;
  (reporter as ProgressReporter | null)?.finish(summary.rows, summary.bytes);
  return summary;
}

export const loadgenCommand: Command = {
  name: 'loadgen',
  summary: 'synthetic rollout rows (realistic shapes, out of order, faults) to rollout.row-completed',
  usage: `usage: ./rollout-stream loadgen [--batches B] [--groups G] [--generations N] [--rate R]
                               [--faults SPEC] [--seed S] [--profile P] [--run-id ID]
                               [--format row|gym-result] [--prefix X] [--config F]
                               [--dry-run] [--quiet]

Generates seeded synthetic rollout rows (multi-turn, long-tail lengths,
rewards, output items, flags, optional routed experts and media) that
complete out of order, and publishes them to <prefix>rollout.row-completed
keyed by group id, each batch closed by a BatchEnd on every partition. The
prefix's topics are created when the row topic does not exist yet.

Options:
  --batches B      batches to generate (default 3)
  --groups G       prompt groups per batch (default: the profile's)
  --generations N  rows per group (default: the profile's)
  --rate R         pace at R rows/s (exponential inter-arrival times); default: as fast as possible
  --faults SPEC    fault fractions, e.g. dup=0.01,conflict=0.005,out_of_range=0.005,nan=0.01,
                   missing=0.005,garbage=0.002,mixed_agents=0.02,task_mismatch=0.02
                   (row faults per row, group faults per group; default none)
  --seed S         seed (default 1); same seed and options → same rows
  --profile P      ${Object.keys(PROFILES).join(' | ')} (default default)
  --run-id ID      prefix of every group and batch id (<run>-b000001-g0003, <run>-b000001);
                   default lg<seed>-<time><random> live, so runs on one prefix never share
                   a batch; lg<seed> for --dry-run
  --format F       row (default) | gym-result: send each row as the raw NeMo-Gym result
                   (docs/formats.md#gymresult-lines) that accumulate converts back into
                   the row's generated turns: token ids and logprobs on the output items,
                   routes as nrlre1 envelopes (router-replay), a NaN logprob as "NaN";
                   same groups, batches, faults and pacing. Media and the two violation
                   flags are not carried (the conversion derives flags from the item texts)
  --prefix X       topic prefix (else TOPIC_PREFIX, else none)
  --config F       config file (brokers, registry, partitions)
  --dry-run        write the rows as JSON lines (docs/formats.md) to stdout instead of Kafka;
                   garbage records are counted but not written
  --quiet          no progress output

Progress goes to stderr: a bar on a terminal, a line every 2 s otherwise.

Examples:
  ./rollout-stream loadgen --profile small --batches 5 --groups 8 --faults dup=0.02,nan=0.01
  ./rollout-stream loadgen --profile published-max --rate 59 --batches 10
  ./rollout-stream loadgen --profile small --batches 1 --dry-run | ./rollout-stream offline all
  ./rollout-stream loadgen --profile router-replay --format gym-result --batches 2 --groups 4`,
  async run(argv) {
    const args = parseLoadgenArgs(argv);
    const { config } = loadOpsConfig(args);
    const stop = { requested: false };
    const onSignal = () => {
      stop.requested = true;
      processIo.err('\nloadgen: stopping after the records in flight (Ctrl-C again to abort)\n');
    };
    process.once('SIGINT', onSignal);
    const summary = await runLoadgen(args, config, processIo, stop);
    process.off('SIGINT', onSignal);
    const text = formatLoadgenSummary(summary);
    if (args.dryRun) processIo.err(text);
    else await processIo.out(text);
    return stop.requested ? 130 : 0;
  },
};

/**
 * `demo` (SPEC §9): the whole pipeline end to end on a local broker. Starts
 * the broker and registry unless KAFKA_BROKERS is set, creates the topics
 * under a fresh prefix, runs every stage in-process, drives them with the
 * load generator (a few batches, a small fraction of faults), waits until
 * every expected group is packed and every expected dead letter arrived,
 * prints a per-stage summary, and has the Python client decode one packed
 * group. Removes its topics (and the broker it started) unless --keep.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/schema.js';
import { collectExpectations, generateEvents, parseFaultSpec, PROFILES, type ProfileName } from '../loadgen/index.js';
import { RolloutStreamError } from '../errors/index.js';
import { TopicCodec } from '../streams/codecs/codec.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import type { TopicTail } from '../streams/kafka/types.js';
import { createRegistry } from '../streams/codecs/schema-registry.js';
import { startPipeline, type RunningPipeline } from '../streams/runtime/pipeline.js';
import { RowProducer } from '../tools/row-producer.js';
import { subjectOf, topicNames } from '../streams/topics/names.js';
import { createTopics } from '../streams/topics/create.js';
import { parseFlags, UsageError, type Command } from '../tools/command.js';
import { runGymDemo } from './demo-gym.js';
import { deleteTopics } from './demo-topics.js';
import { eventCount, formatDemoSummary, stageCounts, type MetricJson } from './demo-summary.js';
import { processIo, type Io } from './io.js';
import { ensureLocalServices, ROOT } from '../tools/local-services.js';
import { intFlag, loadOpsConfig } from './ops-config.js';

export const DEMO_FAULTS = 'dup=0.02,conflict=0.01,out_of_range=0.01,nan=0.02,missing=0.01,garbage=0.01,mixed_agents=0.04,task_mismatch=0.04';

export interface DemoArgs {
  batches: number;
  groups: number;
  generations: number;
  profile: ProfileName;
  faults: string;
  seed: number;
  keep: boolean;
  timeoutMs: number;
  config?: string | undefined;
  gym: boolean;
}

export function parseDemoArgs(argv: string[]): DemoArgs {
  const { values } = parseFlags(argv, {
    batches: { type: 'string' },
    groups: { type: 'string' },
    generations: { type: 'string' },
    profile: { type: 'string' },
    faults: { type: 'string' },
    seed: { type: 'string' },
    timeout: { type: 'string' },
    keep: { type: 'boolean' },
    config: { type: 'string' },
    gym: { type: 'boolean' },
  });
  const profile = (values.profile ?? 'default') as ProfileName;
  if (!PROFILES[profile]) throw new UsageError(`--profile must be one of ${Object.keys(PROFILES).join(', ')}, got ${values.profile}`);
  const faults = values.faults ?? DEMO_FAULTS;
  parseFaultSpec(faults);
  return {
    batches: intFlag('batches', values.batches, 3, 1),
    groups: intFlag('groups', values.groups, 8, 1),
    generations: intFlag('generations', values.generations, 4, 1),
    profile,
    faults,
    seed: intFlag('seed', values.seed, 7),
    keep: values.keep ?? false,
    timeoutMs: intFlag('timeout', values.timeout, values.gym ? 300 : 90, 1) * 1000,
    config: values.config,
    gym: values.gym ?? false,
  };
}

const log = (io: Io, msg: string) => io.err(`[demo] ${msg}\n`);

/** Makes sure `.venv` exists (scripts/python-env.sh creates it; its output goes to stderr) and returns its python. */
function pythonForDemo(io: Io): string {
  const python = join(ROOT, '.venv', 'bin', 'python');
  if (!existsSync(python)) {
    log(io, 'no .venv yet: running scripts/python-env.sh (the first time downloads torch)');
    const r = spawnSync(join(ROOT, 'scripts', 'python-env.sh'), [], { stdio: ['ignore', 2, 2] });
    if (r.status !== 0) throw new RolloutStreamError('python_env', `scripts/python-env.sh failed (exit ${r.status}); see the messages above`);
  }
  return python;
}

/** Decodes one packed group with the Python client; returns its output or throws with the client's error. */
function pythonInspect(io: Io, config: Config, topic: string, groupId: string): string {
  const python = pythonForDemo(io);
  const args = ['-m', 'rollout_stream', 'inspect', '--topic', topic, '--group', groupId, '--brokers', config.kafka.brokers.join(','), '--registry', config.kafka.schema_registry_url];
  log(io, `decoding ${groupId} with the Python client: .venv/bin/python ${args.join(' ')}`);
  const r = spawnSync(python, args, { encoding: 'utf8', timeout: 120_000, cwd: ROOT });
  if (r.status !== 0) {
    const why = r.error ? r.error.message : `exit ${r.status ?? r.signal}`;
    throw new RolloutStreamError('python_inspect', `the Python client could not decode ${groupId} (${why}):\n${r.stderr}${r.stdout}`);
  }
  return r.stdout;
}

/** Runs the demo; returns the exit code. */
export async function runDemo(a: DemoArgs, io: Io): Promise<number> {
  const t0 = performance.now();
  const startedServices = ensureLocalServices();
  const id = randomUUID().slice(0, 8);
  const prefix = `demo.${id}.`;
  const { config, configDir } = loadOpsConfig({ config: a.config, prefix }, [
    [['accumulate', 'batch_end_grace_ms'], 500],
    [['runtime', 'metrics_port'], 0],
  ]);
  const names = topicNames(prefix);
  const kafka = createOpsClient(config.kafka, 'demo');
  const registry = createRegistry(config.kafka);
  const admin = await kafka.admin();
  try {
    await createTopics(admin, registry, config);
  } finally {
    await admin.close();
  }
  log(io, `topics created under prefix ${prefix}`);

  const events = [
    ...generateEvents({
      batches: a.batches,
      groupsPerBatch: a.groups,
      generations: a.generations,
      seed: a.seed,
      profile: a.profile,
      faults: parseFaultSpec(a.faults),
      runId: `demo-${id}`,
      startTimeMs: Date.now(),
    }),
  ];
  const expected = collectExpectations(events);
  const wantDead = new Map<string, number>();
  for (const e of expected.deadLetters) wantDead.set(`${e.reason}:${e.group_id}`, (wantDead.get(`${e.reason}:${e.group_id}`) ?? 0) + 1);

  let pipeline: RunningPipeline | null = null;
  let tail: TopicTail | null = null;
  let code = 0;
  try {
    const stageLog = { info: () => undefined, warn: (m: string) => log(io, `warn ${m}`), error: (m: string) => log(io, `error ${m}`) };
    pipeline = await startPipeline({ config, configDir, stages: ['accumulate', 'postprocess', 'pack'], log: stageLog });
    log(io, 'stages running in-process: accumulate, postprocess, pack (+ batch metrics)');

    const packedAt = new Map<string, number>();
    const gotDead = new Map<string, number>();
    const deadByReason = new Map<string, number>();
    const dlCodec = new TopicCodec('deadLetter', subjectOf(names.deadLetter), registry);
    let settle!: () => void;
    const allArrived = new Promise<void>((resolve) => (settle = resolve));
    const check = () => {
      const packedAll = [...expected.completeGroups.keys()].every((g) => packedAt.has(g));
      const deadAll = [...wantDead].every(([k, n]) => (gotDead.get(k) ?? 0) >= n);
      if (packedAll && deadAll) settle();
    };
    tail = await kafka.tail([names.packed, names.deadLetter], async (r) => {
      if (r.topic === names.packed) {
        const key = r.key?.toString('utf8') ?? '';
        if (!packedAt.has(key)) packedAt.set(key, Number(r.timestamp));
      } else if (r.value) {
        const d = await dlCodec.decode(r.value);
        const k = `${d.reason}:${d.group_id}`;
        gotDead.set(k, (gotDead.get(k) ?? 0) + 1);
        deadByReason.set(d.reason, (deadByReason.get(d.reason) ?? 0) + 1);
      }
      check();
    });

    const lastRowSent = new Map<string, number>();
    let firstRowSent = Number.NaN;
    const rowCodec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), registry).init();
    const producer = new RowProducer({
      kafka,
      topic: names.rowCompleted,
      codec: rowCodec,
      flushBytes: 256 * 1024,
      onRowSent: (group, _row, at) => {
        if (Number.isNaN(firstRowSent)) firstRowSent = at;
        lastRowSent.set(group, Math.max(lastRowSent.get(group) ?? 0, at));
      },
    });
    await producer.connect();
    const progress = await producer.send(events);
    await producer.disconnect();
    log(io, `produced ${progress.rows} rows, ${progress.garbage} garbage records, ${progress.batchEnds} batch ends; waiting for ${expected.completeGroups.size} packed groups and ${expected.deadLetters.length} dead letters`);

    const timer = setTimeout(() => settle(), a.timeoutMs);
    await Promise.race([allArrived, tail.failed]);
    clearTimeout(timer);
    const missingGroups = [...expected.completeGroups.keys()].filter((g) => !packedAt.has(g));
    const missingDead = [...wantDead].filter(([k, n]) => (gotDead.get(k) ?? 0) < n).map(([k]) => k);
    if (missingGroups.length > 0 || missingDead.length > 0) {
      throw new RolloutStreamError(
        'demo_timeout',
        `after ${a.timeoutMs / 1000} s still missing ${missingGroups.length} packed groups (${missingGroups.slice(0, 5).join(', ')}) and ` +
          `${missingDead.length} dead letters (${missingDead.slice(0, 5).join(', ')})`,
      );
    }
    // Let the last transactions' counters settle, then read them.
    await new Promise((r) => setTimeout(r, 300));
    const reasons = new Map<string, [number, number]>();
    for (const e of expected.deadLetters) reasons.set(e.reason!, [(reasons.get(e.reason!)?.[0] ?? 0) + 1, 0]);
    for (const [reason, n] of deadByReason) reasons.set(reason, [reasons.get(reason)?.[0] ?? 0, n]);
    const latencies = [...expected.completeGroups.keys()].map((g) => packedAt.get(g)! - lastRowSent.get(g)!);
    const lastPacked = Math.max(...packedAt.values());
    const metrics = (await pipeline.metrics.registry.getMetricsAsJSON()) as MetricJson[];
    await io.out(
      formatDemoSummary({
        prefix,
        profile: a.profile,
        batches: a.batches,
        groups: a.groups,
        generations: a.generations,
        rowsProduced: progress.rows,
        garbageProduced: progress.garbage,
        bytesProduced: progress.bytes,
        stages: stageCounts(metrics, prefix),
        deadLetters: reasons,
        replays: [expected.silentlyDropped.length, eventCount(metrics, 'idempotent_replays')],
        groupsPacked: packedAt.size,
        groupsExpected: expected.completeGroups.size,
        latenciesMs: latencies,
        elapsedMs: lastPacked - firstRowSent,
        totalMs: performance.now() - t0,
      }),
    );
    const unexpected = [...packedAt.keys()].filter((g) => !expected.completeGroups.has(g));
    if (unexpected.length > 0) {
      await io.out(`UNEXPECTED packed groups: ${unexpected.join(', ')}\n`);
      code = 1;
    }
    await tail.stop();
    tail = null;
    await pipeline.stop();
    pipeline = null;

    const shown = [...expected.completeGroups.keys()].sort()[0]!;
    const decoded = pythonInspect(io, config, names.packed, shown);
    await io.out(`\npacked group ${shown} decoded by the Python client (python -m rollout_stream inspect):\n${decoded}`);
    await io.out(
      a.keep
        ? `\nkept topics under prefix ${prefix}; try: ./rollout-stream trace ${shown} --prefix ${prefix}\n`
        : `\ndemo done in ${((performance.now() - t0) / 1000).toFixed(1)} s (topics removed; --keep keeps them)\n`,
    );
  } finally {
    await tail?.stop().catch(() => undefined);
    await pipeline?.stop().catch(() => undefined);
    if (!a.keep) {
      await deleteTopics(config).catch((e: Error) => log(io, `could not delete the demo topics: ${e.message}`));
      if (startedServices) spawnSync(join(ROOT, 'scripts', 'local-kafka.sh'), ['down'], { stdio: ['ignore', 2, 2] });
    }
  }
  return code;
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'the whole pipeline end to end on a local broker, with a summary',
  usage: `usage: ./rollout-stream demo [--batches B] [--groups G] [--generations N] [--profile P]
                            [--faults SPEC] [--seed S] [--timeout SECONDS] [--keep] [--config F]
       ./rollout-stream demo --gym [--batches B] [--generations N] [--timeout SECONDS] [--keep]

Starts the local broker and registry (unless KAFKA_BROKERS is set), creates
the topics under a fresh prefix (demo.<id>.), runs accumulate, postprocess
and pack in this process, produces a few batches from the load generator
with a small fraction of faults, waits until every expected group is packed
and every expected dead letter arrived, and prints a summary: records in/out
per stage, dead letters by reason (expected vs arrived), throughput, p50/p99
latency from a group's last row produced to its packed record. Finally the
Python client (.venv, created by scripts/python-env.sh if missing) decodes
one packed group. Without --keep the topics (and a broker the demo started)
are removed at the end.

With --gym, NeMo-Gym itself drives the pipeline: NeMo-Gym's own servers
(head, vllm_model, simple_agent over two of its example resource servers;
its venv is installed by scripts/gym-env.sh on first use, ~3 min) answer
with a toy policy, \`python -m rollout_stream collect\`'s library call
publishes B batches of N rollouts per task, and the trainer's consumer
checks every packed generated token against what the policy generated,
ending with one line: gym demo: <G> groups packed, <T> generated tokens
checked against the policy, <M> mismatches. The stages run in this process.

Options:
  --batches B      batches (default 3)
  --groups G       groups per batch (default 8)
  --generations N  rows per group (default 4)
  --profile P      load profile (default default; small for tiny rows)
  --faults SPEC    fault fractions (default ${DEMO_FAULTS})
  --seed S         load generator seed (default 7)
  --timeout S      give up waiting after S seconds (default 90)
  --keep           keep the topics and the broker for trace/replay/dlq afterwards
  --gym            NeMo-Gym's servers and the collector instead of the load generator
  --config F       config file (processing settings, brokers)

Examples:
  ./rollout-stream demo
  ./rollout-stream demo --batches 1 --groups 4 --keep
  ./rollout-stream demo --gym --batches 2 --generations 4`,
  async run(argv) {
    const args = parseDemoArgs(argv);
    if (args.gym) return runGymDemo({ batches: args.batches, generations: args.generations, keep: args.keep, timeoutMs: args.timeoutMs, config: args.config }, processIo);
    return runDemo(args, processIo);
  },
};

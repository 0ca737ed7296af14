/**
 * `bench e2e`: the load generator through all three stages on the local
 * broker, against the broker's raw throughput for the same record sizes
 * measured in the same run with Kafka's own ProducerPerformance tool.
 *
 *   ratio e2e/raw = pipeline MB/s ÷ (raw MB/s ÷ 4)
 *
 * (a row's bytes are written four times on their way: row-completed,
 * group-complete, penalized, packed). Stages run as one child process
 * (`./rollout-stream run`), the producer and the packed-topic reader in this
 * one. Latency = last row of a group sent → its packed record read
 * (read_committed, so after the pack transaction committed).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureLocalServices, ROOT } from '../cli/local-services.js';
import { loadConfig } from '../config/load.js';
import { generateEvents, rowTokenCounts, type LoadgenEvent, type ProfileName } from '../loadgen/index.js';
import { TopicCodec } from '../streams/codec.js';
import { createKafka, createRegistry } from '../streams/kafka-client.js';
import { RowProducer } from '../streams/row-producer.js';
import { createTopics, subjectOf, topicNames } from '../streams/topics.js';

const USAGE = `usage: ./rollout-stream bench e2e [--profile published-max|router-replay|default|small]
                               [--batches B] [--groups G] [--generations N] [--rate R] [--seed S] [--instances K]

Runs the load generator through all stages on the local broker (started if
needed; KAFKA_BROKERS to use another) and prints rows/s, tokens/s, MB/s,
p50/p99 latency (last row sent → packed record committed), the stage
process's peak RSS, the broker's raw throughput for the same record size
(ProducerPerformance), and last "ratio e2e/raw: <n>".
--rate R paces the producer at R rows/s (default: as fast as possible).
--instances K runs K stage processes (scale-out measurement).
--keep leaves the topics (and names the slowest group to trace).
--split runs each stage in its own process (per instance).

Example: ./rollout-stream bench e2e --profile published-max --batches 4`;

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(Math.floor((sorted.length * p) / 100), sorted.length - 1)]!;
}

/** Runs Kafka's ProducerPerformance against a scratch topic; returns MB/s. */
function rawBrokerMBps(brokers: string, topic: string, recordSize: number, records: number): number {
  const cp = `${join(ROOT, '.local', 'kafka-libs')}/*`;
  const r = spawnSync(
    'java',
    [
      '-Xmx512m', '-cp', cp, 'org.apache.kafka.tools.ProducerPerformance',
      '--topic', topic, '--num-records', String(records), '--record-size', String(recordSize), '--throughput', '-1',
      '--producer-props', `bootstrap.servers=${brokers}`, 'acks=all', 'linger.ms=5', `max.request.size=${Math.max(1_048_576, recordSize * 2)}`,
      'batch.size=1048576', 'enable.idempotence=true',
    ],
    { encoding: 'utf8', timeout: 300_000 },
  );
  const m = /records sent, [\d.]+ records\/sec \(([\d.]+) MB\/sec\)/.exec(r.stdout ?? '');
  if (!m) throw new Error(`ProducerPerformance failed: ${r.stderr || r.stdout}`);
  return Number(m[1]);
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      profile: { type: 'string', default: 'published-max' },
      batches: { type: 'string', default: '4' },
      groups: { type: 'string' },
      generations: { type: 'string' },
      rate: { type: 'string' },
      seed: { type: 'string', default: '1' },
      instances: { type: 'string', default: '1' },
      keep: { type: 'boolean' },
      split: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  ensureLocalServices();
  const prefix = `bench.${randomUUID().slice(0, 8)}.`;
  const { config } = loadConfig({ overrides: [[['topics', 'prefix'], prefix]] });
  const kafka = createKafka(config.kafka, 'bench');
  const admin = kafka.admin();
  await admin.connect();
  const registry = createRegistry(config.kafka);
  await createTopics(admin, registry, config);
  const names = topicNames(prefix);

  const profile = values.profile as ProfileName;
  const events: LoadgenEvent[] = [
    ...generateEvents({
      batches: Number(values.batches),
      groupsPerBatch: Number(values.groups ?? (profile === 'published-max' || profile === 'router-replay' ? 32 : 16)),
      generations: Number(values.generations ?? 16),
      seed: Number(values.seed),
      profile,
      runId: `${prefix}run`,
      startTimeMs: Date.now(),
    }),
  ];
  const codec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), registry).init();
  let rows = 0;
  let tokens = 0;
  let modeledMs = 0;
  let bytes = 0;
  const lastSent = new Map<string, number>();
  const groups = new Set<string>();
  for (const e of events) {
    modeledMs += e.delayMs;
    if (e.kind !== 'row') continue;
    rows++;
    tokens += rowTokenCounts(e.row).total;
    bytes += codec.encode({ kind: 'row', row: e.row }).length;
    groups.add(e.row.group_id);
  }
  // Delay hints model the profile's rate; --rate scales them.
  const modeledRate = rows / Math.max(modeledMs / 1000, 1e-9);
  process.stderr.write(`[bench] ${profile}: ${rows} rows, ${groups.size} groups, ${(tokens / 1e6).toFixed(2)} M tokens, ${(bytes / 1e6).toFixed(1)} MB\n`);

  const configPath = join(tmpdir(), `rs-bench-${randomUUID()}.json`);
  writeFileSync(configPath, JSON.stringify({ topics: { prefix }, runtime: { metrics_port: 0 }, accumulate: { batch_end_grace_ms: 500 } }));
  const instances = Number(values.instances);
  const peakRss: number[] = [];
  // --split: one process per stage (per instance) instead of all stages in one.
  const stageSets = values.split ? ['accumulate', 'postprocess', 'pack'] : ['accumulate,postprocess,pack'];
  const launches = Array.from({ length: instances }, () => stageSets).flat();
  const stages = launches.map((set, i) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'cli', 'main.ts'), 'run', '--stages', set, '--config', configPath, '--quiet'], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    peakRss[i] = 0;
    const timer = setInterval(() => {
      const r = spawnSync('ps', ['-o', 'rss=', '-p', String(child.pid)], { encoding: 'utf8' });
      const kb = Number(r.stdout.trim());
      if (kb > peakRss[i]!) peakRss[i] = kb;
    }, 500);
    return { child, timer };
  });

  // Reader of the packed topic: arrival time per group.
  const arrived = new Map<string, number>();
  const reader = kafka.consumer({ groupId: `${prefix}bench-reader`, readUncommitted: false, maxWaitTimeInMs: 50 });
  await reader.connect();
  await reader.subscribe({ topic: names.packed, fromBeginning: true });
  let allIn: () => void = () => undefined;
  const done = new Promise<void>((r) => (allIn = r));
  await reader.run({
    eachMessage: async ({ message }) => {
      const key = message.key!.toString();
      if (!arrived.has(key)) arrived.set(key, Date.now());
      if (arrived.size >= groups.size) allIn();
    },
  });
  // Wait until every stage's consumer group is stable (partitions assigned,
  // state restored), so start-up is not measured as latency.
  const stageGroups = ['accumulate', 'postprocess', 'batch-metrics', 'pack'].map((s) => `${prefix}rollout-stream.${s}`);
  for (let i = 0; i < 120; i++) {
    const { groups: described } = await admin.describeGroups(stageGroups);
    if (described.every((g) => g.state === 'Stable' && g.members.length === instances)) break;
    if (i === 119) process.stderr.write('[bench] stage groups not stable after 60 s; measuring anyway\n');
    await new Promise((r) => setTimeout(r, 500));
  }
  await new Promise((r) => setTimeout(r, 2000));

  const producer = new RowProducer({
    kafka,
    topic: names.rowCompleted,
    codec,
    ...(values.rate ? { pace: modeledRate / Number(values.rate) } : {}),
    onRowSent: (g) => lastSent.set(g, Date.now()),
  });
  await producer.connect();
  const t0 = Date.now();
  await producer.send(events);
  await producer.disconnect();
  const timeout = setTimeout(() => allIn(), 600_000);
  await done;
  clearTimeout(timeout);
  const seconds = (Date.now() - t0) / 1000;
  await reader.disconnect();
  for (const s of stages) {
    clearInterval(s.timer);
    s.child.kill('SIGTERM');
  }

  const latencies = [...arrived].map(([g, t]) => t - (lastSent.get(g) ?? t)).sort((a, b) => a - b);
  const mbps = bytes / 1e6 / seconds;
  const avgRecord = Math.max(1, Math.round(bytes / rows));
  const rawTopic = `${prefix}bench-raw`;
  await admin.createTopics({
    topics: [{ topic: rawTopic, numPartitions: config.topics.partitions, configEntries: [{ name: 'max.message.bytes', value: String(config.kafka.max_message_bytes) }] }],
  });
  const raw = rawBrokerMBps(config.kafka.brokers.join(','), rawTopic, avgRecord, Math.max(200, Math.min(rows, Math.floor(2e9 / avgRecord))));
  await admin.deleteTopics({ topics: values.keep ? [rawTopic] : [...Object.values(names), rawTopic] }).catch(() => undefined);
  if (values.keep) {
    const slowest = [...arrived].sort((a, b) => b[1] - (lastSent.get(b[0]) ?? 0) - (a[1] - (lastSent.get(a[0]) ?? 0)))[0]?.[0];
    process.stderr.write(`[bench] kept topics under ${prefix}; slowest group: ./rollout-stream trace ${slowest} --prefix ${prefix}\n`);
  }
  await admin.disconnect();

  const lines = [
    `profile            ${profile} (${groups.size} groups × ${values.generations ?? 16} rows; ${arrived.size} packed)`,
    `rows/s             ${(rows / seconds).toFixed(1)}`,
    `tokens/s           ${(tokens / seconds / 1e6).toFixed(3)} M`,
    `MB/s (row bytes)   ${mbps.toFixed(1)}`,
    `latency p50/p99    ${percentile(latencies, 50)} ms / ${percentile(latencies, 99)} ms (last row sent → packed committed)`,
    `stage RSS peak     ${peakRss.map((k) => `${(k / 1024).toFixed(0)} MiB`).join(', ')}`,
    `broker raw         ${raw.toFixed(1)} MB/s (ProducerPerformance, ${avgRecord}-byte records, acks=all)`,
    `ratio e2e/raw: ${(mbps / (raw / 4)).toFixed(3)}`,
  ];
  console.log(lines.join('\n'));
  return 0;
}

/**
 * `bench e2e`: the load generator through all three stages on the local
 * broker, against the broker's raw throughput for the same record sizes
 * measured in the same run with Kafka's own ProducerPerformance tool.
 *
 *   ratio e2e/raw = pipeline MB/s ÷ (raw MB/s ÷ 4)
 *
 * (a row's bytes are written four times on their way: row-completed,
 * group-complete, penalized, packed). With `--format gym-result` the load
 * generator's rows are sent as the NeMo-Gym results they came from (SPEC
 * §2.1, `asGymResultEvents`), so accumulate runs the ingest conversion; the
 * ratio then counts each row by the bytes of the row it converts back to
 * (its Avro encoding as a RolloutRow, measured before the clock), so the
 * two paths' ratios compare the same rollouts against the same baseline.
 * Stages run as one child process (`./rollout-stream run`), the producer
 * and the packed-topic reader in this one. Latency = last row of a group
 * sent → its packed record read (read_committed, so after the pack
 * transaction committed). Write amplification = what the broker wrote to
 * the run's topics (each partition's log growth, DescribeLogDirs,
 * ./log-sizes.ts) ÷ the row bytes.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { percentile } from '../tools/percentile.js';
import { ensureLocalServices, ROOT } from '../tools/local-services.js';
import { loadConfig } from '../config/load.js';
import { PACKED_COMPRESSIONS } from '../config/schema.js';
import {
  asGymResultEvents,
  formatBatchId,
  generateEvents,
  resolveLoadgenOptions,
  rowTokenCounts,
  type GymLoadgenEvent,
  type LoadgenEvent,
  type ProfileName,
} from '../loadgen/index.js';
import { TopicCodec } from '../streams/codecs/codec.js';
import { createKafka } from '../streams/kafka/kafkajs/client.js';
import { KafkajsAdmin } from '../streams/kafka/kafkajs/admin.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import { reassembling } from '../streams/chunks/chunked-messages.js';
import { createRegistry } from '../streams/codecs/schema-registry.js';
import { RowProducer } from '../tools/row-producer.js';
import { subjectOf, topicNames } from '../streams/topics/names.js';
import { createTopics } from '../streams/topics/create.js';
import { UsageError } from '../tools/command.js';
import { growthByTopic, partitionSizes, type PartitionSizes } from './log-sizes.js';

const USAGE = `usage: ./rollout-stream bench e2e [--profile published-max|router-replay|default|small]
                               [--batches B] [--groups G] [--generations N] [--rate R] [--duration S]
                               [--seed S] [--instances K] [--split | --separate] [--wire trainer|narrow] [--keep]
                               [--format row|gym-result] [--intermediate reference|full]
                               [--packed-compression zstd|lz4|snappy|gzip|none|producer] [--max-record-bytes N]
                               [--client kafkajs|platformatic] [--cpu-prof DIR] [--brokers 3]

Runs the load generator through all stages on the local broker (started if
needed; KAFKA_BROKERS to use another) and prints rows/s, tokens/s, MB/s,
p50/p90/p99/max latency (last row sent → packed record committed), the peak
RSS of every process (stage processes, this one, the local broker and
registry), the stage processes' CPU per row while measuring (/proc; steadier
than rates on a shared machine; also this process's and the local broker's), the broker's raw throughput for the same
record size (ProducerPerformance), "ratio e2e/raw: <n>" (row MB/s ÷ (raw
MB/s ÷ 4)), the bytes the broker wrote per topic, and last
"write amplification: <n>" and "ratio rows/raw: <n>" (row MB/s ÷ raw MB/s).
Write amplification = bytes the broker wrote for this run ÷ the row bytes
(those of the MB/s line): the growth over the run of every partition of the
run's topics (row-completed, group-complete, penalized, packed, dead-letter,
metrics, the changelogs, batch-progress; not the raw baseline's bench-raw,
nor __consumer_offsets or __transaction_state), the sum of each partition's
.log segment files (record batches, keys, headers and transaction markers
included; index files not), as Kafka's DescribeLogDirs reports it (Kafka's
LogDirsCommand), counted once per partition: the leader's copy on a
replicated cluster. "n/a (reason)" where the broker does not answer it.
--rate R paces the producer at R rows/s (default: as fast as possible).
--duration S keeps producing batches for S seconds (a soak; needs --rate)
  instead of --batches, and prints each process's RSS per minute.
--instances K runs K stage processes (scale-out measurement).
--keep leaves the topics (and names the slowest group to trace).
--split runs each stage in its own process (per instance).
--separate runs the stages of one process with one transaction each
  (run --separate) instead of fused (one per batch, the default).
--wire W packs with pack.wire_dtypes W: trainer (the default) or narrow.
--intermediate M runs the stages with runtime.intermediate_records M:
  reference (the default: group-complete and penalized carry the rows'
  offsets in row-completed) or full (copies of the rows).
--packed-compression C creates rollout.packed with topics.packed_compression C
  (default zstd: the broker stores the packed batches compressed; none: as sent).
--max-record-bytes N creates every topic of the run (but the compacted
  changelogs) with max.message.bytes N (topics.max_message_bytes; e.g. 8MiB,
  1MiB, 127MiB; default kafka.max_message_bytes): records above it travel
  as chunk sets, and the stages and the load generator discover the limit
  from the broker. Compare a chunked run with an unchunked one by running
  both (e.g. 8MiB against 127MiB, under the local broker's 128 MiB request
  cap, where nothing in router-replay is chunked).
--client C runs the stage processes on Kafka client library C (kafka.client:
  kafkajs, the default, or platformatic: @platformatic/kafka); the load
  generator and the readers stay on kafkajs (bench/README.md "Kafka clients").
--format gym-result sends each row as the NeMo-Gym result it came from
  (GymResult): accumulate converts it back (the ingest path).
  MB/s and the ratio count the converted rows' bytes (each row's Avro size,
  as in the default --format row), so the two formats compare directly; the
  GymResult bytes actually sent get their own line.
--cpu-prof DIR writes a V8 CPU profile of each stage process into DIR
  (open in Chrome DevTools, or summarize self time per module).
--brokers 3 runs the same measurement on the single local broker
  (replication 1) and on the local three-broker cluster (replication 3,
  min.insync.replicas 2), then a paced run on the cluster during which the
  broker leading most row-completed partitions is SIGKILLed for 30 s; last
  lines "ratio rf3/rf1: <n>" (rows/s) and "failover gap: <ms>" (the longest
  time without a packed group after the kill). bench/e2e-cluster.ts.
--kill-leader-after S (on the cluster; what --brokers 3 uses) SIGKILLs that
  broker S s into producing, restarts it after --down D s (30), and prints
  "failover gap: <ms>".

Example: ./rollout-stream bench e2e --profile published-max --batches 4
         ./rollout-stream bench e2e --profile published-max --batches 2 --format gym-result`;


/** A TCP port free on 127.0.0.1 right now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Mean milliseconds per transaction phase over every stage process, from
 * their /metrics (`rollout_stream_transaction_phase_seconds`), grouped by
 * stage in pipeline order, e.g. "accumulate send 6.8, send_offsets 6.0 ·
 * postprocess process 4.0, send 9.8, … · accumulate+postprocess+pack commit
 * 2.3 (420)". Null when no process answered.
 */
async function transactionPhases(ports: number[]): Promise<string | null> {
  const totals = new Map<string, Map<string, { sum: number; count: number }>>();
  for (const port of ports) {
    const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text()).catch(() => null);
    if (text === null) continue;
    for (const m of text.matchAll(/^rollout_stream_transaction_phase_seconds_(sum|count)\{([^}]*)\} (\S+)$/gm)) {
      const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
      const byPhase = totals.get(labels.stage!) ?? totals.set(labels.stage!, new Map()).get(labels.stage!)!;
      const t = byPhase.get(labels.phase!) ?? byPhase.set(labels.phase!, { sum: 0, count: 0 }).get(labels.phase!)!;
      if (m[1] === 'sum') t.sum += Number(m[3]);
      else t.count += Number(m[3]);
    }
  }
  if (totals.size === 0) return null;
  const stageOrder = ['accumulate', 'postprocess', 'pack', 'accumulate+postprocess+pack', 'batch-metrics'];
  const phaseOrder = ['process', 'send', 'send_offsets', 'commit'];
  const rank = (order: string[], x: string) => (order.includes(x) ? order.indexOf(x) : order.length);
  return [...totals]
    .sort(([a], [b]) => rank(stageOrder, a) - rank(stageOrder, b))
    .map(([stage, byPhase]) => {
      const parts = [...byPhase]
        .sort(([a], [b]) => rank(phaseOrder, a) - rank(phaseOrder, b))
        .map(([phase, t]) => `${phase} ${((t.sum / Math.max(1, t.count)) * 1000).toFixed(1)}${phase === 'commit' ? ` (${t.count})` : ''}`);
      return `${stage} ${parts.join(', ')}`;
    })
    .join(' · ');
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

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;

/**
 * CPU seconds (user + system) a process has used, from /proc; null where
 * that cannot be read (not Linux, process gone). Steadier than wall-clock
 * rates on a shared machine: what a stage spends per row does not depend on
 * who else is running.
 */
function cpuSeconds(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

/** RSS (KiB) of a process, 0 when it is gone. */
function rssKb(pid: number | undefined): number {
  if (!pid) return 0;
  const r = spawnSync('ps', ['-o', 'rss=', '-p', String(pid)], { encoding: 'utf8' });
  return Number(r.stdout.trim()) || 0;
}

/** Pid of a local service started by scripts/local-kafka.sh, when it runs here. */
function localPid(name: 'broker' | 'registry'): number | undefined {
  try {
    const pid = Number(readFileSync(join(ROOT, '.local', 'kafka', `${name}.pid`), 'utf8').trim());
    return rssKb(pid) > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * After `afterMs`, SIGKILLs the cluster node leading most partitions of
 * `topic` (scripts/local-kafka.sh kill-broker N --brokers 3) and starts it
 * again `downMs` later. Resolves with the node and when it was killed.
 */
function scheduleLeaderKill(
  /** The admin client's metadata call (who leads which partition). */
  admin: { fetchTopicMetadata(o: { topics: string[] }): Promise<{ topics: Array<{ partitions: Array<{ leader: number }> }> }> },
  topic: string,
  afterMs: number,
  downMs: number,
): Promise<{ node: number; leads: number; at: number }> {
  const script = join(ROOT, 'scripts', 'local-kafka.sh');
  const kafkaCmd = (...args: string[]) => {
    const r = spawnSync(script, [...args, '--brokers', '3'], { encoding: 'utf8', env: { ...process.env, RS_LOCAL_BROKER: '1' }, timeout: 180_000 });
    if (r.status !== 0) throw new Error(`local-kafka.sh ${args.join(' ')} failed: ${r.stderr}`);
  };
  return new Promise((resolve, reject) => {
    setTimeout(() => {
      void (async () => {
        const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
        const counts = new Map<number, number>();
        for (const p of topics[0]!.partitions) counts.set(p.leader, (counts.get(p.leader) ?? 0) + 1);
        const [node, leads] = [...counts].sort((a, b) => b[1] - a[1])[0]!;
        kafkaCmd('kill-broker', String(node));
        const at = Date.now();
        process.stderr.write(`[bench] node ${node} SIGKILLed; starting it again in ${downMs / 1000} s\n`);
        setTimeout(() => {
          try {
            kafkaCmd('start-broker', String(node));
            resolve({ node, leads, at });
          } catch (e) {
            reject(e as Error);
          }
        }, downMs);
      })().catch(reject);
    }, afterMs);
  });
}

/** `a=2, b=1` */
function countBy(items: string[]): string {
  const n = new Map<string, number>();
  for (const x of items) n.set(x, (n.get(x) ?? 0) + 1);
  return [...n].map(([k, v]) => `${k}=${v}`).join(', ');
}

const mib = (kb: number) => `${(kb / 1024).toFixed(0)} MiB`;

/**
 * `row-completed 12.3 MB (1.02×) · group-complete …`: the bytes written to
 * each topic that got any, in pipeline order, named without the run's
 * prefix, each also as a multiple of the row bytes.
 */
function topicBytes(written: Map<string, number>, prefix: string, rowBytes: number): string {
  const order = Object.values(topicNames(prefix));
  const rank = (t: string) => (order.includes(t) ? order.indexOf(t) : order.length);
  return [...written]
    .filter(([, b]) => b > 0)
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([t, b]) => `${t.slice(prefix.length).replace(/^rollout(-stream)?\./, '')} ${(b / 1e6).toFixed(b < 1e6 ? 3 : 1)} MB (${(b / Math.max(1, rowBytes)).toFixed(2)}×)`)
    .join(' · ');
}

/** Peak and latest RSS of every process of the run, sampled every 500 ms. */
class RssWatch {
  readonly peak = new Map<string, number>();
  readonly last = new Map<string, number>();
  /** Per minute of the run: the largest RSS of each process in that minute (soak reports). */
  readonly perMinute: Array<Map<string, number>> = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly pids: () => Map<string, number | undefined>, private readonly t0: () => number) {}

  start(): void {
    this.timer = setInterval(() => this.sample(), 500);
  }

  sample(): void {
    const minute = Math.max(0, Math.floor((Date.now() - this.t0()) / 60_000));
    const bucket = (this.perMinute[minute] ??= new Map());
    for (const [name, pid] of this.pids()) {
      const kb = name === 'bench' ? Math.round(process.memoryUsage().rss / 1024) : rssKb(pid);
      if (kb === 0) continue;
      this.last.set(name, kb);
      this.peak.set(name, Math.max(this.peak.get(name) ?? 0, kb));
      bucket.set(name, Math.max(bucket.get(name) ?? 0, kb));
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}

/** `8MiB`, `1MiB`, `512KiB`, `1048576`: a byte count (binary units). */
export function parseByteSize(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(KiB|MiB|GiB|B)?$/i.exec(text.trim());
  const unit = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 }[(m?.[2] ?? 'B').toLowerCase() as 'b'];
  const n = m ? Math.floor(Number(m[1]) * unit) : NaN;
  if (!Number.isSafeInteger(n) || n <= 0) throw new UsageError(`${flag} must be a size such as 8MiB, 512KiB or 1048576, got ${text}`);
  return n;
}

/** A ratio with three decimals; one too small for them (a smoke run on a busy machine) shows six decimals instead of printing 0.000. */
function ratioText(r: number): string {
  return r > 0 && r < 0.0005 ? r.toFixed(6) : r.toFixed(3);
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
      duration: { type: 'string' },
      seed: { type: 'string', default: '1' },
      instances: { type: 'string', default: '1' },
      keep: { type: 'boolean' },
      split: { type: 'boolean' },
      separate: { type: 'boolean' },
      wire: { type: 'string', default: 'trainer' },
      format: { type: 'string', default: 'row' },
      intermediate: { type: 'string', default: 'reference' },
      'packed-compression': { type: 'string', default: 'zstd' },
      'max-record-bytes': { type: 'string' },
      client: { type: 'string', default: 'kafkajs' },
      'cpu-prof': { type: 'string' },
      brokers: { type: 'string' },
      'kill-leader-after': { type: 'string' },
      down: { type: 'string', default: '30' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const duration = values.duration === undefined ? null : Number(values.duration);
  if (duration !== null && !(duration > 0)) throw new UsageError(`--duration must be a positive number of seconds, got ${values.duration}`);
  if (duration !== null && values.rate === undefined) throw new UsageError('--duration needs --rate (a soak runs at a fixed load)');
  if (values.wire !== 'trainer' && values.wire !== 'narrow') throw new UsageError(`--wire must be trainer or narrow, got ${values.wire}`);
  if (values.format !== 'row' && values.format !== 'gym-result') throw new UsageError(`--format must be row or gym-result, got ${values.format}`);
  const gymResults = values.format === 'gym-result';
  if (values.intermediate !== 'reference' && values.intermediate !== 'full') {
    throw new UsageError(`--intermediate must be reference or full, got ${values.intermediate}`);
  }
  if (!(PACKED_COMPRESSIONS as readonly string[]).includes(values['packed-compression'])) {
    throw new UsageError(`--packed-compression must be one of ${PACKED_COMPRESSIONS.join(', ')}, got ${values['packed-compression']}`);
  }
  const maxRecordBytes = values['max-record-bytes'] === undefined ? null : parseByteSize(values['max-record-bytes'], '--max-record-bytes');
  if (values.client !== 'kafkajs' && values.client !== 'platformatic') throw new UsageError(`--client must be kafkajs or platformatic, got ${values.client}`);
  if (values.brokers !== undefined && values.brokers !== '1') {
    if (values.brokers !== '3') throw new UsageError(`--brokers must be 1 or 3, got ${values.brokers}`);
    const { compareOnCluster } = await import('./e2e-cluster.js');
    return compareOnCluster(argv.filter((a, i) => a !== '--brokers' && argv[i - 1] !== '--brokers' && !a.startsWith('--brokers=')));
  }
  const killAfter = values['kill-leader-after'] === undefined ? null : Number(values['kill-leader-after']);
  if (killAfter !== null && !(killAfter >= 0)) throw new UsageError(`--kill-leader-after must be seconds, got ${values['kill-leader-after']}`);
  ensureLocalServices();
  const prefix = `bench.${randomUUID().slice(0, 8)}.`;
  const { config } = loadConfig({
    overrides: [
      [['topics', 'prefix'], prefix],
      [['topics', 'packed_compression'], values['packed-compression']],
      ...(maxRecordBytes === null ? [] : ([[['topics', 'max_message_bytes'], maxRecordBytes]] as Array<[string[], unknown]>)),
    ],
  });
  const kafka = createKafka(config.kafka, 'bench');
  const admin = kafka.admin();
  await admin.connect();
  const registry = createRegistry(config.kafka);
  // The producer and topic creation go through the ops seam; the readers and the group and log-size probes below are kafkajs's.
  const ops = createOpsClient(config.kafka, 'bench-producer');
  await createTopics(KafkajsAdmin.over(admin), registry, config);
  const names = topicNames(prefix);

  const profile = values.profile as ProfileName;
  const generations = Number(values.generations ?? 16);
  const groupsPerBatch = Number(values.groups ?? (profile === 'published-max' || profile === 'router-replay' ? 32 : 16));
  const loadgenOptions = (firstBatch: number, batches: number) => ({
    batches,
    firstBatch,
    firstWeightVersion: firstBatch - 1,
    groupsPerBatch,
    generations,
    seed: Number(values.seed),
    profile,
    runId: `${prefix}run`,
    startTimeMs: Date.now(),
  });
  // Delay hints model the profile's rate; --rate scales them.
  const modeledRate = resolveLoadgenOptions(loadgenOptions(1, 1)).rowsPerSecond;
  const codec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), registry).init();

  // Events are generated lazily (a soak's rows never sit in memory at once);
  // a --duration run keeps adding batches until the time is up.
  let rows = 0;
  let tokens = 0;
  // Avro bytes of the rows as RolloutRows: with --format gym-result what the
  // pipeline's rows weigh, though GymResults are what is sent.
  let rowBytes = 0;
  let producing = true;
  let t0 = Date.now();
  function* events(): Generator<LoadgenEvent> {
    const batches = Number(values.batches);
    for (let b = 1; duration === null ? b <= batches : (Date.now() - t0) / 1000 < duration; b++) {
      for (const e of generateEvents(loadgenOptions(b, 1))) {
        if (e.kind === 'row') {
          rows++;
          tokens += rowTokenCounts(e.row).total;
          if (gymResults) rowBytes += codec.encode({ kind: 'row', row: e.row }).length;
        }
        yield e;
      }
    }
  }
  const lastSent = new Map<string, number>();

  const configPath = join(tmpdir(), `rs-bench-${randomUUID()}.json`);
  writeFileSync(configPath, JSON.stringify({ topics: { prefix }, kafka: { client: values.client }, runtime: { metrics_port: 0, intermediate_records: values.intermediate }, accumulate: { batch_end_grace_ms: 500 }, pack: { wire_dtypes: values.wire } }));
  const instances = Number(values.instances);
  // All three stages in one process run fused unless --separate.
  const fused = !values.split && !values.separate;
  // --split: one process per stage (per instance) instead of all stages in one.
  const stageSets = values.split ? ['accumulate', 'postprocess', 'pack'] : ['accumulate,postprocess,pack'];
  const launches = Array.from({ length: instances }, () => stageSets).flat();
  // --cpu-prof DIR: each stage process writes a V8 CPU profile there when it exits.
  const profArgs = values['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', values['cpu-prof']] : [];
  // Each stage process serves /metrics on its own port: its transaction phases are read at the end.
  const ports = await Promise.all(launches.map(() => freePort()));
  const stages = launches.map((set, i) => ({
    name: `stages[${i}] ${set}`,
    metricsPort: ports[i]!,
    child: spawn(process.execPath, [...profArgs, '--import', 'tsx', join(ROOT, 'cli', 'main.ts'), 'run', '--stages', set, '--config', configPath, '--quiet', ...(values.separate ? ['--separate'] : [])], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, METRICS_PORT: String(ports[i]) },
    }),
  }));
  // The JVMs of scripts/local-kafka.sh's single broker, when that is what this run uses.
  const single = config.kafka.brokers.length === 1;
  const broker = single ? localPid('broker') : undefined;
  const registryPid = single ? localPid('registry') : undefined;
  const rss = new RssWatch(
    () =>
      new Map<string, number | undefined>([
        ...stages.map((s) => [s.name, s.child.pid] as [string, number | undefined]),
        ['bench', process.pid],
        ...(broker ? [['broker (JVM)', broker] as [string, number]] : []),
        ...(registryPid ? [['registry (JVM)', registryPid] as [string, number]] : []),
      ]),
    () => t0,
  );
  rss.start();

  // Reader of the packed topic: arrival time per group.
  const arrived = new Map<string, number>();
  // Every packed record's arrival, for the failover gap.
  const arrivals: number[] = [];
  const reader = kafka.consumer({ groupId: `${prefix}bench-reader`, readUncommitted: false, maxWaitTimeInMs: 50 });
  await reader.connect();
  await reader.subscribe({ topic: names.packed, fromBeginning: true });
  let allIn: () => void = () => undefined;
  const done = new Promise<void>((r) => (allIn = r));
  // A group that dead-letters (e.g. record_too_large) is done too: counted, not waited for.
  const deadLettered = new Map<string, string>();
  const checkDone = () => {
    if (!producing && arrived.size + [...deadLettered.keys()].filter((g) => !arrived.has(g)).length >= lastSent.size) allIn();
  };
  const deadLetterCodec = new TopicCodec('deadLetter', subjectOf(names.deadLetter), registry);
  const dlReader = kafka.consumer({ groupId: `${prefix}bench-dl-reader`, readUncommitted: false, maxWaitTimeInMs: 200 });
  await dlReader.connect();
  await dlReader.subscribe({ topic: names.deadLetter, fromBeginning: true });
  // Both read whole records: a chunk set arrives once, with its last chunk.
  const onDeadLetter = reassembling(names.deadLetter, async (r) => {
    const d = await deadLetterCodec.decode(r.value!);
    if (d.group_id) deadLettered.set(d.group_id, d.reason);
    checkDone();
  });
  await dlReader.run({ eachMessage: ({ message, partition }) => onDeadLetter(partition, message) });
  const onPacked = reassembling(names.packed, (r) => {
    const key = r.key!.toString();
    arrivals.push(Date.now());
    if (!arrived.has(key)) arrived.set(key, Date.now());
    checkDone();
  });
  await reader.run({ eachMessage: ({ message, partition }) => onPacked(partition, message) });
  // Wait until every stage's consumer group is stable (partitions assigned,
  // state restored), so start-up is not measured as latency.
  // Fused: one consumer group for the chain (accumulate's) and batch metrics.
  const consuming = fused ? ['accumulate', 'batch-metrics'] : ['accumulate', 'postprocess', 'batch-metrics', 'pack'];
  const stageGroups = consuming.map((s) => `${prefix}rollout-stream.${s}`);
  for (let i = 0; i < 120; i++) {
    const { groups: described } = await admin.describeGroups(stageGroups);
    if (described.every((g) => g.state === 'Stable' && g.members.length === instances)) break;
    if (i === 119) process.stderr.write('[bench] stage groups not stable after 60 s; measuring anyway\n');
    await new Promise((r) => setTimeout(r, 500));
  }
  await new Promise((r) => setTimeout(r, 2000));

  const producer = new RowProducer({
    kafka: ops,
    topic: names.rowCompleted,
    codec,
    ...(values.rate ? { pace: modeledRate / Number(values.rate) } : {}),
    onRowSent: (g) => lastSent.set(g, Date.now()),
  });
  await producer.connect();
  const progress = duration === null ? null : setInterval(() => {
    const s = (Date.now() - t0) / 1000;
    const rssNow = [...rss.last].map(([n, kb]) => `${n.split(' ')[0]} ${mib(kb)}`).join(', ');
    process.stderr.write(`[bench] ${s.toFixed(0)} s: ${rows} rows sent, ${arrived.size} groups packed; RSS ${rssNow}\n`);
  }, 30_000);
  // A fixed run's rows are generated before the clock starts (rollout workers
  // are other machines; the synthetic generator's CPU is not the pipeline's).
  // A soak generates them as it goes, so its memory stays flat.
  const lazy: Iterable<LoadgenEvent | GymLoadgenEvent> = gymResults ? asGymResultEvents(events()) : events();
  const source = duration === null ? [...lazy] : lazy;
  // The run's topics (bench-raw comes later); their sizes before and after give what the broker wrote.
  const runTopics = async () => (await admin.listTopics()).filter((t) => t.startsWith(prefix));
  const logSizes = async (): Promise<PartitionSizes | string> =>
    partitionSizes(admin, config.kafka.brokers.join(','), await runTopics()).catch((e: Error) => e.message);
  const logBefore = await logSizes();
  const stageCpu0 = stages.map((s) => cpuSeconds(s.child.pid));
  const benchCpu0 = process.cpuUsage();
  const brokerCpu0 = cpuSeconds(broker);
  t0 = Date.now();
  const failover = killAfter === null ? null : scheduleLeaderKill(admin, names.rowCompleted, killAfter * 1000, Number(values.down) * 1000);
  const sent = await producer.send(source);
  await producer.disconnect();
  producing = false;
  checkDone();
  const timeout = setTimeout(() => allIn(), 600_000);
  await done;
  clearTimeout(timeout);
  const killed = failover ? await failover : null;
  if (progress) clearInterval(progress);
  const seconds = (Date.now() - t0) / 1000;
  const benchCpu = process.cpuUsage(benchCpu0);
  const brokerCpuEnd = cpuSeconds(broker);
  const brokerCpu = brokerCpu0 === null || brokerCpuEnd === null ? null : brokerCpuEnd - brokerCpu0;
  const stageCpu = stages.map((s, i) => {
    const end = cpuSeconds(s.child.pid);
    return end === null || stageCpu0[i] == null ? null : end - stageCpu0[i]!;
  });
  rss.sample();
  rss.stop();
  const phases = await transactionPhases(stages.map((s) => s.metricsPort));
  await reader.disconnect();
  await dlReader.disconnect();
  // Stop the stages and wait for them (a --cpu-prof profile is written on exit).
  await Promise.all(
    stages.map(
      (s) =>
        new Promise<void>((resolve) => {
          if (s.child.exitCode !== null) return resolve();
          const force = setTimeout(() => s.child.kill('SIGKILL'), 30_000);
          s.child.once('exit', () => {
            clearTimeout(force);
            resolve();
          });
          s.child.kill('SIGTERM');
        }),
    ),
  );

  // Bytes written per topic, or why they are unknown.
  const written = typeof logBefore === 'string' ? logBefore : await logSizes().then((after) => (typeof after === 'string' ? after : growthByTopic(logBefore, after)));
  // Row bytes either way (see the file comment); sent.bytes are GymResults with --format gym-result.
  const bytes = gymResults ? rowBytes : sent.bytes;
  const latencyOf = [...arrived].map(([g, t]) => [g, t - (lastSent.get(g) ?? t)] as const);
  const latencies = latencyOf.map(([, ms]) => ms).sort((a, b) => a - b);
  const mbps = bytes / 1e6 / seconds;
  const avgRecord = Math.max(1, Math.round(bytes / Math.max(rows, 1)));
  const rawTopic = `${prefix}bench-raw`;
  await admin.createTopics({
    topics: [{ topic: rawTopic, numPartitions: config.topics.partitions, configEntries: [{ name: 'max.message.bytes', value: String(config.kafka.max_message_bytes) }] }],
  });
  // 400 MB (at least 200 records): enough for the producer's JIT to warm up,
  // so the baseline is the broker's sustained rate (short runs read low).
  const raw = rawBrokerMBps(config.kafka.brokers.join(','), rawTopic, avgRecord, Math.max(200, Math.ceil(4e8 / avgRecord)));
  await admin.deleteTopics({ topics: values.keep ? [rawTopic] : [...Object.values(names), rawTopic] }).catch(() => undefined);
  if (values.keep) {
    const slowest = [...arrived].sort((a, b) => b[1] - (lastSent.get(b[0]) ?? 0) - (a[1] - (lastSent.get(a[0]) ?? 0)))[0]?.[0];
    process.stderr.write(`[bench] kept topics under ${prefix}; slowest group: ./rollout-stream trace ${slowest} --prefix ${prefix}\n`);
  }
  await admin.disconnect();

  const pct = (p: number) => `${percentile(latencies, p)} ms`;
  // The first batch pays for cold code, first transactions to each output
  // partition and coordinator lookups; the rest is the steady state.
  const warm = latencyOf
    .filter(([g]) => !g.includes(`-${formatBatchId(1)}-g`))
    .map(([, ms]) => ms)
    .sort((a, b) => a - b);
  const lines = [
    `profile            ${profile} (${lastSent.size} groups × ${generations} rows; ${arrived.size} packed${duration !== null ? `; soak ${duration} s` : ''})`,
    ...(gymResults ? [`input              GymResults (--format gym-result): ${sent.results} sent, converted back to rows by accumulate`] : []),
    `stages             ${fused ? 'fused (one transaction per batch)' : values.split ? 'one process per stage' : 'separate (one transaction per stage)'} × ${instances} instance(s); packed wire ${values.wire}`,
    `intermediate       ${values.intermediate} (runtime.intermediate_records); packed topic compression ${values['packed-compression']}` +
      `; record limit ${maxRecordBytes === null ? `${config.kafka.max_message_bytes} (kafka.max_message_bytes)` : `${maxRecordBytes} (--max-record-bytes; larger records as chunk sets)`}`,
    `kafka client       ${values.client} (kafka.client; stage processes)`,
    ...(deadLettered.size > 0
      ? [`dead letters       ${deadLettered.size} groups: ${countBy([...deadLettered.values()])}`]
      : []),
    `rows/s             ${(rows / seconds).toFixed(1)}`,
    `tokens/s           ${(tokens / seconds / 1e6).toFixed(3)} M`,
    `MB/s (row bytes)   ${mbps.toFixed(1)}`,
    ...(gymResults ? [`MB/s (GymResults)  ${(sent.bytes / 1e6 / seconds).toFixed(1)} (${(sent.bytes / Math.max(1, bytes)).toFixed(2)}× the row bytes)`] : []),
    `latency            p50 ${pct(50)}, p90 ${pct(90)}, p99 ${pct(99)}, max ${latencies.length ? latencies[latencies.length - 1] : NaN} ms (last row sent → packed committed)`,
    ...(warm.length > 0 && warm.length < latencies.length
      ? [
          `latency (batch 2+) p50 ${percentile(warm, 50)} ms, p90 ${percentile(warm, 90)} ms, p99 ${percentile(warm, 99)} ms, max ${warm[warm.length - 1]} ms (${warm.length} groups after the first batch)`,
        ]
      : []),
    ...(phases ? [`tx phases (mean ms) ${phases}`] : []),
    ...(stageCpu.every((c) => c !== null) && rows > 0
      ? [
          `stage CPU          ${((stageCpu.reduce((a, c) => a + c!, 0) * 1000) / rows).toFixed(2)} ms/row (${stageCpu.map((c) => `${c!.toFixed(2)} s`).join(' + ')} user+system of the stage process(es) while measuring); ` +
            `this process (producer, readers) ${((benchCpu.user + benchCpu.system) / 1000 / rows).toFixed(2)} ms/row` +
            (brokerCpu === null ? '' : `; broker (JVM) ${((brokerCpu * 1000) / rows).toFixed(2)} ms/row`),
        ]
      : []),
    `RSS peak           ${[...rss.peak].map(([n, kb]) => `${n} ${mib(kb)}`).join('; ')}`,
  ];
  if (rss.perMinute.length > 2) {
    for (const [name] of rss.peak) {
      lines.push(`RSS per minute     ${name}: ${rss.perMinute.map((m) => (m.has(name) ? (m.get(name)! / 1024).toFixed(0) : '-')).join(' ')} MiB`);
    }
  }
  lines.push(
    `broker raw         ${raw.toFixed(1)} MB/s (ProducerPerformance, ${avgRecord}-byte records, acks=all)`,
    `ratio e2e/raw: ${ratioText(mbps / (raw / 4))}`,
  );
  if (typeof written === 'string') {
    lines.push(`write amplification: n/a (log sizes unreadable: ${written})`);
  } else {
    const total = [...written.values()].reduce((a, b) => a + b, 0);
    lines.push(`bytes by topic     ${topicBytes(written, prefix, bytes)}`, `write amplification: ${(total / Math.max(1, bytes)).toFixed(2)}`);
  }
  lines.push(`ratio rows/raw: ${ratioText(mbps / raw)}`);
  if (killed) {
    // Longest stretch without a packed record from the kill to the last record.
    const after = [killed.at, ...arrivals.filter((t) => t > killed.at)].sort((a, b) => a - b);
    let gap = 0;
    for (let i = 1; i < after.length; i++) gap = Math.max(gap, after[i]! - after[i - 1]!);
    lines.push(`failover           node ${killed.node} (leading ${killed.leads} row-completed partitions) SIGKILLed ${((killed.at - t0) / 1000).toFixed(0)} s into producing, down ${Number(values.down)} s; ${after.length - 1} packed records after`);
    lines.push(`failover gap: ${gap}`);
  }
  console.log(lines.join('\n'));
  return 0;
}

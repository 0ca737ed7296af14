/**
 * `bench compression`: which record-batch codec moves rollouts fastest.
 *
 * Records are load-generator rows (`generateEvents`, profiles published-max
 * and router-replay) encoded with the real Avro codec, cut into send units
 * of at most `--chunk-bytes` the way `RowProducer` flushes. For every codec,
 * on the same bytes in the same run:
 *
 * - in process: compression ratio and single-thread compress/decompress
 *   MB/s of each unit, through the codec kafkajs itself runs
 *   (`kafkaCodec`); best of `--reps`, codecs interleaved per rep;
 * - through the broker: per codec a fresh one-partition topic
 *   `bench.compression.<run>.<codec>` with a tail (read_committed)
 *   already joined, then an idempotent producer (acks=all, one request in
 *   flight: OpsClient.idempotentSink) sends every unit with that codec; produce MB/s = bytes / time
 *   to the last ack, e2e MB/s = bytes / time to the last record consumed
 *   and checked byte-equal; CPU ms/MB of this process (client) and of the
 *   broker process when it runs here (/proc; it also serves other users).
 *   Median and best of `--e2e-reps`, codecs interleaved per rep (each rep
 *   starts one codec later). Topics and groups are deleted afterwards.
 *
 * MB = 10^6 uncompressed bytes. The last line, `best: <codec>`, is the codec
 * with the highest load-weighted median e2e MB/s (`scoreCodecs`); codecs within
 * `--tie` of it count as tied and the best ratio among them wins (fewer
 * bytes on disk and on the network for the same speed).
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { ensureLocalServices } from '../tools/local-services.js';
import { loadConfig } from '../config/load.js';
import { generateEvents, PROFILES, type ProfileName } from '../loadgen/index.js';
import { AvroBodyCodec } from '../streams/codecs/codec.js';
import { COMPRESSION_NAMES, kafkaCodec, registerCompressionCodecs, type CompressionName } from '../streams/kafka/kafkajs/compression.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import type { IdempotentSink, OpsClient, ScanRecord, TopicTail } from '../streams/kafka/types.js';

const USAGE = `usage: npx tsx bench/compression.ts [--profiles published-max,router-replay] [--groups G] [--generations N]
                                   [--seed S] [--codecs none,gzip,snappy,lz4,zstd] [--chunk-bytes B]
                                   [--reps 3] [--e2e-reps 3] [--tie 0.1] [--no-broker]

Per profile and codec: ratio, compress/decompress MB/s in process, produce and
produce+consume MB/s through the broker (KAFKA_BROKERS, or the local one,
started if needed) and the client's CPU ms per MB. Default sizes: published-max
24 groups × 16 rows (~17 MB), router-replay 2 groups × 16 rows (~50 MB); about
two minutes on two cores. Last line "best: <codec>" (see bench/README.md).`;

const DEFAULT_GROUPS: Record<string, number> = { 'published-max': 24, 'router-replay': 2 };

interface Unit {
  key: string;
  values: Buffer[];
  bytes: number;
}

interface Row {
  profile: string;
  codec: CompressionName;
  /** MB/s this profile produces at its published row rate (rows/s × mean record bytes): its weight in the choice. */
  loadMBps: number;
  ratio: number;
  compressMBps: number;
  decompressMBps: number;
  /** Best over the e2e reps. */
  produceMBps: number;
  e2eMBps: number;
  /** Every e2e rep, for the median and the spread. */
  e2eSamples: number[];
  /** Client (producer + consumer process) CPU ms per MB, every e2e rep. */
  cpuSamples: number[];
  /** The local broker's CPU ms per MB, every e2e rep it could be read (it also serves whoever else uses it). */
  brokerCpuSamples: number[];
}

const median = (xs: number[]) => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000);

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

/** CPU ms used so far by the broker process (`kafka.Kafka`) on this machine, with its pid; null when there is none. */
function brokerCpu(): { pid: string; ms: number } | null {
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes('kafka.Kafka')) continue;
      const fields = readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]!.split(' ');
      return { pid, ms: ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK };
    } catch {
      // The process ended while we looked.
    }
  }
  return null;
}

/** Rows of one profile, Avro-encoded, cut into send units of ≤ chunkBytes (always ≥ 1 record). */
function buildUnits(profile: ProfileName, groups: number, generations: number, seed: number, chunkBytes: number): Unit[] {
  const codec = new AvroBodyCodec('rowCompleted');
  const units: Unit[] = [];
  let current: Unit | null = null;
  for (const e of generateEvents({ batches: 1, groupsPerBatch: groups, generations, seed, profile })) {
    if (e.kind !== 'row') continue;
    const value = codec.encodeBody({ kind: 'row', row: e.row });
    if (current === null || (current.bytes > 0 && current.bytes + value.length > chunkBytes)) {
      current = { key: e.row.group_id, values: [], bytes: 0 };
      units.push(current);
    }
    current.values.push(value);
    current.bytes += value.length;
  }
  return units;
}

/** In-process ratio and speeds of one codec over all units (one pass). */
async function measureCodec(name: CompressionName, blobs: Buffer[]): Promise<{ ratio: number; compressMs: number; decompressMs: number }> {
  const codec = kafkaCodec(name);
  if (codec === null) return { ratio: 1, compressMs: Number.NaN, decompressMs: Number.NaN };
  const compressed: Buffer[] = [];
  let t0 = performance.now();
  for (const b of blobs) compressed.push(await codec.compress(b));
  const compressMs = performance.now() - t0;
  const restored: Buffer[] = [];
  t0 = performance.now();
  for (const c of compressed) restored.push(await codec.decompress(c));
  const decompressMs = performance.now() - t0;
  blobs.forEach((b, i) => {
    if (!b.equals(restored[i]!)) throw new Error(`${name}: unit ${i} does not round-trip`);
  });
  const raw = blobs.reduce((s, b) => s + b.length, 0);
  return { ratio: raw / compressed.reduce((s, c) => s + c.length, 0), compressMs, decompressMs };
}

/**
 * One codec's path through the broker: its own one-partition topic, an
 * idempotent producer (acks=all, one request in flight, as `RowProducer`)
 * and a read_committed tail that checks every record byte for byte.
 * The tail joins once (the broker delays a first join by 3 s) and is
 * paused between rounds so idle lanes do not poll while another measures.
 */
class Lane {
  private expected: Buffer[] = [];
  private received = 0;
  private finish: () => void = () => undefined;
  private fail: (e: unknown) => void = () => undefined;
  private sink: IdempotentSink | null = null;
  private tail: TopicTail | null = null;

  constructor(
    private readonly kafka: OpsClient,
    readonly topic: string,
    readonly codec: CompressionName,
    private readonly maxMessageBytes: number,
  ) {}

  private onRecord(r: ScanRecord): void {
    const want = this.expected[this.received];
    if (want === undefined || r.value === null || !want.equals(r.value)) {
      this.fail(new Error(`${this.codec}: record ${this.received} read back differs from what was sent`));
      return;
    }
    if (++this.received === this.expected.length) this.finish();
  }

  async open(): Promise<void> {
    // Each kept as soon as it is open, so close() releases it even if the other fails.
    const [, tail] = await Promise.all([
      this.kafka.idempotentSink({ compression: this.codec }).then((s) => (this.sink = s)),
      this.kafka
        .tail([this.topic], (r) => this.onRecord(r), { maxWaitMs: 50, maxBytes: 2 * this.maxMessageBytes, maxBytesPerPartition: this.maxMessageBytes + 1024 })
        .then((t) => (this.tail = t)),
    ]);
    tail.failed.catch((e: unknown) => this.fail(e));
    tail.pause();
    // Untimed warm-up: topic metadata, the fetch session, the codec's first call.
    await this.round([{ key: 'warm-up', values: [Buffer.alloc(1024, 7)], bytes: 1024 }]);
  }

  /** Sends every unit with this lane's codec and reads it back; ms to the last ack and to the last record read. */
  async round(units: Unit[]): Promise<{ produceMs: number; e2eMs: number; cpuMs: number; brokerMs: number | null }> {
    this.expected = units.flatMap((u) => u.values);
    this.received = 0;
    const done = new Promise<void>((resolve, reject) => ((this.finish = resolve), (this.fail = reject)));
    this.tail!.resume();
    try {
      const cpu0 = process.cpuUsage();
      const broker0 = brokerCpu();
      const t0 = performance.now();
      for (const u of units) {
        // Partition 0: the lane's topic has one.
        await this.sink!.send(u.values.map((value) => ({ topic: this.topic, partition: 0, key: u.key, value })));
      }
      const produceMs = performance.now() - t0;
      await done;
      const e2eMs = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      const broker1 = brokerCpu();
      // A restarted broker (another pid) makes the difference meaningless.
      const brokerMs = broker0 && broker1 && broker0.pid === broker1.pid ? broker1.ms - broker0.ms : null;
      return { produceMs, e2eMs, cpuMs: (cpu.user + cpu.system) / 1000, brokerMs };
    } finally {
      this.tail!.pause();
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.tail?.stop(), this.sink?.close()]);
  }
}

/** Creates one topic and one lane per codec, joined and paused. */
async function openLanes(kafka: OpsClient, run: string, codecs: CompressionName[], maxMessageBytes: number): Promise<Lane[]> {
  const lanes = codecs.map((c) => new Lane(kafka, `bench.compression.${run}.${c}`, c, maxMessageBytes));
  const admin = await kafka.admin();
  try {
    await admin.createTopics(lanes.map((l) => ({ topic: l.topic, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: String(maxMessageBytes) }] })));
    await admin.waitForLeaders(lanes.map((l) => l.topic));
  } finally {
    await admin.close();
  }
  try {
    await Promise.all(lanes.map((l) => l.open()));
  } catch (e) {
    await closeLanes(kafka, lanes);
    throw e;
  }
  return lanes;
}

/** Closes the lanes (their tails remove their groups) and deletes their topics. */
async function closeLanes(kafka: OpsClient, lanes: Lane[]): Promise<void> {
  await Promise.all(lanes.map((l) => l.close().catch(() => undefined)));
  const admin = await kafka.admin();
  try {
    const topics = lanes.map((l) => l.topic);
    await admin.deleteTopics(topics).catch((e: unknown) => console.error(`could not delete the bench topics ${topics.join(', ')}: ${String(e)}`));
  } finally {
    await admin.close();
  }
}

function formatTable(rows: Row[]): string {
  const f = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '–');
  const lines = [
    '| profile | codec | ratio | compress MB/s | decompress MB/s | produce MB/s | produce+consume MB/s median (best) | CPU ms/MB client / broker |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.profile} | ${r.codec} | ${f(r.ratio, 2)} | ${f(r.compressMBps)} | ${f(r.decompressMBps)} | ${f(r.produceMBps)} | ` +
        `${f(median(r.e2eSamples))} (${f(r.e2eMBps)}) | ${f(median(r.cpuSamples), 1)} / ${f(median(r.brokerCpuSamples), 1)} |`,
    );
  }
  return lines.join('\n');
}

/**
 * Load-weighted throughput of each codec: the harmonic mean of its median
 * produce+consume MB/s over the profiles, weighted by the MB/s each profile
 * produces at its published row rate, i.e. how fast it moves the traffic
 * the profiles model. A light profile (published-max, ~3 MB/s) barely
 * counts next to a heavy one (router-replay, ~90 MB/s), because only the
 * heavy one is bound by throughput. The median, not the best rep: on a
 * shared machine the best of three is an extreme value and swung the
 * ranking between runs; the median did not. Without e2e numbers, compress
 * MB/s (of the compressing codecs) stands in.
 */
export function scoreCodecs(rows: Row[], metric: 'e2e' | 'compressMBps'): Map<CompressionName, number> {
  const value = (r: Row) => (metric === 'e2e' ? median(r.e2eSamples) : r.compressMBps);
  const scores = new Map<CompressionName, number>();
  for (const c of new Set(rows.map((r) => r.codec))) {
    if (metric === 'compressMBps' && c === 'none') continue;
    const mine = rows.filter((r) => r.codec === c);
    const load = mine.reduce((s, r) => s + r.loadMBps, 0);
    scores.set(c, load / mine.reduce((s, r) => s + r.loadMBps / value(r), 0));
  }
  return scores;
}

/** The best-scoring codec; codecs within `tie` of it count as tied and the best ratio (weighted geometric mean) among them wins. */
export function pickBest(rows: Row[], scores: Map<CompressionName, number>, tie: number): CompressionName {
  const top = Math.max(...scores.values());
  const tied = [...scores].filter(([, v]) => v >= top * (1 - tie)).map(([c]) => c);
  const ratio = (c: CompressionName) => {
    const mine = rows.filter((r) => r.codec === c);
    const load = mine.reduce((s, r) => s + r.loadMBps, 0);
    return Math.exp(mine.reduce((s, r) => s + r.loadMBps * Math.log(r.ratio), 0) / load);
  };
  return tied.reduce((a, b) => (ratio(b) > ratio(a) ? b : a));
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      profiles: { type: 'string', default: 'published-max,router-replay' },
      groups: { type: 'string' },
      generations: { type: 'string', default: '16' },
      seed: { type: 'string', default: '1' },
      codecs: { type: 'string', default: COMPRESSION_NAMES.join(',') },
      'chunk-bytes': { type: 'string', default: String(4 * 1024 * 1024) },
      reps: { type: 'string', default: '3' },
      'e2e-reps': { type: 'string', default: '3' },
      tie: { type: 'string', default: '0.1' },
      'no-broker': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const codecs = values.codecs.split(',').map((c) => c.trim()) as CompressionName[];
  for (const c of codecs) if (!COMPRESSION_NAMES.includes(c)) throw new Error(`unknown codec ${c}; known: ${COMPRESSION_NAMES.join(', ')}`);
  const reps = Number(values.reps);
  const e2eReps = values['no-broker'] ? 0 : Number(values['e2e-reps']);
  registerCompressionCodecs();

  let kafka: OpsClient | null = null;
  let maxMessageBytes = 64 * 1024 * 1024;
  if (e2eReps > 0) {
    ensureLocalServices();
    const { config } = loadConfig({});
    kafka = createOpsClient(config.kafka, 'bench-compression');
    maxMessageBytes = config.kafka.max_message_bytes;
  }
  const run = randomUUID().slice(0, 8);
  const lanes = kafka === null ? [] : await openLanes(kafka, run, codecs, maxMessageBytes);
  const rows: Row[] = [];
  try {
    for (const profile of values.profiles.split(',').map((p) => p.trim()) as ProfileName[]) {
      const groups = Number(values.groups ?? DEFAULT_GROUPS[profile] ?? 8);
      const units = buildUnits(profile, groups, Number(values.generations), Number(values.seed), Number(values['chunk-bytes']));
      const blobs = units.map((u) => Buffer.concat(u.values));
      const bytes = blobs.reduce((s, b) => s + b.length, 0);
      const records = units.reduce((s, u) => s + u.values.length, 0);
      console.error(`[${profile}] ${records} records, ${(bytes / 1e6).toFixed(1)} MB in ${units.length} sends`);
      // Each rep starts with the next codec, so none always follows the same neighbour.
      const order = (rep: number) => codecs.map((_, i) => codecs[(i + rep) % codecs.length]!);
      const shape = PROFILES[profile];
      const loadMBps = ((shape?.rowsPerSecond ?? 1) * bytes) / records / 1e6;
      const best = new Map<CompressionName, Row>(
        codecs.map((c) => [
          c,
          { profile, codec: c, loadMBps, ratio: 0, compressMBps: 0, decompressMBps: 0, produceMBps: Number.NaN, e2eMBps: Number.NaN, e2eSamples: [], cpuSamples: [], brokerCpuSamples: [] },
        ]),
      );
      for (let rep = 0; rep < reps; rep++) {
        for (const c of order(rep)) {
          const m = await measureCodec(c, blobs);
          const r = best.get(c)!;
          r.ratio = m.ratio;
          r.compressMBps = Math.max(r.compressMBps, mbps(bytes, m.compressMs)) || Number.NaN;
          r.decompressMBps = Math.max(r.decompressMBps, mbps(bytes, m.decompressMs)) || Number.NaN;
        }
      }
      for (let rep = 0; rep < e2eReps; rep++) {
        for (const c of order(rep)) {
          const m = await lanes.find((l) => l.codec === c)!.round(units);
          const r = best.get(c)!;
          r.produceMBps = Math.max(r.produceMBps || 0, mbps(bytes, m.produceMs));
          r.e2eMBps = Math.max(r.e2eMBps || 0, mbps(bytes, m.e2eMs));
          r.e2eSamples.push(mbps(bytes, m.e2eMs));
          r.cpuSamples.push(m.cpuMs / (bytes / 1e6));
          if (m.brokerMs !== null) r.brokerCpuSamples.push(m.brokerMs / (bytes / 1e6));
          console.error(
            `[${profile}] ${c} rep ${rep + 1}: produce ${mbps(bytes, m.produceMs).toFixed(0)} MB/s, e2e ${mbps(bytes, m.e2eMs).toFixed(0)} MB/s, ` +
              `CPU ms/MB client ${(m.cpuMs / (bytes / 1e6)).toFixed(1)} broker ${m.brokerMs === null ? '–' : (m.brokerMs / (bytes / 1e6)).toFixed(1)}`,
          );
        }
      }
      rows.push(...best.values());
    }
  } finally {
    if (kafka !== null) await closeLanes(kafka, lanes);
  }
  console.log(formatTable(rows));
  const metric = e2eReps > 0 ? 'e2e' : 'compressMBps';
  const loads = [...new Map(rows.map((r) => [r.profile, r.loadMBps])).entries()].map(([p, l]) => `${p} ${l.toFixed(1)} MB/s`).join(', ');
  const scores = scoreCodecs(rows, metric);
  console.log(
    `load-weighted ${metric === 'e2e' ? 'median produce+consume' : 'compress'} MB/s (weights = each profile at its published rate: ${loads}): ` +
      [...scores].map(([c, v]) => `${c} ${v.toFixed(1)}`).join(', '),
  );
  console.log(`rule: the highest load-weighted MB/s; codecs within ${Number(values.tie) * 100}% of it are tied and the best ratio among them wins`);
  console.log(`best: ${pickBest(rows, scores, Number(values.tie))}`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}

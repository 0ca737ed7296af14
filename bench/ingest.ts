/**
 * `bench ingest`: the two costs a NeMo-Gym rollout worker's records add to
 * the pipeline (SPEC §2.1, §2.2), each against a baseline measured in the
 * same run on the same records:
 *
 *   (a) the conversion `ingestGymResult` against `JSON.parse` of the
 *       record's `gym_row` and `gym_result` texts (what accumulate must do
 *       with the record anyway): `ratio ingest/parse` (target ≤ 2);
 *   (b) publishing through `RolloutPublisher` against a raw kafkajs produce
 *       of the same encoded bytes: `ratio publish/raw` (target ≥ 0.7).
 *
 * Records come from the load generator (`bench/ingest-records.ts`) and are
 * built before any clock starts; pairs alternate baseline and measured, and
 * each pair's ratio is printed with the median, because this machine's two
 * shared cores make single passes swing.
 */
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { ensureLocalServices } from '../tools/local-services.js';
import { parseFlags, reportError, UsageError } from '../tools/command.js';
import { loadConfig } from '../config/load.js';
import { configSchema } from '../config/schema.js';
import { resolveIngestConfig } from '../processors/ingest-config.js';
import { measureConversion } from './ingest-convert.js';
import { BATCHING, measurePublishing } from './ingest-publish.js';
import { buildRecords, DEFAULT_ROWS, INGEST_PROFILES, type IngestProfile } from './ingest-records.js';

const USAGE = `usage: ./rollout-stream bench ingest [--profile published-max|router-replay] [--rows N]
                                  [--repeat R] [--seed S] [--no-publish]

Measures, per profile (both unless --profile), on GymResults built from the
load generator's rows before any clock starts:
  (a) ingestGymResult (GymResult → row, default ingest config) on each parsed
      record against JSON.parse of the record's gym_row and gym_result texts;
      last line of the part "ratio ingest/parse: <median>" (target ≤ 2);
  (b) publishing them through RolloutPublisher (validation, Avro encoding,
      sends) against a raw kafkajs produce of the same encoded bytes (same
      scratch topic, acks=-1, idempotent, same batching), each pass ending
      with the batch's BatchEnd; "ratio publish/raw: <median>" (target ≥ 0.7).
      Needs the broker (started locally unless KAFKA_BROKERS is set); the
      scratch topic bench.ingest.<id>.<profile>.rollout.row-completed is
      deleted afterwards.
Baseline and measured passes alternate: R counted pairs after one warm-up
pair, each pair's ratio printed, then the median. Lines per profile:
"profile", "convert pair <i>", "convert median", "ratio ingest/parse: <n>",
"publish pair <i>" (rows/s, MB/s and client CPU per MB of each side),
"publish median", "ratio publish/raw: <n>".

  --profile P     published-max or router-replay (default: both, in that order)
  --rows N        GymResults per pass (default 512 published-max, 32 router-replay)
  --repeat R      counted pairs per part (default 5)
  --seed S        load generator seed (default 1)
  --no-publish    part (a) only; no broker needed

Results and the commands that produced them: bench/README.md "ingest".
Also runnable as npx tsx bench/ingest.ts [options] (same flags).
Example: ./rollout-stream bench ingest --profile published-max --repeat 7`;

function exposeGc(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function positiveInt(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`${flag} must be a positive integer, got ${text}`);
  return n;
}

const label = (name: string) => name.padEnd(19);
const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
const kb = (bytes: number) => `${(bytes / 1e3).toFixed(0)} kB`;

export async function main(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, {
    profile: { type: 'string' },
    rows: { type: 'string' },
    repeat: { type: 'string' },
    seed: { type: 'string' },
    'no-publish': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.profile !== undefined && !(INGEST_PROFILES as readonly string[]).includes(values.profile)) {
    throw new UsageError(`--profile must be ${INGEST_PROFILES.join(' or ')}, got ${values.profile}`);
  }
  const profiles: IngestProfile[] = values.profile === undefined ? [...INGEST_PROFILES] : [values.profile as IngestProfile];
  const repeat = positiveInt('--repeat', values.repeat, 5);
  const seed = Number(values.seed ?? 1);
  if (!Number.isSafeInteger(seed)) throw new UsageError(`--seed must be an integer, got ${values.seed}`);
  const publish = values['no-publish'] !== true;
  const rowsOf = new Map(profiles.map((p) => [p, positiveInt('--rows', values.rows, DEFAULT_ROWS[p])]));

  const run = randomUUID().slice(0, 8);
  const cfg = resolveIngestConfig(configSchema.parse({}).ingest, { configDir: process.cwd() });
  if (publish) ensureLocalServices();
  const gc = exposeGc();

  for (const profile of profiles) {
    const rows = rowsOf.get(profile)!;
    process.stderr.write(`[bench] ${profile}: building ${rows} GymResults…\n`);
    const set = buildRecords(profile, rows, seed, `bench-ingest-${run}`);
    const n = set.records.length;
    console.log(
      `${label('profile')}${profile}: ${n} GymResults (${set.groups} group${set.groups === 1 ? '' : 's'} × ${set.generations}, seed ${seed}); JSON text ${mb(set.jsonBytes)} (mean ${kb(set.jsonBytes / n)}, max ${kb(set.maxRecordJsonBytes)})`,
    );

    const convert = measureConversion(set.records, cfg, repeat, gc);
    const perRow = (ms: number) => `${((ms * 1000) / n).toFixed(1)} µs/row`;
    for (const [i, p] of convert.entries()) {
      const parseMBps = set.jsonBytes / 1e6 / (p.parseMs / 1000);
      console.log(`${label(`convert pair ${i + 1}`)}parse ${perRow(p.parseMs)} (${parseMBps.toFixed(1)} MB/s of JSON), ingest ${perRow(p.ingestMs)}: ratio ${p.ratio.toFixed(3)}`);
    }
    console.log(
      `${label('convert median')}parse ${perRow(median(convert.map((p) => p.parseMs)))}, ingest ${perRow(median(convert.map((p) => p.ingestMs)))} over ${convert.length} pairs (1 warm-up pair not counted)`,
    );
    console.log(`ratio ingest/parse: ${median(convert.map((p) => p.ratio)).toFixed(3)}`);

    if (!publish) {
      console.log(`${label('publish')}skipped (--no-publish)`);
      continue;
    }
    const { config } = loadConfig({ overrides: [[['topics', 'prefix'], `bench.ingest.${run}.${profile}.`]] });
    process.stderr.write(`[bench] ${profile}: publishing to ${config.topics.prefix}rollout.row-completed…\n`);
    const pub = await measurePublishing(set.records, config, repeat, gc);
    const rate = (p: { seconds: number; rows: number; bytes: number; cpuMs: number }) =>
      `${(p.rows / p.seconds).toFixed(1)} rows/s ${(p.bytes / 1e6 / p.seconds).toFixed(1)} MB/s (cpu ${(p.cpuMs / (p.bytes / 1e6)).toFixed(1)} ms/MB)`;
    for (const [i, p] of pub.pairs.entries()) {
      console.log(`${label(`publish pair ${i + 1}`)}raw ${rate(p.raw)}, publisher ${rate(p.publisher)}: ratio ${p.ratio.toFixed(3)}`);
    }
    const med = (side: 'raw' | 'publisher') => {
      const seconds = median(pub.pairs.map((p) => p[side].seconds));
      const cpuMs = median(pub.pairs.map((p) => p[side].cpuMs));
      return rate({ seconds, rows: n, bytes: pub.bytesPerPass, cpuMs });
    };
    console.log(
      `${label('publish median')}raw ${med('raw')}, publisher ${med('publisher')} over ${pub.pairs.length} pairs (1 warm-up pair not counted); ` +
        `${mb(pub.bytesPerPass)} of Avro values a pass (${pub.recordsPerPass} records incl. ${pub.partitions} BatchEnds), ${pub.partitions} partitions, ` +
        `acks=-1, idempotent, compression ${config.kafka.compression}, a send at ${BATCHING.flushBytes / 1024 / 1024} MiB or ${BATCHING.flushRecords} records`,
    );
    console.log(`ratio publish/raw: ${median(pub.pairs.map((p) => p.ratio)).toFixed(3)}`);
  }
  return 0;
}

// Run directly (`npx tsx bench/ingest.ts …`), as bench/pack.ts can be.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2)).catch((e: unknown) => reportError(e, 'bench ingest'));
}

/**
 * `npx tsx bench/clients.ts`: the Kafka client libraries through our own
 * seams (streams/kafka/types.ts `KafkaClient`), on the stages' loop (issue
 * 13 item 2; bench/README.md "Kafka clients").
 *
 * An input topic of P partitions is filled once (kafkajs, idempotent) with N
 * records of 50–200 kB (seeded sizes, random bytes). Each run, with one
 * client: a GroupSource of a fresh group on the input, one TransactionalSink
 * per partition (initialized when assigned), fetches of at most 1 MiB (about
 * 8 records a transaction), and per polled batch, partitions
 * in parallel: begin, send the batch's records to a fresh output topic (same
 * partition), sendOffsets, commit, release: what a stage does, without the
 * processing. Timed from the first poll to the last commit (group join and
 * sink init excluded). Runs alternate kafkajs / other, pair by pair; each
 * pair prints records/s, MB/s (10^6 bytes) and `ratio <client>/kafkajs`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '../config/load.js';
import type { KafkaConfig } from '../config/schema.js';
import { createKafka } from '../streams/kafka/kafkajs/client.js';
import { createKafkaClient } from '../streams/kafka/kafkajs/adapter.js';
import type { FetchedBatch, KafkaClient, TransactionalSink } from '../streams/kafka/types.js';

const USAGE = `usage: npx tsx bench/clients.ts [--records 1500] [--partitions 4] [--pairs 3] [--clients platformatic]

The stage loop (poll, begin, send, sendOffsets, commit, release) through each
installed client's KafkaClient adapter on the local broker (KAFKA_BROKERS to
use another), alternating with kafkajs. Last line per client "ratio <client>/kafkajs: <n>".`;

/** Seeded numbers in [0, 1) (a linear congruential generator): the same record sizes every run. */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => ((x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

type Factory = (config: KafkaConfig, suffix: string) => KafkaClient;

/** The adapters that load here (an optional dependency may be missing). */
async function factories(wanted: string[]): Promise<Map<string, Factory>> {
  const out = new Map<string, Factory>([['kafkajs', createKafkaClient]]);
  if (wanted.includes('platformatic')) {
    try {
      const m = await import('../streams/kafka/platformatic/client.js');
      out.set('platformatic', m.createPlatformaticClient);
    } catch (e) {
      console.log(`platformatic: not installed here (${(e as Error).message.split('\n')[0]})`);
    }
  }
  for (const w of wanted) if (!out.has(w) && w !== 'platformatic') console.log(`${w}: no adapter in streams/kafka/ (skipped)`);
  return out;
}

interface RunResult {
  records: number;
  bytes: number;
  seconds: number;
}

async function runOnce(client: KafkaClient, input: string, output: string, total: number, tag: string): Promise<RunResult> {
  const groupId = `bench.clients.${tag}.${randomUUID().slice(0, 8)}`;
  const sinks = new Map<number, Promise<TransactionalSink>>();
  const source = client.groupSource({ groupId, topic: input, sessionTimeoutMs: 10_000, maxBytes: 1024 * 1024, concurrency: 8 });
  const sinkOf = (p: number) =>
    sinks.get(p) ??
    sinks
      .set(
        p,
        (async () => {
          const s = client.transactionalSink(`${groupId}.${p}`, { transactionTimeoutMs: 60_000, partitionsOf: async () => 4 });
          await s.init();
          return s;
        })(),
      )
      .get(p)!;
  await source.start({
    onAssigned: async (ps) => void (await Promise.all(ps.map(sinkOf))),
    onRevoked: async () => undefined,
    onLost: (e) => console.error(`${tag}: membership lost: ${String(e)}`),
  });
  let records = 0;
  let bytes = 0;
  let t0 = 0;
  const step = async (b: FetchedBatch) => {
    const sink = await sinkOf(b.partition);
    const next = (BigInt(b.records.at(-1)!.offset) + 1n).toString();
    await sink.begin();
    await sink.send(b.records.map((r) => ({ topic: output, partition: b.partition, key: r.key, value: r.value })));
    await sink.sendOffsets(groupId, [{ topic: input, partition: b.partition, offset: next }]);
    await sink.commit();
    source.release(b, next);
    records += b.records.length;
    for (const r of b.records) bytes += r.value?.length ?? 0;
  };
  const deadline = Date.now() + 120_000;
  while (records < total && Date.now() < deadline) {
    const batches = await source.poll(200);
    if (batches.length > 0 && t0 === 0) t0 = performance.now();
    await Promise.all(batches.map(step));
  }
  const seconds = (performance.now() - t0) / 1000;
  await source.stop();
  for (const s of sinks.values()) await (await s).close();
  await client.close();
  if (records < total) throw new Error(`${tag}: only ${records} of ${total} records in 120 s`);
  return { records, bytes, seconds };
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      records: { type: 'string', default: '1500' },
      partitions: { type: 'string', default: '4' },
      pairs: { type: 'string', default: '3' },
      clients: { type: 'string', default: 'platformatic' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const total = Number(values.records);
  const partitions = Number(values.partitions);
  const pairs = Number(values.pairs);
  const { config } = loadConfig({});
  const made = await factories(values.clients.split(','));
  const others = [...made.keys()].filter((k) => k !== 'kafkajs');

  const kafka = createKafka(config.kafka, 'bench-clients');
  const admin = kafka.admin();
  await admin.connect();
  const run = `bench.clients.${randomUUID().slice(0, 8)}`;
  const input = `${run}.in`;
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic: input, numPartitions: partitions }] });
  const rnd = lcg(13);
  const sizes = [...Array(total).keys()].map(() => 50_000 + Math.floor(rnd() * 150_000));
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const pool = randomBytes(200_000);
  for (let i = 0; i < total; i += 40) {
    await producer.send({ topic: input, acks: -1, messages: sizes.slice(i, i + 40).map((n, j) => ({ partition: (i + j) % partitions, key: `g${i + j}`, value: pool.subarray(0, n) })) });
  }
  await producer.disconnect();
  const mb = sizes.reduce((a, b) => a + b, 0) / 1e6;
  console.log(`input: ${total} records, ${mb.toFixed(1)} MB over ${partitions} partitions; clients: kafkajs, ${others.join(', ') || '(none other installed)'}`);
  console.log('pair client          records/s     MB/s   seconds');
  const outputs: string[] = [];
  const ratios = new Map<string, number[]>();
  for (let pair = 1; pair <= pairs; pair++) {
    for (const other of others) {
      const r: Record<string, RunResult> = {};
      for (const name of ['kafkajs', other]) {
        const output = `${run}.out.${name}.${pair}`;
        outputs.push(output);
        await admin.createTopics({ waitForLeaders: true, topics: [{ topic: output, numPartitions: partitions }] });
        r[name] = await runOnce(made.get(name)!(config.kafka, `bench-${name}`), input, output, total, name);
        const x = r[name]!;
        console.log(`${String(pair).padStart(4)} ${name.padEnd(14)} ${(x.records / x.seconds).toFixed(1).padStart(10)} ${(x.bytes / 1e6 / x.seconds).toFixed(1).padStart(8)} ${x.seconds.toFixed(2).padStart(9)}`);
      }
      const ratio = r.kafkajs!.seconds / r[other]!.seconds;
      (ratios.get(other) ?? ratios.set(other, []).get(other)!).push(ratio);
      console.log(`     ratio ${other}/kafkajs: ${ratio.toFixed(2)}`);
    }
  }
  await admin.deleteTopics({ topics: [input, ...outputs] }).catch(() => undefined);
  await admin.disconnect();
  for (const [other, rs] of ratios) console.log(`ratio ${other}/kafkajs: ${(rs.reduce((a, b) => a + b, 0) / rs.length).toFixed(2)} (mean of ${rs.length} pairs: ${rs.map((x) => x.toFixed(2)).join(', ')})`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}

/**
 * `bench tx`: what one stage step's Kafka transaction costs on this broker,
 * the floor under every stage's latency.
 *
 * On a fresh one-partition output topic, per step and interleaved:
 *   plain  an idempotent producer sends the record (acks=all) and waits for
 *          the ack: the least a stage step could cost;
 *   tx     a transactional producer does what a stage does per batch with
 *          the same record: begin, send, sendOffsets (input offset of a
 *          consumer group), commit; each phase timed.
 * Prints p50/p90/p99 per phase and the last line
 * `ratio tx/plain: <p50 tx ÷ p50 plain>`. `--gap-ms` waits between steps
 * (a stage at low load), `--stages N` multiplies the tx p50/p99 into the
 * floor of N transactional hops in series (the pipeline has 3).
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { ensureLocalServices } from '../tools/local-services.js';
import { loadConfig } from '../config/load.js';
import { createKafka } from '../streams/kafka/kafkajs/client.js';
import { percentile } from '../tools/percentile.js';

const USAGE = `usage: ./rollout-stream bench tx [--steps 300] [--record-bytes 45000] [--gap-ms 0] [--stages 3]

Times one stage step's transaction (begin, send, sendOffsets, commit) against
a plain idempotent acks=all send of the same record on the local broker
(KAFKA_BROKERS to use another). Last line "ratio tx/plain: <n>".
Example: ./rollout-stream bench tx --gap-ms 20`;

const q = percentile;

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      steps: { type: 'string', default: '300' },
      'record-bytes': { type: 'string', default: '45000' },
      'gap-ms': { type: 'string', default: '0' },
      stages: { type: 'string', default: '3' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const steps = Number(values.steps);
  const gap = Number(values['gap-ms']);
  const hops = Number(values.stages);
  ensureLocalServices();
  const { config } = loadConfig({});
  const kafka = createKafka(config.kafka, 'bench-tx');
  const admin = kafka.admin();
  await admin.connect();
  const run = `bench.tx.${randomUUID().slice(0, 8)}`;
  const out = `${run}.out`;
  const input = `${run}.in`;
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic: out, numPartitions: 1 }, { topic: input, numPartitions: 1 }] });
  // The settings of streams/kafka/kafkajs/sink.ts (5 ms first retry on CONCURRENT_TRANSACTIONS).
  const tx = kafka.producer({ transactionalId: run, idempotent: true, maxInFlightRequests: 1, retry: { initialRetryTime: 5, maxRetryTime: 2_000, retries: 25 } });
  const plain = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await Promise.all([tx.connect(), plain.connect()]);
  const value = Buffer.alloc(Number(values['record-bytes']), 7);
  const t: Record<string, number[]> = { plain: [], begin: [], send: [], sendOffsets: [], commit: [], tx: [] };
  const warmup = Math.min(20, Math.floor(steps / 5));
  for (let i = 0; i < steps + warmup; i++) {
    const keep = i >= warmup;
    const p0 = performance.now();
    await plain.send({ topic: out, acks: -1, messages: [{ key: 'k', value }] });
    if (keep) t.plain!.push(performance.now() - p0);
    if (gap) await new Promise((r) => setTimeout(r, gap));
    const t0 = performance.now();
    const trx = await tx.transaction();
    const t1 = performance.now();
    await trx.send({ topic: out, acks: -1, messages: [{ key: 'k', value }] });
    const t2 = performance.now();
    await trx.sendOffsets({ consumerGroupId: `${run}.group`, topics: [{ topic: input, partitions: [{ partition: 0, offset: String(i + 1) }] }] });
    const t3 = performance.now();
    await trx.commit();
    const t4 = performance.now();
    if (keep) {
      t.begin!.push(t1 - t0);
      t.send!.push(t2 - t1);
      t.sendOffsets!.push(t3 - t2);
      t.commit!.push(t4 - t3);
      t.tx!.push(t4 - t0);
    }
    if (gap) await new Promise((r) => setTimeout(r, gap));
  }
  await Promise.all([tx.disconnect(), plain.disconnect()]);
  await admin.deleteTopics({ topics: [out, input] }).catch(() => undefined);
  await admin.deleteGroups([`${run}.group`]).catch(() => undefined);
  await admin.disconnect();
  console.log(`${steps} steps of one ${value.length}-byte record, ${gap} ms between steps`);
  console.log('phase          p50 ms   p90 ms   p99 ms');
  for (const [k, xs] of Object.entries(t)) {
    console.log(`${k.padEnd(12)} ${q(xs, 50).toFixed(1).padStart(8)} ${q(xs, 90).toFixed(1).padStart(8)} ${q(xs, 99).toFixed(1).padStart(8)}`);
  }
  console.log(`floor of ${hops} transactional hops in series: p50 ≥ ${(hops * q(t.tx!, 50)).toFixed(0)} ms (sum of p50s, before any fetch or processing)`);
  console.log(`ratio tx/plain: ${(q(t.tx!, 50) / q(t.plain!, 50)).toFixed(2)}`);
  return 0;
}

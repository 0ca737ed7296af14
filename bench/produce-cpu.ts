/**
 * What kafkajs's produce path costs the client per MB, with and without
 * streams/kafka/kafkajs/speedups.ts, on the local broker.
 *
 *   npx tsx bench/produce-cpu.ts [--rounds 3] [--sends 150] [--sizes 6000000,700000]
 *
 * Each round runs two child processes one after the other, one with the
 * patches and one with `ROLLOUT_STREAM_KAFKAJS_PATCHES=0` (order alternates
 * between rounds). A child sends `--sends` requests of one record per size
 * (key + value, idempotent producer, acks=all, one request in flight, as the
 * stages produce) to a fresh one-partition topic after 5 warm-up sends, and
 * reports its process CPU (user + system) per MB and the wall MB/s. The last
 * line is `ratio cpu unpatched/patched: <median of the rounds>`.
 */
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

interface ChildResult {
  patches: boolean;
  cpuMsPerMB: number;
  wallMBps: number;
}

async function child(sends: number, sizes: number[]): Promise<ChildResult> {
  const { createKafka, kafkaPatchesEnabled } = await import('../streams/kafka/kafkajs/client.js');
  const { loadConfig } = await import('../config/load.js');
  const { config } = loadConfig({});
  const kafka = createKafka(config.kafka, 'bench-produce-cpu');
  const admin = kafka.admin();
  await admin.connect();
  const topic = `bench.produce-cpu.${process.pid}.${Date.now()}`;
  await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: String(config.kafka.max_message_bytes) }] }],
  });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const messages = sizes.map((n, i) => ({ key: `k${i}`, value: Buffer.alloc(n, 7 + i) }));
  try {
    for (let i = 0; i < 5; i++) await producer.send({ topic, acks: -1, messages });
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < sends; i++) await producer.send({ topic, acks: -1, messages });
    const cpu = process.cpuUsage(cpu0);
    const seconds = (performance.now() - t0) / 1000;
    const mb = (sends * sizes.reduce((a, b) => a + b, 0)) / 1e6;
    return { patches: kafkaPatchesEnabled, cpuMsPerMB: (cpu.user + cpu.system) / 1000 / mb, wallMBps: mb / seconds };
  } finally {
    await producer.disconnect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      sends: { type: 'string', default: '150' },
      sizes: { type: 'string', default: '6000000,700000' },
      child: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log('usage: npx tsx bench/produce-cpu.ts [--rounds 3] [--sends 150] [--sizes 6000000,700000]\n(needs the local broker: ./rollout-stream kafka up)');
    return 0;
  }
  const sends = Number(values.sends);
  const sizes = values.sizes.split(',').map(Number);
  if (!(sends > 0) || sizes.some((n) => !(n > 0))) throw new Error('--sends and --sizes must be positive numbers');
  if (values.child) {
    console.log(JSON.stringify(await child(sends, sizes)));
    return 0;
  }
  const self = fileURLToPath(import.meta.url);
  const ratios: number[] = [];
  for (let round = 0; round < Number(values.rounds); round++) {
    const byMode = new Map<boolean, ChildResult>();
    for (const patched of round % 2 ? [false, true] : [true, false]) {
      const r = spawnSync(process.execPath, ['--import', 'tsx', self, '--child', '--sends', String(sends), '--sizes', values.sizes], {
        env: { ...process.env, ROLLOUT_STREAM_KAFKAJS_PATCHES: patched ? '1' : '0' },
        encoding: 'utf8',
      });
      if (r.status !== 0) throw new Error(`child failed (${r.status}): ${r.stderr}`);
      const result = JSON.parse(r.stdout.trim().split('\n').pop()!) as ChildResult;
      if (result.patches !== patched) throw new Error(`child ran with patches=${result.patches}, expected ${patched}`);
      byMode.set(patched, result);
      console.log(`round ${round + 1} ${patched ? 'patched  ' : 'unpatched'}  cpu ${result.cpuMsPerMB.toFixed(3)} ms/MB  wall ${result.wallMBps.toFixed(0)} MB/s`);
    }
    ratios.push(byMode.get(false)!.cpuMsPerMB / byMode.get(true)!.cpuMsPerMB);
  }
  console.log(`ratio cpu unpatched/patched: ${median(ratios).toFixed(2)}`);
  return 0;
}

process.exitCode = await main();

/**
 * kafkajs 2.2.4 against @confluentinc/kafka-javascript (librdkafka, its
 * KafkaJS-compatible API) on the local broker, for what our stages do
 * (bench/README.md, "kafka client"). Not part of the project's install: the
 * librdkafka client is built from source in a scratch directory:
 *
 *   mkdir -p /tmp/ckjs && cd /tmp/ckjs && npm init -y
 *   CKJS_LINKING=dynamic npm_config_nodedir=/usr npm install @confluentinc/kafka-javascript@1.10.1 kafkajs@2.2.4
 *   cp <repo>/bench/kafka-client-compare.mjs . && ROUNDS=3 DUR=10 node kafka-client-compare.mjs
 *
 * (≈ 3.5 min of build on 2 cores; the npm tarball bundles librdkafka's
 * sources, built as a shared library against the system's openssl and zlib;
 * no zstd unless libzstd-dev is installed.) Phases, each DUR seconds per
 * client, client order alternating per round: (a) a transactional producer
 * per partition: 16 × 45 kB records, sendOffsets, commit; (b) idempotent
 * acks=all produce; (c) read_committed consume of (b); (d) a stage-like loop:
 * consume (b)'s output read_committed, per partition a transaction of 16
 * records + sendOffsets + commit. Client CPU from process.cpuUsage, broker
 * CPU from /proc. Ends with the ratios kafka-javascript ÷ kafkajs.
 */
import { createRequire } from 'node:module';
import crypto from 'node:crypto';
const require = createRequire(import.meta.url);
const kjs = require('kafkajs');
const ck = require('@confluentinc/kafka-javascript').KafkaJS;

const BROKER = '127.0.0.1:9092';
const DUR = +(process.env.DUR || 10) * 1000;
const ROUNDS = +(process.env.ROUNDS || 2);
const REC = 45000, TXREC = 16, PARTS = 4;
const PLAIN_PER_SEND = 88; // 88 x 45 kB = 3.96 MB, 22 per partition (<1 MB batch each)
const VAL = crypto.randomBytes(REC);
const RUN = Date.now().toString(36);
const MB = 1e6;

const kk = new kjs.Kafka({ clientId: 'bench-kjs', brokers: [BROKER], logLevel: kjs.logLevel.NOTHING });
const kc = new ck.Kafka({ kafkaJS: { clientId: 'bench-ck', brokers: [BROKER], logLevel: ck.logLevel.ERROR } });
const admin = kk.admin();
const created = [];
async function mkTopic(name) {
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic: name, numPartitions: PARTS, replicationFactor: 1 }] });
  created.push(name);
  return name;
}
import fs from 'node:fs';
let BROKER_PID = null;
for (const d of fs.readdirSync('/proc')) { if (!/^\d+$/.test(d)) continue;
  try { const c = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8'); if (c.startsWith('java') && c.includes('kafka.Kafka')) { BROKER_PID = d; break; } } catch {} }
const brokerCpuS = () => { if (!BROKER_PID) return NaN; const f = fs.readFileSync(`/proc/${BROKER_PID}/stat`, 'utf8').split(') ')[1].split(' '); return (+f[11] + +f[12]) / 100; };
const sysIdleS = () => { const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number); return { idle: (f[3] + f[4]) / 100, total: f.reduce((a, b) => a + b, 0) / 100 }; };
const probe = () => ({ b: brokerCpuS(), s: sysIdleS() });
const probeDiff = (p0, mb, wall) => { const p1 = probe(); const tot = p1.s.total - p0.s.total; return { brokerCpuPerMB: (p1.b - p0.b) / mb, brokerUtil: (p1.b - p0.b) / wall, sysBusyFrac: 1 - (p1.s.idle - p0.s.idle) / tot }; };
const cpuS = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const sleep = ms => new Promise(r => setTimeout(r, ms));

// ---------- a. transactional stage ----------
async function benchTx(client, tag, round) {
  const out = await mkTopic(`bench-${RUN}-${tag}-${round}-txout`);
  const inp = await mkTopic(`bench-${RUN}-${tag}-${round}-txin`);
  const group = `bench-${RUN}-${tag}-${round}-g`;
  const prods = [];
  let consumer = null;
  for (let p = 0; p < PARTS; p++) {
    const tid = `bench-${RUN}-${tag}-${round}-tx-${p}`;
    const pr = client === 'ck'
      ? kc.producer({ kafkaJS: { transactionalId: tid, idempotent: true, maxInFlightRequests: 5 } })
      : kk.producer({ transactionalId: tid, idempotent: true, maxInFlightRequests: 1, retry: { initialRetryTime: 5, maxRetryTime: 2000, retries: 25 } }) // as /work/main streams/runtime/partition-task.ts;
    await pr.connect();
    prods.push(pr);
  }
  if (client === 'ck') {
    // ckjs sendOffsets requires a consumer object (uses its group metadata), not consumerGroupId
    consumer = kc.consumer({ kafkaJS: { groupId: group } });
    await consumer.connect();
  }
  const msgs = p => Array.from({ length: TXREC }, (_, i) => ({ key: `k${i}`, value: VAL, partition: p }));
  // warm-up one tx each
  const lat = []; let txs = 0; let stop = false;
  const runOne = async (pr, p, off, record) => {
    const t0 = performance.now();
    const tx = await pr.transaction();
    await tx.send({ topic: out, messages: msgs(p) });
    const topics = [{ topic: inp, partitions: [{ partition: p, offset: String(off) }] }];
    if (client === 'ck') await tx.sendOffsets({ consumer, topics });
    else await tx.sendOffsets({ consumerGroupId: group, topics });
    await tx.commit();
    if (record) { lat.push(performance.now() - t0); txs++; }
  };
  await Promise.all(prods.map((pr, p) => runOne(pr, p, 1, false)));
  const pr0 = probe(); const c0 = cpuS(), t0 = performance.now();
  setTimeout(() => { stop = true; }, DUR);
  await Promise.all(prods.map(async (pr, p) => { let off = 2; while (!stop) await runOne(pr, p, off++, true); }));
  const wall = (performance.now() - t0) / 1000, cpu = cpuS() - c0;
  const pd = probeDiff(pr0, txs * TXREC * REC / MB, wall);
  for (const pr of prods) await pr.disconnect();
  if (consumer) await consumer.disconnect();
  const mb = txs * TXREC * REC / MB;
  return { txps: txs / wall, mbps: mb / wall, p50: pct(lat, 0.5), p99: pct(lat, 0.99), cpuPerMB: cpu / mb, cpuUtil: cpu / wall, ...pd };
}

// ---------- b. plain idempotent produce ----------
async function benchProduce(client, tag, round) {
  const topic = await mkTopic(`bench-${RUN}-${tag}-${round}-plain`);
  const pr = client === 'ck'
    ? kc.producer({ kafkaJS: { idempotent: true, acks: -1 } })
    : kk.producer({ idempotent: true, maxInFlightRequests: 1 });
  await pr.connect();
  const messages = Array.from({ length: PLAIN_PER_SEND }, (_, i) => ({ key: `k${i}`, value: VAL, partition: i % PARTS }));
  if (client === 'ck') await pr.send({ topic, messages }); else await pr.send({ topic, acks: -1, messages }); // warm-up
  let n = 1;
  const pr0 = probe(); const c0 = cpuS(), t0 = performance.now();
  while (performance.now() - t0 < DUR) {
    if (client === 'ck') await pr.send({ topic, messages });
    else await pr.send({ topic, acks: -1, messages });
    n++;
  }
  const wall = (performance.now() - t0) / 1000, cpu = cpuS() - c0;
  const mb = (n - 1) * PLAIN_PER_SEND * REC / MB;
  const pd = probeDiff(pr0, mb, wall);
  await pr.disconnect();
  return { topic, records: n * PLAIN_PER_SEND, mbps: mb / wall, cpuPerMB: cpu / mb, cpuUtil: cpu / wall, ...pd };
}

// A connected read_committed consumer of either client, 4 MiB per partition per fetch.
async function readCommittedConsumer(client, group) {
  const c = client === 'ck'
    ? kc.consumer({ kafkaJS: { groupId: group, fromBeginning: true, autoCommit: false },
        'isolation.level': 'read_committed', 'max.partition.fetch.bytes': 4 * 1048576, 'fetch.max.bytes': 16 * 1048576,
        'js.consumer.max.batch.size': -1 })
    : kk.consumer({ groupId: group, readUncommitted: false, maxBytesPerPartition: 4 * 1048576, maxBytes: 16 * 1048576 });
  await c.connect();
  return c;
}

// ---------- c. read_committed consume ----------
async function benchConsume(client, tag, round, topic, records) {
  const group = `bench-${RUN}-${tag}-${round}-cons`;
  const c = await readCommittedConsumer(client, group);
  await c.subscribe({ topics: [topic], ...(client === 'ck' ? {} : { fromBeginning: true }) });
  let got = 0, bytes = 0, c0 = 0, t0 = 0, pr0 = null;
  let done; const fin = new Promise(r => { done = r; });
  const runOpts = { partitionsConsumedConcurrently: 4,
    eachBatch: async ({ batch }) => {
      if (!t0) { t0 = performance.now(); c0 = cpuS(); pr0 = probe(); }
      for (const m of batch.messages) { got++; bytes += m.value.length; }
      if (got >= records) done();
    },
  };
  if (client !== 'ck') runOpts.autoCommit = false;
  await c.run(runOpts);
  const tStart = performance.now();
  await Promise.race([fin, sleep(120000)]);
  const wall = (performance.now() - t0) / 1000, cpu = cpuS() - c0;
  const mb = bytes / MB;
  const pd = probeDiff(pr0, mb, wall);
  await c.disconnect();
  return { ...pd, mbps: mb / wall, cpuPerMB: cpu / mb, cpuUtil: cpu / wall, got, records, startupS: (t0 - tStart) / 1000 };
}

// ---------- d. stage-like end to end: read_committed consume -> per-partition tx (send 16 recs, sendOffsets, commit) ----------
async function benchE2E(client, tag, round, inTopic) {
  const out = await mkTopic(`bench-${RUN}-${tag}-${round}-e2eout`);
  const group = `bench-${RUN}-${tag}-${round}-e2e`;
  const prods = [];
  for (let p = 0; p < PARTS; p++) {
    const tid = `bench-${RUN}-${tag}-${round}-e2e-${p}`;
    const pr = client === 'ck'
      ? kc.producer({ kafkaJS: { transactionalId: tid, idempotent: true, maxInFlightRequests: 5 } })
      : kk.producer({ transactionalId: tid, idempotent: true, maxInFlightRequests: 1, retry: { initialRetryTime: 5, maxRetryTime: 2000, retries: 25 } });
    await pr.connect(); prods.push(pr);
  }
  const c = await readCommittedConsumer(client, group);
  await c.subscribe({ topics: [inTopic], ...(client === 'ck' ? {} : { fromBeginning: true }) });
  let stop = false, recs = 0, txs = 0, t0 = 0, c0 = 0, pr0 = null; const lat = [];
  let stopAt; const fin = new Promise(r => { stopAt = r; });
  await c.run({
    ...(client === 'ck' ? {} : { autoCommit: false }), eachBatchAutoResolve: false, partitionsConsumedConcurrently: 4,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      if (!t0) { t0 = performance.now(); c0 = cpuS(); pr0 = probe(); setTimeout(() => { stop = true; stopAt(); }, DUR); }
      const p = batch.partition, pr = prods[p];
      const ms = batch.messages;
      for (let i = 0; i < ms.length && !stop; i += TXREC) {
        const chunk = ms.slice(i, i + TXREC);
        const ts = performance.now();
        const tx = await pr.transaction();
        await tx.send({ topic: out, messages: chunk.map(m => ({ key: m.key, value: m.value, partition: p })) });
        const next = String(BigInt(chunk[chunk.length - 1].offset) + 1n);
        const topics = [{ topic: inTopic, partitions: [{ partition: p, offset: next }] }];
        if (client === 'ck') await tx.sendOffsets({ consumer: c, topics }); else await tx.sendOffsets({ consumerGroupId: group, topics });
        await tx.commit();
        lat.push(performance.now() - ts); txs++; recs += chunk.length;
        resolveOffset(chunk[chunk.length - 1].offset);
        if (client !== 'ck') await heartbeat();
      }
    },
  });
  await Promise.race([fin, sleep(DUR + 60000)]);
  const wall = (performance.now() - t0) / 1000, cpu = cpuS() - c0;
  const mb = recs * REC / MB;
  const pd = probeDiff(pr0, mb, wall);
  await c.disconnect();
  for (const pr of prods) { try { await pr.disconnect(); } catch {} }
  // validation: committed group offsets advanced by exactly the records processed
  const fo = await admin.fetchOffsets({ groupId: group, topics: [inTopic] });
  const committed = fo[0].partitions.reduce((a, x) => a + Math.max(0, +x.offset), 0);
  const wm = await admin.fetchTopicOffsets(out);
  const outHigh = wm.reduce((a, x) => a + +x.high, 0);
  return { committed, recs, outHighIncludingMarkers: outHigh, txsTotal: txs, txps: txs / wall, mbps: mb / wall, p50: pct(lat, 0.5), p99: pct(lat, 0.99), cpuPerMB: cpu / mb, cpuUtil: cpu / wall, ...pd };
}

const fmt = (x, d = 2) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(d));
async function main() {
  await admin.connect();
  const results = { kjs: [], ck: [] };
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? ['kjs', 'ck'] : ['ck', 'kjs'];
      for (const cl of order) {
        const tx = await benchTx(cl, cl, r);
        console.error(`[r${r} ${cl}] tx`, JSON.stringify(tx));
        const pl = await benchProduce(cl, cl, r);
        console.error(`[r${r} ${cl}] produce`, JSON.stringify(pl));
        const co = await benchConsume(cl, cl, r, pl.topic, pl.records);
        console.error(`[r${r} ${cl}] consume`, JSON.stringify(co));
        const e2e = await benchE2E(cl, cl, r, pl.topic);
        console.error(`[r${r} ${cl}] e2e`, JSON.stringify(e2e));
        results[cl].push({ round: r, tx, pl, co, e2e });
      }
    }
  } finally {
    const rows = [];
    for (const cl of ['kjs', 'ck']) for (const x of results[cl]) rows.push([cl === 'ck' ? 'kafka-javascript' : 'kafkajs', x.round,
      fmt(x.tx.txps, 1), fmt(x.tx.mbps, 1), fmt(x.tx.p50, 1), fmt(x.tx.p99, 1), fmt(x.tx.cpuPerMB, 4),
      fmt(x.tx.cpuUtil, 2), fmt(x.tx.brokerCpuPerMB, 4), fmt(x.tx.sysBusyFrac, 2), fmt(x.pl.mbps, 1), fmt(x.pl.cpuPerMB, 4), fmt(x.pl.cpuUtil, 2), fmt(x.pl.brokerCpuPerMB, 4), fmt(x.pl.sysBusyFrac, 2), fmt(x.co.mbps, 1), fmt(x.co.cpuPerMB, 4), fmt(x.co.brokerCpuPerMB, 4), fmt(x.e2e.txps, 1), fmt(x.e2e.mbps, 1), fmt(x.e2e.p50, 1), fmt(x.e2e.p99, 1), fmt(x.e2e.cpuPerMB, 4), fmt(x.e2e.cpuUtil, 2), fmt(x.e2e.sysBusyFrac, 2)]);
    const hdr = ['client', 'rnd', 'tx/s', 'txMB/s', 'txP50ms', 'txP99ms', 'txCPUs/MB', 'txCPUcores', 'txBrkCPUs/MB', 'txSysBusy', 'prodMB/s', 'prodCPUs/MB', 'prodCPUcores', 'prodBrkCPUs/MB', 'prodSysBusy', 'consMB/s', 'consCPUs/MB', 'consBrkCPUs/MB', 'e2eTx/s', 'e2eMB/s', 'e2eP50', 'e2eP99', 'e2eCPUs/MB', 'e2eCPUcores', 'e2eSysBusy'];
    console.log('| ' + hdr.join(' | ') + ' |');
    console.log('|' + hdr.map(() => '---').join('|') + '|');
    for (const r of rows) console.log('| ' + r.join(' | ') + ' |');
    if (results.kjs.length && results.ck.length) {
      const avg = (cl, f) => results[cl].reduce((s, x) => s + f(x), 0) / results[cl].length;
      const keys = { 'tx/s': x => x.tx.txps, 'tx p50 ms': x => x.tx.p50, 'tx p99 ms': x => x.tx.p99, 'tx CPU s/MB': x => x.tx.cpuPerMB, 'tx broker CPU s/MB': x => x.tx.brokerCpuPerMB,
        'produce MB/s': x => x.pl.mbps, 'produce CPU s/MB': x => x.pl.cpuPerMB, 'produce broker CPU s/MB': x => x.pl.brokerCpuPerMB, 'consume MB/s': x => x.co.mbps, 'consume CPU s/MB': x => x.co.cpuPerMB, 'e2e MB/s': x => x.e2e.mbps, 'e2e p50 ms': x => x.e2e.p50, 'e2e CPU s/MB': x => x.e2e.cpuPerMB };
      console.log('\nratios kafka-javascript ÷ kafkajs (mean over rounds):');
      for (const [k, f] of Object.entries(keys)) console.log(`  ${k}: ${fmt(avg('kjs', f), 4)} vs ${fmt(avg('ck', f), 4)} -> ${fmt(avg('ck', f) / avg('kjs', f), 2)}x`);
    }
    console.log('\nJSON', JSON.stringify(results));
    try { await admin.deleteTopics({ topics: created }); console.error('deleted', created.length, 'topics'); }
    catch (e) { console.error('delete failed', e.message, created); }
    await admin.disconnect();
  }
}
main().then(() => process.exit(0), e => { console.error('FAILED', e); process.exit(1); });

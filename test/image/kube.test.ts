/**
 * The Kubernetes manifests (deploy/kubernetes/) run by `podman kube play`
 * on this machine's engine, against the local broker: the topics Job's pod
 * creates the topics, the stage Deployment's pods start from the image and
 * become ready, a loadgen batch is packed byte-equal to the offline runner,
 * and deleting a pod mid-batch loses and duplicates nothing.
 *
 * What the test changes in the manifests, and why: the ConfigMap points at
 * the local broker, registry and a fresh topic prefix; the pods use the host
 * network (everything here listens on 127.0.0.1 only) and so the Deployment
 * becomes two single-replica Deployments with their own metrics ports (two
 * replicas would share one port on the host network); the Job becomes a Pod
 * (podman kube play has no Job kind); the Secret is left out (no SASL here:
 * the pods treat it as optional).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { runOffline } from '../../cli/offline.js';
import { formatJsonLine, parseJsonLine } from '../../json-form/form.js';
import { generateEvents, type LoadgenEvent } from '../../loadgen/index.js';
import { AvroBodyCodec, TopicCodec } from '../../streams/codecs/codec.js';
import { HEADER_BYTES } from '../../streams/codecs/wire-format.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { RowProducer } from '../../tools/row-producer.js';
import { sendInSlices, testEnv, type TestEnv } from '../integration/helpers.js';
import { readTopic } from '../integration/topic-reader.js';

const ROOT = join(import.meta.dirname, '..', '..');
const MANIFESTS = join(ROOT, 'deploy', 'kubernetes');
const IMAGE_SH = join(ROOT, 'scripts', 'image.sh');
const exec = promisify(execFile);
// Not from the repository root: podman 4.3's kube play looks for a build context named like the image there.
const work = mkdtempSync(join(tmpdir(), 'rs-kube-'));
const podman = (args: string[], timeout = 120_000) => exec(IMAGE_SH, ['podman', ...args], { cwd: work, timeout, maxBuffer: 64 * 1024 * 1024 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Doc = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const load = (file: string): Doc[] => parseAllDocuments(readFileSync(join(MANIFESTS, file), 'utf8')).map((d) => d.toJSON() as Doc).filter(Boolean);

async function status(url: string): Promise<number> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(1_000) })).status;
  } catch {
    return 0;
  }
}

async function waitReady(port: number, ms = 120_000): Promise<void> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if ((await status(`http://127.0.0.1:${port}/readyz`)) === 200) return;
    await sleep(250);
  }
  throw new Error(`/readyz on ${port} not 200 after ${ms} ms`);
}

describe('the Kubernetes manifests under podman kube play', () => {
  let env: TestEnv;
  const played: string[] = [];
  const ports = [19_600 + (process.pid % 300), 19_601 + (process.pid % 300)];

  beforeAll(async () => {
    // Pods an earlier run left behind (killed before its cleanup) would clash with this run's names.
    await podman(['pod', 'rm', '-f', '--ignore', 'rs-topics-create', 'rs-stages-a-pod-0', 'rs-stages-b-pod-0']).catch(() => undefined);
    // The prefix's topics come from the manifests' Job, so the env is made without them first.
    env = await testEnv('kube', [[['accumulate', 'batch_end_grace_ms'], 300]]);
  }, 120_000);

  afterAll(async () => {
    for (const f of played.reverse()) await podman(['kube', 'down', f]).catch(() => undefined);
    // kube down stops at the pod the test deleted itself: remove every pod of the test by name.
    await podman(['pod', 'rm', '-f', '--ignore', 'rs-topics-create', 'rs-stages-a-pod-0', 'rs-stages-b-pod-0']).catch(() => undefined);
    await env?.close();
  });

  test('the topics Job, two stage pods ready, a batch packed byte-equal to offline with one pod deleted mid-batch', async () => {
    const prefix = `it.kube-${Math.random().toString(36).slice(2, 8)}.`;
    const [envMap, configMap] = load('config.yaml');
    envMap!.data.KAFKA_BROKERS = env.config.kafka.brokers.join(',');
    envMap!.data.SCHEMA_REGISTRY_URL = env.config.kafka.schema_registry_url;
    envMap!.data.TOPIC_PREFIX = prefix;
    envMap!.data.METRICS_HOST = '127.0.0.1';
    // The test's own grace (the shipped config keeps its production settings otherwise).
    configMap!.data['config.yaml'] = `${configMap!.data['config.yaml']}accumulate:\n  batch_end_grace_ms: 300\n`.replace('partitions: 8', 'partitions: 4');
    const configs = [envMap!, configMap!];

    const [job] = load('topics-job.yaml');
    const jobPod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'rs-topics-create' }, spec: { ...job!.spec.template.spec, hostNetwork: true, restartPolicy: 'Never' } };
    const jobFile = join(work, 'job.yaml');
    writeFileSync(jobFile, [...configs, jobPod].map((d) => stringify(d)).join('---\n'));
    await podman(['kube', 'play', jobFile]);
    played.push(jobFile);
    const exit = await podman(['wait', 'rs-topics-create-topics-create'], 120_000);
    expect(exit.stdout.trim(), 'topics create exit code').toBe('0');
    const names = topicNames(prefix);
    expect((await env.admin.listTopics()).filter((t) => t.startsWith(prefix)).sort()).toEqual(Object.values(names).sort());

    const [deployment, pdb, service] = load('stages.yaml');
    expect([pdb!.kind, service!.kind]).toEqual(['PodDisruptionBudget', 'Service']);
    const stageDocs = ports.map((port, i) => {
      const d = structuredClone(deployment!);
      d.metadata.name = `rs-stages-${'ab'[i]}`;
      d.spec.replicas = 1;
      d.spec.template.spec.hostNetwork = true;
      const c = d.spec.template.spec.containers[0];
      c.env = c.env.map((e: Doc) => (e.name === 'METRICS_PORT' ? { ...e, value: String(port) } : e));
      delete c.ports; // podman refuses port mappings on the host network (the probes name the port itself)
      c.livenessProbe.httpGet.port = port;
      c.readinessProbe.httpGet.port = port;
      return d;
    });
    const stagesFile = join(work, 'stages.yaml');
    writeFileSync(stagesFile, [...configs, ...stageDocs].map((d) => stringify(d)).join('---\n'));
    await podman(['kube', 'play', stagesFile]);
    played.push(stagesFile);
    for (const p of ports) await waitReady(p);

    // A batch, sent in slices; one pod deleted while it is being processed.
    const events: LoadgenEvent[] = [...generateEvents({ batches: 1, groupsPerBatch: 12, generations: 4, seed: 9, profile: 'small', runId: `${prefix}run` })];
    const producer = new RowProducer({ kafka: env.ops, topic: names.rowCompleted, codec: await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), env.registry).init() });
    await producer.connect();
    const sending = sendInSlices(producer, events, 6, 700);
    await sleep(1_500);
    await podman(['pod', 'rm', '-f', 'rs-stages-a-pod-0']);
    await sending;

    const lines: string[] = [];
    const offlineConfig = { ...env.config, topics: { ...env.config.topics, prefix } };
    await runOffline(
      'all',
      offlineConfig,
      events.flatMap((e) => (e.kind === 'row' ? [formatJsonLine({ kind: 'row', record: e.row })] : e.kind === 'batch_end' ? [formatJsonLine({ kind: 'batch_end', end: e.end })] : [])),
      (l) => void lines.push(l),
    );
    const body = new AvroBodyCodec('packed');
    const want = new Map<string, Buffer>();
    for (const l of lines.map(parseJsonLine)) if (l.kind === 'packed') want.set(l.packed.group_id, body.encodeFramed(l.packed, 0).subarray(HEADER_BYTES));
    expect(want.size).toBe(12);
    const packed = await readTopic(env.kafka, names.packed, (rs) => rs.length >= want.size, { timeoutMs: 180_000, settleMs: 3_000 });
    expect(packed.map((r) => r.key).sort(), 'every group once').toEqual([...want.keys()].sort());
    for (const r of packed) expect(r.value.subarray(HEADER_BYTES).equals(want.get(r.key)!), `packed bytes of ${r.key}`).toBe(true);
    // The surviving pod stayed healthy and ready throughout.
    expect(await status(`http://127.0.0.1:${ports[1]}/healthz`)).toBe(200);
  }, 420_000);
});

/**
 * The local three-node cluster of the cluster tier, driven as its users
 * would: `scripts/local-kafka.sh <cmd> --brokers 3` (SIGKILL a node, start it,
 * stop the registry, ask which node leads the controller quorum).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Admin, Kafka } from 'kafkajs';
import { readTopic } from '../integration/topic-reader.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import type { SchemaRegistryClient } from '../../streams/codecs/schema-registry.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import type { TestEnv } from '../integration/helpers.js';
import { distinctTail, type StageProcess } from '../integration/stage-processes.js';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');

async function kafka(...args: string[]): Promise<string> {
  const { stdout } = await run(join(ROOT, 'scripts', 'local-kafka.sh'), [...args, '--brokers', '3'], {
    cwd: ROOT,
    env: { ...process.env, RS_LOCAL_BROKER: '1' },
    timeout: 180_000,
  });
  return stdout;
}

/** SIGKILLs node `id` (no clean shutdown) and waits until its process is gone. */
export const killBroker = (id: number) => kafka('kill-broker', String(id));
/** Starts node `id` again and waits until it answers clients. */
export const startBroker = (id: number) => kafka('start-broker', String(id));
export const stopRegistry = () => kafka('stop-registry');
export const startRegistry = () => kafka('start-registry');

/** The node id of the active controller (quorum leader). */
export async function controllerLeader(): Promise<number> {
  const id = Number((await kafka('controller-leader')).trim());
  if (!Number.isInteger(id) || id < 1) throw new Error('could not tell which node leads the controller quorum');
  return id;
}

/** Node ids that lead partitions of `topic`, with how many each leads, most first. */
export async function leadersOf(admin: Admin, topic: string): Promise<Array<[number, number]>> {
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
  const counts = new Map<number, number>();
  for (const p of topics[0]!.partitions) counts.set(p.leader, (counts.get(p.leader) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1] || a[0] - b[0]);
}

/** Waits until every partition of `topics` has all its replicas in sync again (after a node came back). */
export async function waitInSync(admin: Admin, topics: string[], ms = 120_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    const meta = await admin.fetchTopicMetadata({ topics }).catch(() => null);
    const lagging = meta?.topics.flatMap((t) => t.partitions.filter((p) => p.isr.length < p.replicas.length)).length ?? 1;
    if (lagging === 0) return;
    if (Date.now() > until) throw new Error(`partitions still under-replicated after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/**
 * Deletes every topic whose name starts with `prefix`. The cluster's data
 * outlives a run: tests clean up so partitions do not pile up on the nodes.
 */
export async function deleteTopicsWithPrefix(admin: Admin, prefix: string): Promise<void> {
  const topics = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
  if (topics.length > 0) await admin.deleteTopics({ topics });
}

/**
 * What a failed pipeline test needs to tell "written but unreadable" from
 * "never written" from "never consumed": each pipeline topic's high
 * watermarks and each stage group's state and committed offsets.
 */
export async function pipelineState(admin: Admin, prefix: string, names: Record<string, string>): Promise<string> {
  const lines: string[] = [];
  for (const t of [names.rowCompleted!, names.groupComplete!, names.penalized!, names.packed!]) {
    const offsets = await admin.fetchTopicOffsets(t).catch(() => []);
    lines.push(`${t}: high watermarks ${offsets.map((o) => o.high).join(',')}`);
  }
  const stageInputs: Array<[string, string]> = [
    ['accumulate', names.rowCompleted!],
    ['postprocess', names.groupComplete!],
    ['pack', names.penalized!],
    ['batch-metrics', names.metrics!],
  ];
  for (const [stage, topic] of stageInputs) {
    const groupId = `${prefix}rollout-stream.${stage}`;
    const committed = await admin.fetchOffsets({ groupId, topics: [topic] }).catch(() => []);
    const { groups } = await admin.describeGroups([groupId]).catch(() => ({ groups: [] as Array<{ state: string; members: unknown[] }> }));
    const offsets = committed.flatMap((t) => t.partitions.map((p) => p.offset)).join(',');
    lines.push(`${groupId}: ${groups[0]?.state ?? '?'} with ${groups[0]?.members.length ?? '?'} member(s); committed ${offsets}`);
  }
  return lines.join('\n');
}


/** Keys read more than once from `topic` (read_committed) with where each copy is, e.g. `g1: 2@17, 0@40`. */
export async function duplicatesIn(kafka: Kafka, topic: string): Promise<string[]> {
  const records = await readTopic(kafka, topic, () => true, { timeoutMs: 30_000, settleMs: 5_000 });
  const at = new Map<string, string[]>();
  for (const r of records) at.set(r.key, [...(at.get(r.key) ?? []), `${r.partition}@${r.offset}`]);
  return [...at].filter(([, where]) => where.length > 1).map(([k, where]) => `${k}: ${where.join(', ')}`);
}

/** Writes each process's kept log lines to .local/test-results/cluster-<label>-<process>.log (a failed run's evidence for CI). */
export function saveLogs(label: string, procs: Array<{ name: string; log: string[] }>): void {
  const dir = join(ROOT, '.local', 'test-results');
  mkdirSync(dir, { recursive: true });
  for (const p of procs) writeFileSync(join(dir, `cluster-${label}-${p.name.replace(/[^\w.-]+/g, '_')}.log`), `${p.log.join('\n')}\n`);
}

/** The dead letters of `topic` as `reason group [missing rows]`, for a failed test's report. */
export async function deadLettersIn(kafka: Kafka, registry: SchemaRegistryClient, topic: string): Promise<string[]> {
  const codec = new TopicCodec('deadLetter', subjectOf(topic), registry);
  const records = await readTopic(kafka, topic, () => true, { timeoutMs: 30_000, settleMs: 3_000 });
  return Promise.all(
    records.map(async (r) => {
      const d = await codec.decode(r.value);
      return `${d.reason} ${d.group_id ?? '-'}${d.missing_row_indices.length ? ` missing [${d.missing_row_indices.join(',')}]` : ''}`;
    }),
  );
}

/**
 * After a cluster test: on failure, each process's last distinct log lines
 * (also saved to a file), the pipeline's offsets and groups, its dead letters
 * and any duplicates downstream; always, how often the sink refused a send
 * kafkajs had written twice (streams/kafka/kafkajs/sink.ts).
 */
export async function reportRun(label: string, failed: boolean, procs: StageProcess[], env: TestEnv | undefined): Promise<void> {
  if (failed) {
    for (const p of procs) console.error(`--- ${p.name} (last distinct lines) ---\n${distinctTail(p.log, 60).join('\n')}`);
    saveLogs(label, procs);
    if (env) {
      const n = topicNames(env.prefix);
      console.error(await pipelineState(env.admin, env.prefix, n));
      console.error(`dead letters: ${(await deadLettersIn(env.kafka, env.registry, n.deadLetter).catch((e: Error) => [e.message])).join('; ') || 'none'}`);
      for (const t of [n.groupComplete, n.penalized, n.packed]) {
        console.error(`duplicates in ${t}: ${(await duplicatesIn(env.kafka, t).catch((e: Error) => [e.message])).join('; ') || 'none'}`);
      }
    }
  }
  const twice = procs.flatMap((p) => p.log.filter((l) => l.includes('written twice by one send')));
  if (twice.length > 0) console.log(`sends refused as written twice: ${twice.length} (first: ${twice[0]})`);
}

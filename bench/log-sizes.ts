/**
 * What the broker wrote to a set of topics, for `bench e2e`'s write
 * amplification: the on-disk size of each topic partition, from Kafka's
 * DescribeLogDirs API. kafkajs 2.2.4 has no request for it, so Kafka's own
 * `LogDirsCommand` asks, from the jars the raw baseline already runs; it
 * reaches a remote broker as well as the local one. A replica's size is
 * the sum of its segments' `.log` files (the preallocated index files are
 * not counted). Each broker reports its own replicas: a partition is
 * counted once, at its leader's copy.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../tools/local-services.js';

/** Bytes of each replica: topic → partition → broker id → bytes. */
export type ReplicaSizes = Map<string, Map<number, Map<number, number>>>;
/** Bytes of each partition, counted once: topic → partition → bytes. */
export type PartitionSizes = Map<string, Map<number, number>>;

/** The leader of each partition (kafkajs's `fetchTopicMetadata`, structurally). */
export interface MetadataAdmin {
  fetchTopicMetadata(o: { topics: string[] }): Promise<{
    topics: Array<{ name: string; partitions: Array<{ partitionId: number; leader: number }> }>;
  }>;
}

/** `<topic>-<partition>` (a log directory's name): topic names may hold dashes, the partition is after the last. */
export function splitPartitionName(name: string): { topic: string; partition: number } {
  const m = /^(.+)-(\d+)$/.exec(name);
  if (!m) throw new Error(`not a <topic>-<partition> name: ${name}`);
  return { topic: m[1]!, partition: Number(m[2]) };
}

/**
 * Replica sizes from `LogDirsCommand --describe`'s output (its JSON line:
 * `{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"t-0",
 * "size":235,…,"isFuture":false}],"error":null,"logDir":…}]}],…}`). A
 * future replica (a copy being moved between a broker's log dirs) is left
 * out; a log dir that reports an error throws, naming it.
 */
export function parseLogDirs(stdout: string): ReplicaSizes {
  const line = stdout.split('\n').find((l) => l.startsWith('{"'));
  if (!line) throw new Error('LogDirsCommand printed no log-dir description');
  const report = JSON.parse(line) as {
    brokers: Array<{ broker: number; logDirs: Array<{ logDir: string; error: string | null; partitions: Array<{ partition: string; size: number; isFuture: boolean }> }> }>;
  };
  const sizes: ReplicaSizes = new Map();
  for (const { broker, logDirs } of report.brokers) {
    for (const dir of logDirs) {
      if (dir.error) throw new Error(`broker ${broker}'s log dir ${dir.logDir}: ${dir.error}`);
      for (const p of dir.partitions) {
        if (p.isFuture) continue;
        const { topic, partition } = splitPartitionName(p.partition);
        const byPartition = sizes.get(topic) ?? sizes.set(topic, new Map()).get(topic)!;
        const byBroker = byPartition.get(partition) ?? byPartition.set(partition, new Map()).get(partition)!;
        byBroker.set(broker, p.size);
      }
    }
  }
  return sizes;
}

/**
 * One size per partition: its leader's replica, or the largest reported
 * one where the leader's is missing (a broker that did not answer).
 */
export function leaderSizes(replicas: ReplicaSizes, leaderOf: (topic: string, partition: number) => number | undefined): PartitionSizes {
  const out: PartitionSizes = new Map();
  for (const [topic, partitions] of replicas) {
    const sizes = new Map<number, number>();
    for (const [partition, byBroker] of partitions) {
      const leader = leaderOf(topic, partition);
      sizes.set(partition, leader !== undefined && byBroker.has(leader) ? byBroker.get(leader)! : Math.max(0, ...byBroker.values()));
    }
    out.set(topic, sizes);
  }
  return out;
}

/** Bytes written to each topic between two snapshots (a partition absent before counts from 0). */
export function growthByTopic(before: PartitionSizes, after: PartitionSizes): Map<string, number> {
  const out = new Map<string, number>();
  for (const [topic, partitions] of after) {
    let sum = 0;
    for (const [partition, size] of partitions) sum += size - (before.get(topic)?.get(partition) ?? 0);
    out.set(topic, sum);
  }
  return out;
}

/**
 * The size of each partition of `topics` now, counted once (at the
 * leader). Throws with the reason when the sizes cannot be read (no Java
 * or Kafka jars, a broker that refuses DescribeLogDirs, a topic missing
 * from the answer).
 */
export async function partitionSizes(admin: MetadataAdmin, bootstrap: string, topics: string[]): Promise<PartitionSizes> {
  const r = spawnSync(
    'java',
    ['-Xmx256m', '-cp', `${join(ROOT, '.local', 'kafka-libs')}/*`, 'org.apache.kafka.tools.LogDirsCommand', '--bootstrap-server', bootstrap, '--describe', '--topic-list', topics.join(',')],
    { encoding: 'utf8', timeout: 120_000 },
  );
  if (r.error) throw new Error(`LogDirsCommand could not run: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`LogDirsCommand exited with ${r.status}: ${(r.stderr || r.stdout).trim().split('\n').at(-1)}`);
  const replicas = parseLogDirs(r.stdout);
  const missing = topics.filter((t) => !replicas.has(t));
  if (missing.length > 0) throw new Error(`no log-dir sizes for ${missing.join(', ')}`);
  const { topics: metadata } = await admin.fetchTopicMetadata({ topics });
  const leaders = new Map(metadata.flatMap((t) => t.partitions.map((p) => [`${t.name}\0${p.partitionId}`, p.leader] as const)));
  return leaderSizes(replicas, (topic, partition) => leaders.get(`${topic}\0${partition}`));
}

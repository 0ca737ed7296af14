/**
 * Part (b) of `bench ingest`: publishing GymResults through the TypeScript
 * `RolloutPublisher` (SPEC §2.2) against the least any publisher could do,
 * a plain produce of the very bytes the publisher sends.
 *
 * Both write to one scratch `<prefix>rollout.row-completed` (created with
 * the real topic's spec, deleted afterwards) through the same producer
 * (OpsClient.idempotentSink: idempotent, acks=-1, one request in flight,
 * every partition's answer checked, the configured compression), the same keys and partitions (murmur2 of the group id),
 * the same batching (a send at 1 MiB or 500 buffered records, each send
 * awaited before the next is built) and the same closing `BatchEnd` to
 * every partition. The raw side gets its values encoded before its clock
 * starts; the publisher validates and encodes each record inside its clock,
 * which is the difference being measured. Passes alternate (raw, publisher,
 * raw, …); one warm-up pair is not counted.
 */
import type { Config } from '../config/schema.js';
import { RolloutStreamError } from '../errors/index.js';
import { TopicCodec } from '../streams/codecs/codec.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import type { IdempotentSink, OpsAdmin, OutgoingRecord } from '../streams/kafka/types.js';
import { createRegistry } from '../streams/codecs/schema-registry.js';
import { partitionForKey } from '../streams/topics/partitioner.js';
import { createPublisher, type RolloutPublisher } from '../streams/publish/publisher.js';
import { subjectOf, topicNames, topicSpecs } from '../streams/topics/names.js';
import { createMissingTopics } from '../streams/topics/create.js';
import type { BenchRecord } from './ingest-records.js';

/** The publisher's own defaults (streams/publish/publisher.ts), passed explicitly so both sides batch alike by construction. */
export const BATCHING = { flushBytes: 1024 * 1024, flushRecords: 500, lingerMs: 5 } as const;

export interface PublishPass {
  seconds: number;
  /** GymResults sent. */
  rows: number;
  /** Value bytes sent, BatchEnd copies included. */
  bytes: number;
  /** CPU (user + system) of this process during the pass: validation, encoding and the Kafka client's work. */
  cpuMs: number;
}

export interface PublishPair {
  raw: PublishPass;
  publisher: PublishPass;
  /** Publisher MB/s ÷ raw MB/s (the same bytes, so raw seconds ÷ publisher seconds). */
  ratio: number;
}

export interface PublishRun {
  pairs: PublishPair[];
  topic: string;
  partitions: number;
  /** Records per pass: GymResults plus one BatchEnd per partition. */
  recordsPerPass: number;
  bytesPerPass: number;
}

/** A record with its value and partition already made (before the clock starts). */
type Outgoing = OutgoingRecord & { value: Buffer; partition: number };

function cpuMsSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

/** The raw side: the publisher's batching rule over pre-encoded records, sends awaited one by one. */
async function rawPass(sink: IdempotentSink, rows: Outgoing[], ends: Outgoing[]): Promise<PublishPass> {
  const send = (records: Outgoing[]) => sink.send(records);
  let buffer: Outgoing[] = [];
  let buffered = 0;
  let bytes = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (const r of rows) {
    buffer.push(r);
    buffered += r.value.length;
    bytes += r.value.length;
    if (buffered >= BATCHING.flushBytes || buffer.length >= BATCHING.flushRecords) {
      await send(buffer);
      buffer = [];
      buffered = 0;
    }
  }
  if (buffer.length > 0) await send(buffer);
  await send(ends);
  const seconds = (performance.now() - t0) / 1000;
  const cpuMs = cpuMsSince(cpu0);
  for (const e of ends) bytes += e.value.length;
  return { seconds, rows: rows.length, bytes, cpuMs };
}

async function publisherPass(publisher: RolloutPublisher, records: readonly BenchRecord[], batchId: string): Promise<PublishPass> {
  const before = publisher.stats().bytes;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (const r of records) await publisher.publishResult(r.result);
  await publisher.endBatch(batchId, records.length);
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, rows: records.length, bytes: publisher.stats().bytes - before, cpuMs: cpuMsSince(cpu0) };
}

/**
 * Creates the scratch topic under `config.topics.prefix`, measures
 * `repeat` alternating pairs, and deletes the topic (also on failure).
 *
 * @throws RolloutStreamError (`bench_failed`) when the publisher sent other
 *   bytes than the raw side (the comparison would not be of the same work).
 */
export async function measurePublishing(records: readonly BenchRecord[], config: Config, repeat: number, gc: () => void): Promise<PublishRun> {
  const topic = topicNames(config.topics.prefix).rowCompleted;
  const spec = topicSpecs(config).find((s) => s.topic === topic)!;
  const kafka = createOpsClient(config.kafka, 'bench-ingest-raw');
  const admin: OpsAdmin = await kafka.admin();
  let publisher: RolloutPublisher | null = null;
  let sink: IdempotentSink | null = null;
  try {
    await createMissingTopics(admin, [spec], config.topics);
    publisher = await createPublisher(config, { clientSuffix: 'bench-ingest-publisher', ...BATCHING });
    const codec = await new TopicCodec('rowCompleted', subjectOf(topic), createRegistry(config.kafka)).init();
    const partitions = publisher.partitions;
    const batchId = records[0]!.result.batch_id;
    const rows = records.map((r) => ({
      topic,
      key: r.result.group_id,
      value: codec.encode({ kind: 'gym_result', result: r.result }),
      partition: partitionForKey(r.result.group_id, partitions),
    }));
    const endValue = codec.encode({ kind: 'batch_end', end: { batch_id: batchId, num_rows: records.length } });
    const ends = Array.from({ length: partitions }, (_, p) => ({ topic, key: batchId, value: endValue, partition: p }));
    sink = await kafka.idempotentSink({ compression: config.kafka.compression });

    const pairs: PublishPair[] = [];
    for (let i = 0; i <= repeat; i++) {
      gc();
      const raw = await rawPass(sink, rows, ends);
      gc();
      const pub = await publisherPass(publisher, records, batchId);
      if (pub.bytes !== raw.bytes) {
        throw new RolloutStreamError('bench_failed', `the publisher sent ${pub.bytes} value bytes, the raw producer ${raw.bytes}: not the same records`);
      }
      // Pair 0 warms up the JIT, the connections and the broker's log; it is not counted.
      if (i > 0) pairs.push({ raw, publisher: pub, ratio: raw.seconds / pub.seconds });
    }
    return { pairs, topic, partitions, recordsPerPass: rows.length + ends.length, bytesPerPass: pairs[0]?.raw.bytes ?? 0 };
  } finally {
    await publisher?.close().catch(() => undefined);
    await sink?.close().catch(() => undefined);
    await admin.deleteTopics([topic]).catch(() => undefined);
    await admin.close();
  }
}

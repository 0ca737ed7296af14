/**
 * OffsetReader over kafkajs: records at chosen offsets, read with Fetch
 * requests sent straight to each partition's leader, read_committed, with
 * no consumer group (joining one per read, as streams/ops/topic-scan.ts
 * does, costs seconds; this costs a round trip per fetch).
 *
 * kafkajs has no public "assign and fetch" API, so this reaches into it (a
 * patch, in the sense of ./speedups.ts): a `Kafka` keeps the factory of its
 * internal Cluster under a private symbol, and the Cluster's brokers have
 * `fetch` and `listOffsets`. test/unit/streams/kafkajs-offset-reader.test.ts
 * checks every piece relied on (the symbol, the Cluster's and Broker's
 * methods, the request's isolation level, the decoded answer's shape and the
 * errors it throws) and fails when a kafkajs release changes one.
 *
 * One read walks its offsets in order: a fetch at the first offset still
 * unanswered, sized for the wanted offsets close behind it
 * (committed-records.ts `requestBytes`), so a large gap is jumped rather
 * than read through. Offsets the answer's batches cover but that hold no
 * committed record (markers, aborted records, compacted away) are absent.
 * OFFSET_OUT_OF_RANGE means below the log start (retention deleted them:
 * absent, read on from the log start) or past the end (absent, done); kafkajs
 * logs that answer at error level before it reaches us, which the client
 * `createRowReader` makes sends to debug (OUT_OF_RANGE_LOG). An offset below the
 * high watermark but not yet stable (an open transaction before it) is
 * waited for, up to `pendingWaitMs`, then `request_timeout`. A leader that
 * moved, or a broker that went away, refreshes the metadata and tries again,
 * up to `attempts` times, then throws the error's code (errors.ts).
 */
import type { Kafka } from 'kafkajs';
import type { KafkaConfig } from '../../../config/schema.js';
import { RolloutStreamError } from '../../../errors/index.js';
import type { FetchedRecord, Offset, OffsetReader } from '../types.js';
import { committedRecords, requestBytes, sortedOffsets, toFetchedRecord, type KafkajsFetchPartition } from './committed-records.js';
import { registerCompressionCodecs } from './compression.js';
import { createKafka } from './client.js';
import { isTransientKafkaError, kafkaErrorCode } from './errors.js';
import { ChunkedOffsetReader } from '../../chunks/chunked-offset-reader.js';
import { chunkReaderOptions } from '../../chunks/chunked-client.js';

/** The description of the symbol kafkajs 2.2.4 keeps its Cluster factory under (src/index.js `PRIVATE.CREATE_CLUSTER`). */
export const CREATE_CLUSTER_SYMBOL = 'private:Kafka:createCluster';

/** protocol/isolationLevel.js */
const READ_UNCOMMITTED = 0;
const READ_COMMITTED = 1;
/** ListOffsets' timestamp for "the log start offset". */
const EARLIEST = -2;
/** A consumer's replica id in a Fetch. */
const CONSUMER_REPLICA_ID = -1;

/** What is used here of kafkajs's Broker (src/broker/index.js). */
export interface KafkajsBroker {
  fetch(request: {
    replicaId: number;
    isolationLevel: number;
    maxWaitTime: number;
    minBytes: number;
    maxBytes: number;
    topics: Array<{ topic: string; partitions: Array<{ partition: number; fetchOffset: string; maxBytes: number }> }>;
  }): Promise<{ responses: Array<{ topicName: string; partitions: KafkajsFetchPartition[] }> }>;
  listOffsets(request: {
    replicaId: number;
    isolationLevel: number;
    topics: Array<{ topic: string; partitions: Array<{ partition: number; timestamp: number }> }>;
  }): Promise<{ responses: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }> }>;
}

/** What is used here of kafkajs's Cluster (src/cluster/index.js). */
export interface KafkajsCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  refreshMetadata(): Promise<void>;
  refreshMetadataIfNecessary(): Promise<void>;
  /** Leader node id → partitions; a partition the metadata does not know is left out. */
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(o: { nodeId: string }): Promise<KafkajsBroker>;
}

type ClusterFactory = (o: { metadataMaxAge?: number; allowAutoTopicCreation?: boolean; isolationLevel?: number }) => KafkajsCluster;

/** kafkajs's Cluster factory of `kafka`, or null when this kafkajs keeps none where 2.2.4 does. */
export function clusterFactory(kafka: Kafka): ClusterFactory | null {
  const symbol = Object.getOwnPropertySymbols(kafka).find((s) => s.description === CREATE_CLUSTER_SYMBOL);
  const factory = symbol === undefined ? undefined : (kafka as unknown as Record<symbol, unknown>)[symbol];
  return typeof factory === 'function' ? (factory as ClusterFactory) : null;
}

export interface OffsetReaderOptions {
  /** The most bytes one fetch asks for (a single larger record still comes whole): `kafka.max_message_bytes`. */
  maxBytes: number;
  /** How long an offset held back by an open transaction is waited for (default 5 s). */
  pendingWaitMs?: number;
  /** Tries of one fetch through leader changes and lost connections (default 8: about 10 s of backoff). */
  attempts?: number;
}

/** kafkajs's default metadata age (src/index.js). */
const METADATA_MAX_AGE_MS = 300_000;
/** A Fetch's wait on the broker while an open transaction holds the wanted offset back. */
const PENDING_FETCH_WAIT_MS = 200;
const PENDING_POLL_MS = 20;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const backoffMs = (attempt: number) => Math.min(2_000, 100 * 2 ** (attempt - 1));

function isOffsetOutOfRange(e: unknown): boolean {
  return (e as { type?: string } | null)?.type === 'OFFSET_OUT_OF_RANGE';
}

function coded(doing: string, e: unknown, fallback: 'not_leader' | 'partition_unavailable' = 'not_leader'): RolloutStreamError {
  if (e instanceof RolloutStreamError) return e;
  const code = kafkaErrorCode(e) ?? (isTransientKafkaError(e) ? fallback : null);
  if (code === null) return new RolloutStreamError('consumer_failed', `${doing}: ${(e as Error)?.message ?? String(e)}`, { cause: e });
  return new RolloutStreamError(code, `${doing}: ${(e as Error).message}`, { cause: e, retriable: code !== 'authorization_failed' });
}

/** What kafkajs logs at error level for each OFFSET_OUT_OF_RANGE answer, which the reader handles (a row gone by retention). */
export const OUT_OF_RANGE_LOG = /^Response Fetch\(.*not within the range of offsets maintained by the server/;

/**
 * The reader of rows a process's stages share: its own client (`<client_id>-row-reader`),
 * whose out-of-range answers are not logged as errors.
 */
export function createRowReader(config: KafkaConfig): CountingOffsetReader {
  // Rows are named by their first chunk's offset; the chunked reader hands back whole rows.
  return new ChunkedOffsetReader(createOffsetReader(createKafka(config, 'row-reader', 'error', OUT_OF_RANGE_LOG), { maxBytes: config.max_message_bytes }), chunkReaderOptions(config));
}

/**
 * An OffsetReader of `kafka`'s cluster, holding its own connections (to the
 * leaders it reads from; `close` ends them). Throws `consumer_failed` when
 * this kafkajs lacks what the reader relies on.
 */
export function createOffsetReader(kafka: Kafka, options: OffsetReaderOptions): CountingOffsetReader {
  return new KafkajsOffsetReader(kafka, options);
}

/** An OffsetReader that counts its Fetch requests (what tests and benchmarks look at). */
export interface CountingOffsetReader extends OffsetReader {
  readonly fetches: number;
}

class KafkajsOffsetReader implements CountingOffsetReader {
  fetches = 0;
  private readonly cluster: KafkajsCluster;
  private readonly pendingWaitMs: number;
  private readonly attempts: number;
  private connecting: Promise<void> | null = null;
  private readonly topics = new Map<string, Promise<void>>();
  /** Bytes per offset each partition's last answer had (sizes the next request). */
  private readonly bytesPerOffset = new Map<string, number>();
  /** The last Fetch sent to each broker, by node id (oneAtATime). */
  private readonly fetching = new Map<string, Promise<unknown>>();
  private closed = false;

  constructor(
    kafka: Kafka,
    private readonly o: OffsetReaderOptions,
  ) {
    // Batches written with lz4, zstd or snappy decode only with these.
    registerCompressionCodecs();
    const create = clusterFactory(kafka);
    if (!create) throw new RolloutStreamError('consumer_failed', `this kafkajs keeps no cluster factory under Symbol(${CREATE_CLUSTER_SYMBOL}) (written against kafkajs 2.2.4)`);
    this.cluster = create({ metadataMaxAge: METADATA_MAX_AGE_MS, allowAutoTopicCreation: false, isolationLevel: READ_COMMITTED });
    this.pendingWaitMs = o.pendingWaitMs ?? 5_000;
    this.attempts = o.attempts ?? 8;
  }

  async read(topic: string, partition: number, offsets: Offset[]): Promise<Map<Offset, FetchedRecord>> {
    let wanted: bigint[];
    try {
      wanted = sortedOffsets(offsets);
    } catch (e) {
      throw new RolloutStreamError('usage', `reading ${topic}[${partition}]: ${(e as Error).message}`);
    }
    const out = new Map<Offset, FetchedRecord>();
    const key = `${topic}\u0000${partition}`;
    let next = 0; // index of the first wanted offset not answered yet
    let pendingSince: number | null = null;
    while (next < wanted.length) {
      const at = wanted[next]!;
      const bytes = requestBytes(wanted, next, this.bytesPerOffset.get(key) ?? null, this.o.maxBytes);
      let answer: KafkajsFetchPartition;
      try {
        answer = await this.fetch(topic, partition, at, bytes, pendingSince === null ? 0 : PENDING_FETCH_WAIT_MS);
      } catch (e) {
        if (!isOffsetOutOfRange(e)) throw e;
        const start = await this.logStart(topic, partition);
        if (at >= start) break; // past the end: so is every offset after it
        while (next < wanted.length && wanted[next]! < start) next++;
        continue;
      }
      const { records, through, from, bytes: answered } = committedRecords(answer, at);
      if (through === null || through < at) {
        if (at >= BigInt(answer.highWatermark)) break; // at or past the end
        pendingSince ??= Date.now();
        if (Date.now() - pendingSince >= this.pendingWaitMs) {
          throw new RolloutStreamError(
            'request_timeout',
            `${topic}[${partition}]@${at} is below the high watermark ${answer.highWatermark} but not stable after ${this.pendingWaitMs} ms (last stable offset ${answer.lastStableOffset}: an open transaction holds it back)`,
            { retriable: true },
          );
        }
        // The broker holds such a fetch up to PENDING_FETCH_WAIT_MS for the transaction to end; this keeps a broker that does not from spinning us.
        await sleep(PENDING_POLL_MS);
        continue;
      }
      pendingSince = null;
      this.bytesPerOffset.set(key, answered / Number(through - from! + 1n));
      const wantedHere = new Set<bigint>();
      while (next < wanted.length && wanted[next]! <= through) wantedHere.add(wanted[next++]!);
      for (const m of records) if (wantedHere.has(BigInt(m.offset))) out.set(m.offset, toFetchedRecord(topic, partition, m));
    }
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.connecting) await this.cluster.disconnect();
  }

  /** Connected, with `topic`'s metadata (a topic that does not exist: `unknown_topic`). */
  private async ready(topic: string): Promise<void> {
    if (this.closed) throw new RolloutStreamError('consumer_failed', `read of ${topic} after the offset reader was closed`);
    this.connecting ??= this.cluster.connect().catch((e: unknown) => {
      this.connecting = null;
      throw e;
    });
    await this.connecting;
    let known = this.topics.get(topic);
    if (!known) {
      known = this.cluster.addTargetTopic(topic).catch((e: unknown) => {
        this.topics.delete(topic);
        if ((e as { type?: string }).type === 'UNKNOWN_TOPIC_OR_PARTITION') throw new RolloutStreamError('unknown_topic', `topic ${topic} does not exist`, { cause: e });
        throw e;
      });
      this.topics.set(topic, known);
    }
    await known;
    await this.cluster.refreshMetadataIfNecessary();
  }

  /** The broker leading `topic`/`partition` now, and its node id. */
  private async leader(topic: string, partition: number): Promise<{ nodeId: string; broker: KafkajsBroker }> {
    await this.ready(topic);
    const [nodeId] = Object.keys(this.cluster.findLeaderForPartitions(topic, [partition]));
    if (nodeId === undefined) throw new RolloutStreamError('partition_unavailable', `the metadata of ${topic} has no partition ${partition}`, { retriable: true });
    return { nodeId, broker: await this.cluster.findBroker({ nodeId }) };
  }

  /**
   * `fn` after every Fetch this reader sent to broker `nodeId` before it has
   * been answered. kafkajs opens a broker's Fetch connection on its first
   * Fetch; two at once both open it, and the socket of the first is then
   * held by nobody and never closed (the process cannot exit). One Fetch per
   * broker at a time is also what kafkajs's own consumer does.
   */
  private oneAtATime<T>(nodeId: string, fn: () => Promise<T>): Promise<T> {
    const before = this.fetching.get(nodeId) ?? Promise.resolve();
    const run = before.then(fn, fn);
    this.fetching.set(nodeId, run.catch(() => undefined));
    return run;
  }

  /** One Fetch of one partition at `offset`; OFFSET_OUT_OF_RANGE is thrown as kafkajs's error. */
  private fetch(topic: string, partition: number, offset: bigint, maxBytes: number, maxWaitTime: number): Promise<KafkajsFetchPartition> {
    return this.withRetries(`fetching ${topic}[${partition}]@${offset}`, async () => {
      const { nodeId, broker } = await this.leader(topic, partition);
      const { responses } = await this.oneAtATime(nodeId, () => {
        this.fetches++;
        return broker.fetch({
          replicaId: CONSUMER_REPLICA_ID,
          isolationLevel: READ_COMMITTED,
          maxWaitTime,
          minBytes: 1,
          maxBytes,
          topics: [{ topic, partitions: [{ partition, fetchOffset: offset.toString(), maxBytes }] }],
        });
      });
      const answer = responses.find((r) => r.topicName === topic)?.partitions.find((p) => p.partition === partition);
      if (!answer) throw new RolloutStreamError('partition_unavailable', `the fetch answer has no ${topic}[${partition}]`, { retriable: true });
      return answer;
    });
  }

  /** The partition's log start offset (records below it are deleted). */
  private logStart(topic: string, partition: number): Promise<bigint> {
    return this.withRetries(`listing the log start of ${topic}[${partition}]`, async () => {
      const { broker } = await this.leader(topic, partition);
      const { responses } = await broker.listOffsets({
        replicaId: CONSUMER_REPLICA_ID,
        isolationLevel: READ_UNCOMMITTED,
        topics: [{ topic, partitions: [{ partition, timestamp: EARLIEST }] }],
      });
      const offset = responses.find((r) => r.topic === topic)?.partitions.find((p) => p.partition === partition)?.offset;
      if (offset === undefined) throw new RolloutStreamError('partition_unavailable', `the offsets answer has no ${topic}[${partition}]`, { retriable: true });
      return BigInt(offset);
    });
  }

  /** `fn`, again after a metadata refresh while it fails transiently, up to `attempts` tries. */
  private async withRetries<T>(doing: string, fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (e) {
        if (isOffsetOutOfRange(e)) throw e;
        const transient = e instanceof RolloutStreamError ? e.retriable : isTransientKafkaError(e);
        if (!transient || this.closed) throw coded(doing, e);
        if (attempt >= this.attempts) {
          const last = coded(doing, e);
          throw new RolloutStreamError(last.code, `${last.message} (tried ${attempt} times)`, { cause: e, retriable: last.retriable });
        }
        await sleep(backoffMs(attempt));
        await this.cluster.refreshMetadata().catch(() => {}); // a failure here is the next try's
      }
    }
  }
}

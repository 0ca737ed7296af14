/**
 * The seams between the runtime and a Kafka client library (issue 13 item
 * 2): what the runtime needs from Kafka, in its own words. Offsets are
 * decimal strings (they never pass through JS numbers). Every method throws
 * a RolloutStreamError with a code of errors/codes.ts, never a client's
 * class; only `streams/kafka/<client>/` knows a client library.
 */
import type { ChunkInfo } from '../api/chunk-info.js';
import type { TxState } from './transaction-state.js';

export type { ChunkInfo };

export type Offset = string;

/** Producer compression codecs (`kafka.compression`), in the order the benchmark prints them. */
export const COMPRESSION_NAMES = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;
export type CompressionName = (typeof COMPRESSION_NAMES)[number];

export interface OutgoingRecord {
  topic: string;
  /** Absent: the client's murmur2 partitioner places the record by key (Java's default). */
  partition?: number;
  key: string | Buffer | null;
  value: Buffer | null;
  headers?: Record<string, string | Buffer>;
}

/** Where an acknowledged record landed. */
export interface RecordPosition {
  topic: string;
  partition: number;
  offset: Offset;
}

export interface PartitionOffset {
  topic: string;
  partition: number;
  offset: Offset;
}

/**
 * A transactional producer for one transactional id, driven through an
 * explicit state machine (transaction-state.ts): a call in the wrong state
 * throws `transaction_state`; after `fenced` or `fatal_error` only `close`
 * is allowed, and a new owner builds a new sink.
 */
export interface TransactionalSink {
  readonly transactionalId: string;
  readonly state: TxState;
  /** InitProducerId: fences every earlier producer of the id and completes or aborts its open transaction. */
  init(): Promise<void>;
  begin(): Promise<void>;
  /** Acknowledged positions, in input order. */
  send(records: OutgoingRecord[]): Promise<RecordPosition[]>;
  /** The input offsets to commit with this transaction (the next offset to read, per partition). */
  sendOffsets(groupId: string, offsets: PartitionOffset[]): Promise<void>;
  commit(): Promise<void>;
  abort(): Promise<void>;
  close(): Promise<void>;
}

/** A non-transactional, idempotent producer (acks=all): publishers, replay, dead-letter redrive. */
export interface IdempotentSink {
  send(records: OutgoingRecord[]): Promise<RecordPosition[]>;
  close(): Promise<void>;
}

export interface PartitionOffsets {
  partition: number;
  /** Log start offset. */
  low: Offset;
  /** High watermark: the next offset to be written. */
  high: Offset;
}

export interface KafkaAdmin {
  /** Partitions of `topic`; throws `unknown_topic` when it does not exist. */
  partitionCount(topic: string): Promise<number>;
  listTopics(): Promise<string[]>;
  topicOffsets(topic: string): Promise<PartitionOffsets[]>;
  /** Per partition, the first offset whose record timestamp is ≥ `timeMs` (the high watermark when none). */
  offsetsForTime(topic: string, timeMs: number): Promise<Map<number, Offset>>;
  /** The group's committed offsets on `topic`; a partition without one is absent. */
  committedOffsets(groupId: string, topic: string): Promise<Map<number, Offset>>;
  /** Number of brokers in the cluster now. */
  brokerCount(): Promise<number>;
  /** A consumer group's state, its assignment protocol ('' when none) and its member count (0 for a group that does not exist). */
  describeGroup(groupId: string): Promise<{ state: string; protocol: string; members: number }>;
  close(): Promise<void>;
}

export interface FetchedRecord {
  topic: string;
  partition: number;
  offset: Offset;
  /** Epoch ms. */
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer>;
  /**
   * The offset to resume at after this record (docs/design-chunked-records.md):
   * set by the chunk readers (streams/chunks/), which hand on a chunk set as
   * one record at its first chunk's offset; absent: `offset + 1`.
   */
  next?: Offset;
  /** Set by the chunk readers: a reassembled record's last chunk and chunk count, or a set that could not be handed on whole. */
  chunk?: ChunkInfo;
}

/** The offset to resume at after `r`: its `next`, else `offset + 1`. */
export function nextOffset(r: { offset: Offset; next?: Offset }): Offset {
  return r.next ?? (BigInt(r.offset) + 1n).toString();
}

/** One partition's fetched records (read_committed: aborted data and control records removed). */
export interface FetchedBatch {
  topic: string;
  partition: number;
  records: FetchedRecord[];
  highWatermark: Offset;
  /** The fetch's last stable offset (the first offset an open transaction holds back), where the client reports it. */
  lastStable?: Offset;
}

export interface RebalanceListener {
  /** Partitions this member was given, before any batch of them is polled. */
  onAssigned(partitions: number[]): Promise<void>;
  /** Partitions taken away (advisory with kafkajs, which reports after the new generation formed: fencing keeps it safe). */
  onRevoked(partitions: number[]): Promise<void>;
  /** The membership is gone for good (the client will not rejoin by itself). */
  onLost(error: unknown): void;
  /** The membership was lost and the client rejoins by itself: every partition counts as revoked (reported before this call) until the rejoin assigns again. */
  onRejoining?(error: unknown): void;
}

/**
 * A member of a consumer group, pulled by the runtime's loop (the Kafka
 * Streams StreamThread's poll): each partition has at most one batch out at a
 * time, and fetches again only after `release`.
 */
export interface GroupSource {
  start(listener: RebalanceListener): Promise<void>;
  /** The batches fetched so far, waiting up to `maxWaitMs` for the first one; [] when none came. */
  poll(maxWaitMs: number): Promise<FetchedBatch[]>;
  /**
   * Hands a batch back. `next` is the next offset to fetch on its partition
   * (past what was processed and committed); null means "nothing of it was
   * consumed": its first record is fetched again.
   */
  release(batch: FetchedBatch, next: Offset | null): void;
  /** False once a rebalance took the batch's partition away (its records may be someone else's now). */
  isCurrent(batch: FetchedBatch): boolean;
  /** Next fetch of `partition` starts at `offset` (takes effect after its outstanding batch is released). */
  seek(partition: number, offset: Offset): void;
  pause(partitions: number[]): void;
  resume(partitions: number[]): void;
  assignment(): ReadonlySet<number>;
  /**
   * The next offset this member will fetch on `partition` when it has no
   * batch of it out: past what was released, and past stretches that held
   * nothing to hand out (aborted records, transaction markers); null when
   * unknown. A partition whose position is at its high watermark is idle,
   * not behind, whatever its group's committed offset says.
   */
  fetchPosition?(partition: number): Offset | null;
  stop(): Promise<void>;
}

/** Offsets `[start, end)` of one partition. */
export interface PartitionRange {
  topic: string;
  partition: number;
  start: Offset;
  end: Offset;
}

/** A record of a scan (ops commands, restore): as FetchedRecord, with the broker's timestamp as a decimal string. */
export interface ScanRecord {
  topic: string;
  partition: number;
  offset: Offset;
  /** Record timestamp, epoch ms as a decimal string (as the broker gives it). */
  timestamp: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer>;
  /** As FetchedRecord's: set by the chunk readers. */
  next?: Offset;
  chunk?: ChunkInfo;
}

/** A chunk set an edge reader met but did not print (it began before the read's start, or never completed). */
export interface ChunkSetReport {
  topic: string;
  partition: number;
  setId: string;
  firstOffset: Offset;
  lastOffset: Offset;
  have: number;
  count: number;
  detail: string;
}

export interface ScanOptions {
  /** Give up when no progress was made for this long (default 30 s; an open transaction holds read_committed readers back). */
  idleTimeoutMs?: number;
  /** Called after every fetched batch with the records read so far. */
  onProgress?: (records: number) => void;
  /** Largest fetch (bytes, per request and per partition); the client's default when absent. */
  maxBytes?: number;
  /** What the scan is for (names its throw-away group where the client needs one; default `scan`). */
  purpose?: string;
  /** The records as stored, chunks not reassembled (the changelogs, which never hold chunks). Default false. */
  raw?: boolean;
  /**
   * The range starts are resume offsets (committed offsets, a `next`): a
   * chunk of a set that began before a start was handed on before and is
   * skipped. Default false: such a set is an `incomplete` record (the
   * runtime) or reported to `onChunkSet` (the edge).
   */
  trustedStarts?: boolean;
  /**
   * Where the edge reports sets it did not hand on (headless at an untrusted
   * start, never completed). When given, such sets are reported here and not
   * handed to the callback; when absent, they are handed on as `incomplete`.
   */
  onChunkSet?: (r: ChunkSetReport) => void;
}

export interface ScanResult {
  /** Records handed to the callback. */
  records: number;
  /** False when the scan stopped early: the callback asked to stop, or the idle timeout passed. */
  complete: boolean;
  /** Partitions not read to their end (idle timeout), as `topic/partition`. */
  unfinished: string[];
}

/** Returning `false` stops the scan. */
export type ScanCallback = (r: ScanRecord) => void | boolean | Promise<void | boolean>;

/**
 * The assignment protocols a group member announces (the classic group
 * protocol): the coordinator refuses a member that shares none with the
 * members already in the group (`mode_conflict`). Fused and separate
 * runners announce different ones, so they can never share a group
 * (streams/runtime/mode-guard.ts). Every protocol assigns round robin over
 * the members that take partitions.
 */
export interface MemberProtocols {
  /** Protocol names, most preferred first. */
  names: string[];
  /** False: a guard member, holding its place in the group and taking no partition (default true). */
  takesPartitions?: boolean;
}

export interface GroupSourceOptions {
  groupId: string;
  topic: string;
  sessionTimeoutMs: number;
  /** Largest fetch, per request. */
  maxBytes: number;
  /** Largest fetch per partition (default `maxBytes`). */
  maxBytesPerPartition?: number;
  /** Partitions with a batch out at once (default 4). */
  concurrency?: number;
  /** Absent: the client's default round-robin protocol. */
  protocols?: MemberProtocols;
}

export interface TransactionalSinkOptions {
  transactionTimeoutMs: number;
  /** Partition count of a topic (cached by the caller; topics do not change under a running stage). */
  partitionsOf: (topic: string) => Promise<number>;
  /** Producer compression of every record. */
  compression?: CompressionName;
}

/**
 * One Kafka client library behind the runtime's seams: a stage runner asks
 * it for everything it does with Kafka, so the library can be swapped (the
 * kafkajs adapter, streams/kafka/kafkajs/; the in-memory cluster of the
 * topology test driver, streams/testing/).
 */
export interface KafkaClient {
  /** A member of `o.groupId` consuming `o.topic` (not started). */
  groupSource(o: GroupSourceOptions): GroupSource;
  /** A transactional producer for `transactionalId` (not initialized). */
  transactionalSink(transactionalId: string, o: TransactionalSinkOptions): TransactionalSink;
  /** An admin client, connected; the caller closes it. */
  admin(): Promise<KafkaAdmin>;
  /** Reads `ranges` (read_committed, offset order per partition) with no consumer group offsets committed. */
  scan(ranges: PartitionRange[], onRecord: ScanCallback, options?: ScanOptions): Promise<ScanResult>;
  /** Closes whatever the client itself holds (what it handed out is closed by its users). */
  close(): Promise<void>;
}

/**
 * Reads records of chosen partitions at chosen offsets, with no consumer
 * group (fetch requests to each partition's leader, read_committed): the
 * changelog restore's read-back and the resolution of row references
 * (issue 16). Offsets need not be sorted or contiguous; each partition is
 * read in offset order, skipping gaps, holding at most `maxBytes` of fetched
 * data per request.
 */
export interface OffsetReader {
  /**
   * The records at `offsets` of `topic`/`partition`, by offset. An offset
   * below the log start (deleted by retention), at or past the end, or
   * holding no record (a transaction marker, or an aborted record) is absent
   * from the answer: the caller decides what a missing record means. An
   * offset below the end but held back by an open transaction is waited for
   * a while (the Kafka reader: 5 s), then the read throws a retriable
   * `request_timeout` — it is not absent, it may yet commit.
   */
  read(topic: string, partition: number, offsets: Offset[]): Promise<Map<Offset, FetchedRecord>>;
  close(): Promise<void>;
}

/*
 * What the edge needs beyond the runtime's KafkaClient: the ops commands
 * (replay, trace, dlq, demo, topics), the publisher, the load generator's
 * row producer and the benchmarks (issue 13). A separate interface, so an
 * adapter that only runs stages (streams/kafka/platformatic/) owes none of it.
 */

/** A topic to create. */
export interface NewTopic {
  topic: string;
  numPartitions: number;
  /** Absent: the broker's default. */
  replicationFactor?: number;
  configEntries?: Array<{ name: string; value: string }>;
}

/** Topic administration for `topics create` and the ops commands: an admin client, connected; the caller closes it. */
export interface OpsAdmin extends KafkaAdmin {
  /** The live brokers. */
  brokers(): Promise<Array<{ host: string; port: number }>>;
  /**
   * Which of `topics` exist, asking for each one's metadata: a request for
   * every topic (listTopics) fails while any partition anywhere in the
   * cluster has no leader, and topics must still be creatable then.
   */
  existingTopics(topics: readonly string[]): Promise<Set<string>>;
  /** Creates `topics` (none of them may exist yet), without waiting for their leaders. */
  createTopics(topics: NewTopic[]): Promise<void>;
  /** The current values of the configs `names` of each of `topics` (a config the broker does not report is absent). */
  topicConfigs(topics: readonly string[], names: readonly string[]): Promise<Map<string, Record<string, string>>>;
  /**
   * Waits until every partition of `topics` has a leader, also while the
   * broker asked does not know a just-created topic yet. Throws
   * `partition_unavailable` after `timeoutMs` (default 60 s).
   */
  waitForLeaders(topics: readonly string[], timeoutMs?: number): Promise<void>;
  deleteTopics(topics: string[]): Promise<void>;
}

export interface IdempotentSinkOptions {
  /** Producer compression of every record (default none). */
  compression?: CompressionName;
}

export interface TailOptions {
  /** Longest a fetch waits for new records (default 100 ms). */
  maxWaitMs?: number;
  /** Largest fetch, per request (the client's default when absent). */
  maxBytes?: number;
  /** Largest fetch per partition (the client's default when absent). */
  maxBytesPerPartition?: number;
  /** Where chunk sets the tail did not hand on are reported (ScanOptions.onChunkSet); absent: a line on stderr. */
  onChunkSet?: (r: ChunkSetReport) => void;
}

/** A running tail (OpsClient.tail). */
export interface TopicTail {
  /** Rejects if the reader failed for good (it does not resolve). */
  readonly failed: Promise<never>;
  /** Stops fetching until `resume` (so an idle tail leaves the CPU to others). */
  pause(): void;
  resume(): void;
  /** Stops reading and removes what the tail left on the cluster (its throw-away group). */
  stop(): Promise<void>;
}

/**
 * The Kafka client of the edge: commands, publishers, tools, benchmarks.
 * Every method throws RolloutStreamErrors with codes of errors/codes.ts for
 * Kafka failures, never a client library's class.
 */
export interface OpsClient {
  /** An admin client, connected; the caller closes it. */
  admin(): Promise<OpsAdmin>;
  /** Reads `ranges` (read_committed, offset order per partition) with no consumer group offsets committed. */
  scan(ranges: PartitionRange[], onRecord: ScanCallback, options?: ScanOptions): Promise<ScanResult>;
  /**
   * An idempotent producer, connected: acks=all, one request in flight (a
   * partition's records keep their order through retries), no topic
   * auto-creation. A record without a partition is placed by murmur2 of its
   * key (round robin without a key). Every partition a send wrote to is
   * checked in the broker's answer, and the records of one the client left
   * out are sent again (`partition_unavailable` when one stays missing);
   * a partition answered twice was written twice, and its positions are
   * those of the first answer. The caller closes it.
   */
  idempotentSink(o?: IdempotentSinkOptions): Promise<IdempotentSink>;
  /**
   * Follows `topics` from the beginning as records arrive (read_committed, no
   * offsets committed); resolves once `onRecord` will see every record from
   * offset 0. It has no end: the caller stops it.
   */
  tail(topics: string[], onRecord: (r: ScanRecord) => void | Promise<void>, o?: TailOptions): Promise<TopicTail>;
  /** Closes whatever the client itself holds (what it handed out is closed by its users). */
  close(): Promise<void>;
}

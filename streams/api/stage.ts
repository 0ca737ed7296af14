/**
 * What a stage is to the runtime (DESIGN.md: input topic, processor, output
 * topics, state store?). A stage turns the records of one input partition
 * into output messages and state-changelog records; the runner writes both
 * with the input offsets in one Kafka transaction. Stages never touch
 * offsets, transactions or clients.
 */
import type { PipelineStage } from '../../config/schema.js';
import type { ChunkInfo } from './chunk-info.js';
import type { DeadLetterRecord, SourceRecord } from './dead-letter-record.js';

/** A stage's name: one `runtime.stages` names, or batch-metrics (which runs wherever postprocess runs). */
export type StageName = PipelineStage | 'batch-metrics';

/** One consumed record. Offsets are decimal strings (never JS numbers). */
export interface InputRecord {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  /** Broker timestamp, epoch ms. */
  timestamp: number;
  /**
   * Fused mode: the object the upstream node encoded into `value`, handed
   * over in process so this node need not decode the bytes it was just
   * given (equal to decoding them; treat it as read-only).
   */
  decoded?: unknown;
  /**
   * The input offset to commit after this record: a chunked record's last
   * chunk + 1, or less while another chunk set is open before it; absent:
   * `offset + 1`.
   */
  next?: string;
  /** Set on a chunked record, or on a chunk set that could not be read whole (then `value` is null): chunk-info.ts. */
  chunk?: ChunkInfo;
}

export interface OutputMessage {
  topic: string;
  key: string;
  value: Buffer;
  headers?: Record<string, string>;
  /** The object `value` encodes, when the stage has it (handed to a fused downstream node instead of decoding). */
  decoded?: unknown;
}

export interface ChangelogRecord {
  key: string;
  /** null = tombstone. */
  value: Buffer | null;
}

/** What one processing step asks the runner to write atomically. */
export interface StageOutput {
  messages: OutputMessage[];
  deadLetters: DeadLetterRecord[];
  changelog: ChangelogRecord[];
  /** Counters for /metrics, e.g. idempotent replays. */
  counters?: Record<string, number>;
}

export const emptyOutput = (): StageOutput => ({ messages: [], deadLetters: [], changelog: [] });

/** Per-partition processor instance; the runner creates one per assigned input partition. */
export interface PartitionProcessor {
  /** Applies one changelog record during restore (before any input is processed). */
  restore?(record: ChangelogRecord): Promise<void>;
  /** After the changelog pass: offsets of this partition's input records the restore needs read back. */
  restoreNeeds?(): string[];
  /** Ends a restore with the input records asked for (any that are gone are absent); reports how many were missing. */
  finishRestore?(inputs: Map<string, Buffer>): Promise<{ missing: number }>;
  /** Processes records of this partition, in offset order. */
  process(records: InputRecord[], nowMs: number): Promise<StageOutput>;
  /** Time-driven work (timeouts); called periodically between batches. */
  tick?(nowMs: number): Promise<StageOutput>;
  /** Gauges for /metrics (e.g. open groups). */
  gauges?(): Record<string, number>;
  /**
   * The runtime dead-letters `record` as `processing_error` (its processing
   * kept throwing: runtime.poison); what the stage writes besides, in the
   * same transaction, so others waiting on the record hear of it (e.g.
   * postprocess's `group_failed` progress for batch metrics). Best effort.
   */
  poisoned?(record: InputRecord, nowMs: number): Promise<StageOutput>;
}

export interface Stage {
  name: StageName;
  inputTopic: string;
  /** Compacted changelog topic (same partition count as the input), if the stage has state. */
  changelogTopic?: string;
  /** Every topic this stage may write (for producer metadata and size checks). */
  outputTopics: string[];
  createProcessor(partition: number): PartitionProcessor;
  /**
   * Called by the runtime with each value of `messages` this stage produced,
   * once the transaction that carried it has settled (committed, or aborted
   * with its sends finished): the client holds the buffer no more, so the
   * stage may reuse its memory (pack's output pool).
   */
  release?(value: Buffer): unknown;
}

/** The source coordinates of an input record, as carried by dead letters. */
export function sourceOf(r: InputRecord, keepValue = true): SourceRecord {
  return { topic: r.topic, partition: r.partition, offset: r.offset, key: r.key, value: keepValue ? r.value : null };
}

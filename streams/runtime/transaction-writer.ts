/**
 * One transaction of one input partition (Kafka Streams' RecordCollector):
 * each step's outputs, dead letters and changelog records, with size limits
 * enforced (a value above its topic's limit is cut into a chunk set by the
 * task's sink, streams/chunks/chunking-sink.ts; only one above
 * `kafka.max_value_bytes` is a `record_too_large` dead letter); records for
 * the next fused stage pinned to the input partition and handed back whole
 * with their offsets; the consumer groups' offsets; the commit, and the metrics of what
 * it committed. Once the transaction has settled (committed or aborted) the
 * values it carried are handed to their stage's `release` (pack recycles
 * their memory then, never while the client may still hold them).
 */
import type { DeadLetterRecord } from '../api/dead-letter-record.js';
import { HEADER_BATCH_ID, HEADER_FUSED_HANDOFF, recordHeaders } from '../api/headers.js';
import type { InputRecord, Stage, StageOutput } from '../api/stage.js';
import type { TopicCodec } from '../codecs/codec.js';
import type { OutgoingRecord, RecordPosition, TransactionalSink } from '../kafka/types.js';
import { DEFAULT_MAX_VALUE_BYTES } from '../chunks/chunk-format.js';
import { crashPoint } from './crash-points.js';
import type { RuntimeMetrics } from './metrics.js';

/** One stage's part of a transaction: what it produced from which inputs. */
export interface Step {
  stage: Stage;
  out: StageOutput;
  sources: InputRecord[];
}

export interface TransactionWriterOptions {
  /** The chain's name for the transaction metrics (`accumulate`, or `accumulate+postprocess+pack`). */
  chainName: string;
  deadLetterTopic: string;
  deadLetterCodec: TopicCodec<'deadLetter'>;
  /** `kafka.max_message_bytes`: the limit when chunking is off. */
  maxMessageBytes: number;
  /** `kafka.max_value_bytes`: the largest value sent, chunked or not (default 4 GiB). */
  maxValueBytes?: number;
  /** `kafka.chunk_records` (default true): false, and a value above `maxMessageBytes` − 4 KiB is `record_too_large` as before chunk sets. */
  chunkRecords?: boolean;
  metrics: RuntimeMetrics;
}

/** What one step will count in /metrics once the transaction committed. */
interface StepTally {
  stage: string;
  out: StageOutput;
  messages: StageOutput['messages'];
  deadLetters: DeadLetterRecord[];
}

export class TransactionWriter {
  constructor(private readonly o: TransactionWriterOptions) {}

  /** Opens a transaction on `sink` for input partition `partition`. */
  async begin(sink: TransactionalSink, partition: number): Promise<OpenTransaction> {
    await sink.begin();
    return new OpenTransaction(this.o, sink, partition);
  }
}

export class OpenTransaction {
  private readonly t0 = performance.now();
  private lap = this.t0;
  private readonly phases: Array<[stage: string, phase: string, seconds: number]> = [];
  private readonly tallies: StepTally[] = [];
  private readonly inputs: Array<[string, number]> = [];
  private readonly offsets: Array<{ stage: string; groupId: string; topic: string; offset: string }> = [];
  /** Values sent per stage, for the stage's `release` after the transaction settled. */
  private readonly carried = new Map<Stage, Buffer[]>();

  constructor(
    private readonly o: TransactionWriterOptions,
    private readonly sink: TransactionalSink,
    readonly partition: number,
  ) {}

  /** Times the phase that just ended (send, process, send_offsets, commit) for `stage`. */
  phase(stage: string, name: string): void {
    const now = performance.now();
    this.phases.push([stage, name, (now - this.lap) / 1000]);
    this.lap = now;
  }

  /** Counts `n` input records of a fused downstream stage (recorded at commit). */
  countInputs(stage: string, n: number): void {
    this.inputs.push([stage, n]);
  }

  /** The input offset (next to read) of `groupId` on this partition, committed with the transaction. */
  addOffset(stage: string, groupId: string, topic: string, offset: string): void {
    this.offsets.push({ stage, groupId, topic, offset });
  }

  /**
   * Sends one step's outputs. Records for `pinTopic` (fused mode: the next
   * stage's input) go to this partition, marked as handed off (the next
   * stage processes them in this transaction; every other reader skips
   * them), and come back as that stage's input records, with the offsets
   * the broker gave them.
   */
  async send(step: Step, pinTopic?: string): Promise<InputRecord[]> {
    const { stage, out, sources } = step;
    const { messages, deadLetters } = this.enforceSizes(out, sources, stage.name);
    this.tallies.push({ stage: stage.name, out, messages, deadLetters });
    const carried = this.carried.get(stage) ?? this.carried.set(stage, []).get(stage)!;
    for (const m of out.messages) carried.push(m.value);
    const changelogTopic = stage.changelogTopic;
    const partition = this.partition;
    const decoded = new Map<OutgoingRecord, unknown>();
    const all: OutgoingRecord[] = [
      ...messages.map((m) => {
        const pinned = m.topic === pinTopic;
        const headers = pinned ? { ...m.headers, [HEADER_FUSED_HANDOFF]: '1' } : m.headers;
        const r: OutgoingRecord = { topic: m.topic, key: m.key, value: m.value, ...(pinned ? { partition } : {}), ...(headers ? { headers } : {}) };
        if (m.topic === pinTopic && m.decoded !== undefined) decoded.set(r, m.decoded);
        return r;
      }),
      ...deadLetters.map((d) => ({ topic: this.o.deadLetterTopic, key: d.group_id ?? '', value: this.o.deadLetterCodec.encode(d), headers: recordHeaders(d.batch_id, d.weight_version) })),
      ...(changelogTopic ? [...out.changelog, ...messages.flatMap((m) => m.changelog ?? [])].map((c) => ({ topic: changelogTopic, key: c.key, value: c.value, partition })) : []),
    ];
    // The task's sink cuts the sends (per partition under the topic's limit, in all under the request
    // budget) and chunk sets; it answers one position per record, a chunked one's first and last offset.
    const positions: Array<RecordPosition & { lastOffset?: string }> = all.length === 0 ? [] : await this.sink.send(all);
    const written: InputRecord[] = [];
    if (pinTopic === undefined) return written;
    const now = Date.now();
    all.forEach((r, i) => {
      if (r.topic !== pinTopic) return;
      const at = positions[i]!;
      // The whole value goes on in process, at its first chunk's offset; `next` is past its last.
      const input: InputRecord = { topic: pinTopic, partition, offset: at.offset, next: (BigInt(at.lastOffset ?? at.offset) + 1n).toString(), key: Buffer.from(r.key as string), value: r.value, timestamp: now };
      if (decoded.has(r)) input.decoded = decoded.get(r);
      written.push(input);
    });
    return written;
  }

  /** Sends the groups' offsets and commits; records the metrics of what committed. */
  async commit(): Promise<void> {
    for (const o of this.offsets) {
      await this.sink.sendOffsets(o.groupId, [{ topic: o.topic, partition: this.partition, offset: o.offset }]);
      this.phase(o.stage, 'send_offsets');
    }
    crashPoint('tx.after-offsets');
    await this.sink.commit();
    this.phase(this.o.chainName, 'commit');
    const m = this.o.metrics;
    m.transactionSeconds.observe({ stage: this.o.chainName }, (performance.now() - this.t0) / 1000);
    for (const [stage, name, seconds] of this.phases) m.transactionPhaseSeconds.observe({ stage, phase: name }, seconds);
    for (const [stage, n] of this.inputs) m.recordsIn.inc({ stage }, n);
    for (const t of this.tallies) {
      for (const msg of t.messages) m.recordsOut.inc({ stage: t.stage, topic: msg.topic });
      for (const d of t.deadLetters) m.deadLetters.inc({ stage: t.stage, reason: d.reason });
      for (const [k, v] of Object.entries(t.out.counters ?? {})) m.events.inc({ stage: t.stage, event: k }, v);
    }
  }

  /** After a failure: aborts when the sink still can (a fenced or failed sink is only closed, by its task). */
  async abort(): Promise<void> {
    if (this.sink.state === 'in_transaction' || this.sink.state === 'abortable_error') await this.sink.abort().catch(() => undefined);
  }

  /** The transaction is over, committed or not: every value it carried goes back to its stage. */
  settle(): void {
    for (const [stage, values] of this.carried) if (stage.release) for (const v of values) stage.release(v);
    this.carried.clear();
  }

  /**
   * A record over the size limit would fail the whole transaction and stall
   * the partition; it becomes a `record_too_large` dead letter instead,
   * carrying the input records of its own group (same key: every topic is
   * keyed by group id, or by batch id for batch records), not the whole
   * batch's. A dead letter keeps its source values when it fits, else only
   * their coordinates (`dlq redrive` reads them there). The limit is the
   * ceiling `kafka.max_value_bytes` (everything below it is chunked as
   * needed), or with chunking off `kafka.max_message_bytes` less 4 KiB for
   * the key, headers and framing.
   */
  private enforceSizes(out: StageOutput, sources: InputRecord[], stageName: string): { messages: StageOutput['messages']; deadLetters: DeadLetterRecord[] } {
    const chunking = this.o.chunkRecords !== false;
    const limit = chunking ? (this.o.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES) : this.o.maxMessageBytes - 4096;
    const limitName = chunking ? `${limit}-byte ceiling (kafka.max_value_bytes)` : `${this.o.maxMessageBytes}-byte limit (kafka.max_message_bytes; kafka.chunk_records is off)`;
    const messages: StageOutput['messages'] = [];
    const deadLetters = [...out.deadLetters];
    for (const m of out.messages) {
      if (m.value.length <= limit) {
        messages.push(m);
        continue;
      }
      m.dropped?.();
      const own = sources.filter((r) => r.key !== null && r.key.toString('utf8') === m.key);
      deadLetters.push({
        reason: 'record_too_large',
        message: `${stageName} output for ${m.key} to ${m.topic} is ${m.value.length} bytes, over the ${limitName}`,
        stage: stageName,
        group_id: m.key,
        batch_id: m.headers?.[HEADER_BATCH_ID] ?? null,
        row_indices: [],
        missing_row_indices: [],
        records: own.map((r) => ({ topic: r.topic, partition: r.partition, offset: r.offset, key: r.key, value: r.value })),
        produced_at: Date.now(),
      });
    }
    return {
      messages,
      deadLetters: deadLetters.map((d) => {
        const size = d.records.reduce((n, r) => n + (r.value?.length ?? 0) + (r.key?.length ?? 0) + 64, d.message.length);
        if (size <= limit) return d;
        return {
          ...d,
          message: `${d.message} [original payloads omitted: ${size} bytes exceed the record size limit; dlq redrive reads them at their source offsets]`,
          records: d.records.map((r) => ({ ...r, value: null })),
        };
      }),
    };
  }
}

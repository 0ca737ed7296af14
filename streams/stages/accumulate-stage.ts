/**
 * The accumulate stage (row-completed → group-complete): decodes rows and
 * BatchEnds, runs the pure accumulator, and hands the runner the emitted
 * groups, dead letters and changelog records. Timeouts run on `tick`.
 */
import type { AccumulateConfig } from '../../config/schema.js';
import {
  accumulateBatchEnd,
  accumulateGymResult,
  accumulateRow,
  applyStateChange,
  createAccumulatorState,
  type AccumulatorStateChange,
  expireGroups,
  type AccumulateResult,
} from '../../processors/group-accumulator.js';
import { ingestGymResult } from '../../processors/gym-ingest.js';
import type { DeadLetterDecision, GymResult, RolloutRow } from '../../processors/types.js';
import type { ResolvedIngestConfig } from '../../processors/ingest-config.js';
import { encodeProgress } from './batch-progress.js';
import { recordHeaders } from '../api/headers.js';
import { assembleGroupValue } from '../codecs/group-assembly.js';
import type { TopicCodec } from '../codecs/codec.js';
import type { SourceRecord } from '../api/dead-letter-record.js';
import { deadLetterRecord, undecodableRecord } from '../api/dead-letters.js';
import { emptyOutput, sourceOf, type InputRecord, type PartitionProcessor, type Stage, type StageOutput } from '../api/stage.js';
import type { TopicNames } from '../topics/names.js';
import { replayIdentity, UndecodableError } from '../codecs/wire-format.js';
import { contentDigest, gymResultDigest } from '../../processors/content-digest.js';
import { changelogRecords, parseChangelogRecord, type ParsedChangelogRecord, type StoredRow } from './accumulator-changelog.js';
import { asWritten, type RowRef } from '../codecs/row-refs.js';
import { ingestFingerprint } from '../../processors/ingest-fingerprint.js';
import { chunkOutcome } from './decode-input.js';

export interface AccumulateStageDeps {
  topics: TopicNames;
  config: AccumulateConfig;
  /** GymResult → RolloutRow conversion (SPEC §2.1), run inside this stage's transaction. */
  ingest: ResolvedIngestConfig;
  rowCodec: TopicCodec<'rowCompleted'>;
  groupCodec: TopicCodec<'groupComplete'>;
  /** Partitions of the input topic: the batch-metrics aggregator waits for a close from each. */
  inputPartitions: number;
  /** `runtime.intermediate_records: reference`: a group is written as its rows' places in the input topic (row-refs.ts). */
  references?: boolean;
}

/**
 * Stage-level changelog keys (the processor's own keys start with g/ or b/):
 * which groups of a batch this partition emitted, and which batches it has
 * already reported closed to the batch-progress topic.
 */
const emittedKey = (batch: string, group: string) => `x/${JSON.stringify(['e', batch, group])}`;
const reportedKey = (batch: string) => `x/${JSON.stringify(['r', batch])}`;

export function accumulateStage(deps: AccumulateStageDeps): Stage {
  return {
    name: 'accumulate',
    inputTopic: deps.topics.rowCompleted,
    changelogTopic: deps.topics.accumulateChangelog,
    outputTopics: [deps.topics.groupComplete, deps.topics.deadLetter, deps.topics.batchProgress],
    createProcessor: (partition) => new AccumulateProcessor(deps, partition),
  };
}

class AccumulateProcessor implements PartitionProcessor {
  private readonly state = createAccumulatorState();
  /** Written with every group by reference: a reader re-deriving its GymResult rows must convert as this config does. */
  private readonly fingerprint: string;
  /** Where each row payload came from (payload objects are the pending rows' bytes). */
  private readonly sources = new WeakMap<Uint8Array, SourceRecord>();
  private readonly emittedByBatch = new Map<string, Set<string>>();
  private readonly reported = new Set<string>();
  /** Changelog records read by restore, applied by finishRestore. */
  private restoreLog: ParsedChangelogRecord[] = [];
  /** During a restore: the latest row record of each row key read so far. */
  private latestRow = new Map<string, StoredRow>();
  /**
   * Row records a later record of their key replaced or tombstoned (the
   * group closed): what compaction would drop. They are neither read back
   * from the input nor applied, so a restore reads the rows still pending,
   * not every row of the uncompacted part of the changelog.
   */
  private supersededRows = new Set<StoredRow>();

  constructor(
    private readonly deps: AccumulateStageDeps,
    private readonly partition: number,
  ) {
    this.fingerprint = ingestFingerprint(deps.ingest);
  }

  async restore(record: { key: string; value: Buffer | null }): Promise<void> {
    if (record.key.startsWith('x/')) {
      const [kind, batch, group] = JSON.parse(record.key.slice(2)) as [string, string, string?];
      if (kind === 'e' && group !== undefined) {
        if (record.value) this.emitted(batch).add(group);
        else this.emittedByBatch.get(batch)?.delete(group);
      } else if (kind === 'r') {
        if (record.value) this.reported.add(batch);
        else this.reported.delete(batch);
      }
      return;
    }
    const earlier = this.latestRow.get(record.key);
    if (earlier) {
      this.supersededRows.add(earlier);
      this.latestRow.delete(record.key);
    }
    // Applied in order by finishRestore, once referenced rows are read back.
    const parsed = parseChangelogRecord(record);
    if (!parsed) return;
    if (parsed.kind === 'row') {
      if (parsed.row.payload) parsed.row.payload = Buffer.from(parsed.row.payload); // not a view of the fetch
      this.latestRow.set(record.key, parsed.row);
    }
    this.restoreLog.push(parsed);
  }

  restoreNeeds(): string[] {
    const offsets: string[] = [];
    for (const p of this.restoreLog) if (p.kind === 'row' && !p.row.payload && !this.supersededRows.has(p.row)) offsets.push(p.row.offset!);
    return offsets;
  }

  async finishRestore(inputs: Map<string, Buffer>): Promise<{ missing: number }> {
    let missing = 0;
    const log = this.restoreLog;
    const superseded = this.supersededRows;
    this.restoreLog = [];
    this.latestRow = new Map();
    this.supersededRows = new Set();
    for (const parsed of log) {
      if (parsed.kind === 'change') {
        applyStateChange(this.state, parsed.change);
        continue;
      }
      // A later record of its key (the group's close) makes it obsolete: applying it would change nothing that lasts.
      if (superseded.has(parsed.row)) continue;
      const { change, offset } = parsed.row;
      const payload = parsed.row.payload ?? inputs.get(offset!);
      if (!payload) {
        // Gone from the input topic (retention shorter than a group stays
        // open): the row is missing now, and its group ends as an
        // incomplete_group dead letter at its BatchEnd or timeout.
        missing++;
        continue;
      }
      const e = await this.deps.rowCodec.decode(payload);
      if (e.kind === 'batch_end') throw new Error(`changelog row ${change.group_id}/${change.row_index} refers to a BatchEnd at offset ${offset}`);
      let row = e.kind === 'row' ? e.row : null;
      if (e.kind === 'gym_result') {
        // The same pure conversion as when the row was accepted re-derives the same row.
        const converted = ingestGymResult(e.result, this.deps.ingest);
        if (!converted.ok) {
          throw new Error(
            `changelog row ${change.group_id}/${change.row_index} (offset ${offset}) no longer converts: ${converted.reason}: ${converted.message} (was ingest config changed while the group was open?)`,
          );
        }
        row = converted.row;
      }
      this.sources.set(payload, {
        topic: this.deps.topics.rowCompleted,
        partition: this.partition,
        offset: offset ?? '-1',
        key: Buffer.from(change.group_id),
        value: payload,
      });
      // The change's payload must be the very object the state keeps.
      applyStateChange(this.state, { ...change, row, payload } as AccumulatorStateChange);
    }
    return { missing };
  }

  async process(records: InputRecord[], nowMs: number): Promise<StageOutput> {
    const out = emptyOutput();
    for (const r of records) {
      const outcome = chunkOutcome('accumulate', r, nowMs);
      if (outcome === 'skip') continue;
      if (outcome) {
        out.deadLetters.push(outcome);
        continue;
      }
      const source = sourceOf(r);
      if (!r.value) {
        out.deadLetters.push(undecodableRecord('accumulate', source, 'record has no value', nowMs));
        continue;
      }
      // A copy, so a pending row pins its own bytes, not the whole fetch buffer.
      const value = Buffer.from(r.value);
      let event;
      try {
        event = await this.deps.rowCodec.decode(value);
      } catch (e) {
        if (!(e instanceof UndecodableError)) throw e;
        out.deadLetters.push(undecodableRecord('accumulate', source, e.message, nowMs));
        continue;
      }
      if (event.kind === 'batch_end') {
        this.collect(out, accumulateBatchEnd(this.state, event.end, this.deps.config, nowMs), nowMs);
        continue;
      }
      const keyProblem = rowKeyProblem(r.key, event);
      if (keyProblem) {
        out.deadLetters.push(deadLetterRecord(keyProblem, 'accumulate', [source], nowMs));
        continue;
      }
      this.sources.set(value, source);
      if (event.kind === 'row') {
        const input = { record: event.row, payload: value, identity: replayIdentity(value, event.row.produced_at), digest: contentDigest(event.row) };
        this.collect(out, accumulateRow(this.state, input, this.deps.config, nowMs), nowMs);
      } else {
        const input = { record: event.result, payload: value, identity: replayIdentity(value, event.result.produced_at), digest: gymResultDigest(event.result) };
        this.collect(out, accumulateGymResult(this.state, input, this.deps.config, this.deps.ingest, nowMs), nowMs);
      }
    }
    this.collect(out, expireGroups(this.state, this.deps.config, nowMs), nowMs);
    this.reportClosedBatches(out, nowMs);
    return out;
  }

  async tick(nowMs: number): Promise<StageOutput> {
    const out = emptyOutput();
    this.collect(out, expireGroups(this.state, this.deps.config, nowMs), nowMs);
    this.reportClosedBatches(out, nowMs);
    return out;
  }

  private emitted(batch: string): Set<string> {
    let set = this.emittedByBatch.get(batch);
    if (!set) this.emittedByBatch.set(batch, (set = new Set()));
    return set;
  }

  /**
   * A batch is closed on this partition once its BatchEnd arrived, the grace
   * passed and none of its groups is still open here; then the batch-metrics
   * aggregator is told which groups this partition emitted (once).
   */
  private reportClosedBatches(out: StageOutput, nowMs: number): void {
    const open = new Set<string>();
    for (const g of this.state.pending.values()) open.add(g.batch_id);
    for (const [batch, at] of this.state.batch_ends) {
      if (this.reported.has(batch) || open.has(batch) || nowMs < at + this.deps.config.batch_end_grace_ms) continue;
      const emitted = [...(this.emittedByBatch.get(batch) ?? [])].sort();
      out.messages.push({
        topic: this.deps.topics.batchProgress,
        key: batch,
        value: encodeProgress({ type: 'partition_closed', batch_id: batch, partition: this.partition, partitions: this.deps.inputPartitions, emitted }),
        headers: recordHeaders(batch),
      });
      for (const g of emitted) out.changelog.push({ key: emittedKey(batch, g), value: null });
      out.changelog.push({ key: reportedKey(batch), value: Buffer.from('1') });
      this.emittedByBatch.delete(batch);
      this.reported.add(batch);
    }
  }

  /** Open groups, the oldest and newest weight version among their rows (the spread the trainer will see), and when the oldest open group opened. */
  gauges(): Record<string, number> {
    let lo = Infinity;
    let hi = -Infinity;
    let oldest = Infinity;
    for (const g of this.state.pending.values()) {
      if (g.opened_at < oldest) oldest = g.opened_at;
      for (const r of g.rows.values()) {
        if (r.row.weight_version < lo) lo = r.row.weight_version;
        if (r.row.weight_version > hi) hi = r.row.weight_version;
      }
    }
    return {
      open_groups: this.state.pending.size,
      ...(lo <= hi ? { open_weight_version_min: lo, open_weight_version_max: hi } : {}),
      ...(oldest < Infinity ? { open_group_opened_at_min: oldest } : {}),
    };
  }

  private sourceFor(payload: Uint8Array): SourceRecord {
    return (
      this.sources.get(payload) ?? {
        topic: this.deps.topics.rowCompleted,
        partition: this.partition,
        offset: '-1',
        key: null,
        value: Buffer.from(payload),
      }
    );
  }

  /** Where each row of a group lies in the input topic, or null when one's offset is unknown (then the group is written in full). */
  private refsOf(payloads: Uint8Array[]): RowRef[] | null {
    const refs: RowRef[] = [];
    for (const p of payloads) {
      const source = this.sources.get(p);
      if (!source || source.topic !== this.deps.topics.rowCompleted || BigInt(source.offset) < 0n) return null;
      refs.push({ partition: source.partition, offset: source.offset });
    }
    return refs;
  }

  private collect(out: StageOutput, result: AccumulateResult, nowMs: number): void {
    for (const { group, payloads } of result.groups) {
      const refs = this.deps.references ? this.refsOf(payloads) : null;
      // In process (fused) the next node gets the rows themselves, and the references to pass on.
      const decoded = refs ? asWritten(group, refs, this.fingerprint) : group;
      const value = refs
        ? this.deps.groupCodec.encode(decoded)
        : (assembleGroupValue(group, payloads, this.deps.rowCodec.schemaId, this.deps.groupCodec, this.deps.groupCodec.schemaId) ?? this.deps.groupCodec.encode(group));
      out.messages.push({ topic: this.deps.topics.groupComplete, key: group.group_id, value, decoded, headers: recordHeaders(group.batch_id, group.rows[0]?.weight_version) });
      this.emitted(group.batch_id).add(group.group_id);
      out.changelog.push({ key: emittedKey(group.batch_id, group.group_id), value: Buffer.from('1') });
    }
    for (const d of result.deadLetters) {
      out.deadLetters.push(deadLetterRecord(d, 'accumulate', d.payloads.map((p) => this.sourceFor(p)), nowMs));
    }
    for (const c of result.changes) {
      out.changelog.push(...changelogRecords(c, (p) => this.sources.get(p)?.offset));
      if (c.kind === 'batch_forgotten' && this.reported.delete(c.batch_id)) {
        out.changelog.push({ key: reportedKey(c.batch_id), value: null });
      }
    }
    if (result.replays > 0) out.counters = { ...out.counters, idempotent_replays: (out.counters?.idempotent_replays ?? 0) + result.replays };
  }
}

/**
 * A row is keyed by its group id: the key places it on its group's
 * partition, where the group's other rows are judged. A row under another
 * key (or none) would open a second, never-complete copy of its group on
 * another partition, so it is rejected on its own (`invalid_row`).
 */
function rowKeyProblem(key: Buffer | null | undefined, event: { kind: 'row'; row: RolloutRow } | { kind: 'gym_result'; result: GymResult }): DeadLetterDecision | null {
  const r = event.kind === 'row' ? event.row : event.result;
  const got = key ? key.toString('utf8') : null;
  if (got === r.group_id) return null;
  return {
    reason: 'invalid_row',
    message: got === null ? `row ${r.row_index} of group ${r.group_id} has no record key (rows are keyed by their group id)` : `row ${r.row_index} of group ${r.group_id} has record key ${JSON.stringify(got.slice(0, 200))}, not its group id`,
    group_id: r.group_id,
    batch_id: r.batch_id,
    row_indices: [r.row_index],
    missing_row_indices: [],
    payloads: [],
  };
}

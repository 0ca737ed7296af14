/**
 * The stages of `offline` chained in memory (SPEC §9): JSON-form lines in,
 * JSON-form records out through an `emit` callback, no Kafka and no clock.
 * The same pure processors as the Kafka stages do the work; this module only
 * routes records between them and turns bad input into dead letters.
 *
 * It agrees with the Kafka stages on errors: a processor's dead-letter
 * decisions and its coded verdicts (pack's `PackError`) are dead letters;
 * any other exception (a bug) follows `runtime.poison.policy` without
 * retries (nothing here could make a second try differ): `stop` (the
 * default) ends the run with a non-zero exit, `dead-letter` writes it at
 * once as `processing_error`.
 *
 * Offline time stands still (now = 0): nothing times out, a BatchEnd with a
 * zero grace closes its batch at once, and end of input acts as BatchEnd for
 * every open batch with the grace elapsed. Batch metrics are written at end
 * of input, one line per batch with at least one emitted group, over the
 * rows of its emitted groups in group-index order.
 */
import type { Config } from '../config/schema.js';
import {
  accumulateBatchEnd,
  accumulateGymResult,
  accumulateRow,
  createAccumulatorState,
  finishInput,
  type AccumulateResult,
} from '../processors/group-accumulator.js';
import { ingestGymResult } from '../processors/gym-ingest.js';
import type { ResolvedIngestConfig } from '../processors/ingest-config.js';
import { packGroup } from '../processors/pack.js';
import { contentDigest, gymResultDigest } from '../processors/content-digest.js';
import { isVerdict, RolloutStreamError } from '../errors/index.js';
import {
  computeBatchMetrics,
  postprocessGroup,
  type MetricRow,
  type ResolvedPostprocessConfig,
} from '../processors/postprocess.js';
import { validateRow } from '../processors/row-validation.js';
import type { DeadLetterDecision, DeadLetterReason, PenalizedGroup, PromptGroup, RolloutRow } from '../processors/types.js';
import { JsonFormError, parseJsonLine, type JsonLine } from '../json-form/form.js';

export const OFFLINE_STAGES = ['ingest', 'accumulate', 'postprocess', 'pack', 'all'] as const;
export type OfflineStage = (typeof OFFLINE_STAGES)[number];

/** A record `offline` writes: every line kind of the JSON form except input GymResults and BatchEnds (`ingest` writes rows). */
export type OfflineOutput =
  | Extract<JsonLine, { kind: 'batch_end' | 'group' | 'penalized' | 'packed' | 'metrics' | 'dead_letter' }>
  | { kind: 'row'; record: RolloutRow };

export interface OfflineCounts {
  lines: number;
  /** GymResults converted into rows (SPEC §2.1). */
  ingested: number;
  groups: number;
  penalized: number;
  packed: number;
  metrics: number;
  replays: number;
  dead_letters: Partial<Record<DeadLetterReason, number>>;
}

const INPUT_KIND: Record<OfflineStage, JsonLine['kind'][]> = {
  ingest: ['gym_result', 'batch_end'],
  accumulate: ['row', 'gym_result', 'batch_end'],
  postprocess: ['group'],
  pack: ['penalized'],
  all: ['row', 'gym_result', 'batch_end'],
};

const NOW = 0;

export class OfflinePipeline {
  readonly counts: OfflineCounts = { lines: 0, ingested: 0, groups: 0, penalized: 0, packed: 0, metrics: 0, replays: 0, dead_letters: {} };
  private readonly accumulator = createAccumulatorState();
  /** batch id → emitted groups' metric rows, for batch metrics at the end. */
  private readonly batchRows = new Map<string, Array<{ group_index: number; rows: MetricRow[] }>>();

  constructor(
    readonly stage: OfflineStage,
    private readonly config: Config,
    private readonly postprocessConfig: ResolvedPostprocessConfig,
    private readonly ingestConfig: ResolvedIngestConfig,
    private readonly emit: (out: OfflineOutput) => void,
  ) {}

  /** Processes one input line (blank lines are skipped). */
  feed(text: string): void {
    if (text.trim() === '') return;
    this.counts.lines += 1;
    let line: JsonLine;
    try {
      line = parseJsonLine(text);
    } catch (e) {
      if (!(e instanceof JsonFormError)) throw e;
      this.deadLetter(undecodable(`line ${this.counts.lines}: ${e.message}`, text));
      return;
    }
    if (!INPUT_KIND[this.stage].includes(line.kind)) {
      const wanted = INPUT_KIND[this.stage].join(' or ');
      this.deadLetter(undecodable(`line ${this.counts.lines}: a ${line.kind} line is not input of offline ${this.stage} (expects ${wanted})`, text));
      return;
    }
    switch (line.kind) {
      case 'row':
        this.accumulated(accumulateRow(this.accumulator, this.rowInput(line.record, text), this.config.accumulate, NOW));
        return;
      case 'gym_result':
        if (this.stage === 'ingest') this.ingest(line.record, text);
        else this.accumulated(accumulateGymResult(this.accumulator, this.rowInput(line.record, text, gymResultDigest), this.config.accumulate, this.ingestConfig, NOW));
        return;
      case 'batch_end':
        // `ingest` only converts: BatchEnds pass through for the accumulate run that reads its output.
        if (this.stage === 'ingest') this.emit(line);
        else this.accumulated(accumulateBatchEnd(this.accumulator, line.end, this.config.accumulate, NOW));
        return;
      case 'group':
        this.groupFromInput(line.group);
        return;
      case 'penalized':
        this.pack(line.group);
        return;
      default:
        return;
    }
  }

  /**
   * A row's input for accumulate: the line's bytes as its payload, and as its
   * replay identity the digest of its decoded content (produced_at left out,
   * JSON spelling and key order ignored), the same as the stages compute, so
   * a line repeated with another timestamp or spelling is a replay.
   */
  private rowInput(record: unknown, text: string, digest: (record: unknown) => string = contentDigest): { record: unknown; payload: Uint8Array; digest: string } {
    return { record, payload: utf8(text), digest: digest(record) };
  }

  /** `offline ingest`: one GymResult line → its row line, or a row-level dead letter. */
  private ingest(record: unknown, text: string): void {
    const converted = ingestGymResult(record, this.ingestConfig);
    if (!converted.ok) {
      this.deadLetter({
        reason: converted.reason,
        message: converted.message,
        group_id: converted.group_id,
        batch_id: converted.batch_id,
        row_indices: converted.row_index === null ? [] : [converted.row_index],
        missing_row_indices: [],
        payloads: [utf8(text)],
      });
      return;
    }
    this.counts.ingested += 1;
    this.emit({ kind: 'row', record: converted.row });
  }

  /** End of input: open groups become `incomplete_group`, then the batch metrics lines. */
  finish(): void {
    if (this.stage === 'accumulate' || this.stage === 'all') {
      this.accumulated(finishInput(this.accumulator, this.config.accumulate, NOW));
    }
    for (const [batchId, groups] of this.batchRows) {
      const rows = [...groups].sort((a, b) => a.group_index - b.group_index).flatMap((g) => g.rows);
      const values = computeBatchMetrics(rows, this.postprocessConfig);
      this.counts.metrics += 1;
      this.emit({ kind: 'metrics', metrics: { scope: 'batch', group_id: null, batch_id: batchId, values } });
    }
    this.batchRows.clear();
  }

  private accumulated(out: AccumulateResult): void {
    this.counts.replays += out.replays;
    for (const d of out.deadLetters) this.deadLetter(d);
    for (const { group } of out.groups) {
      this.counts.groups += 1;
      if (this.stage === 'accumulate') this.emit({ kind: 'group', group });
      else this.postprocess(group);
    }
  }

  /** A group line is checked like accumulate output would be before postprocess sees it. */
  private groupFromInput(group: PromptGroup): void {
    for (const record of group.rows) {
      const checked = validateRow(record);
      if (!checked.ok) {
        this.deadLetter(groupLetter(group, checked.reason, `row ${checked.row_index ?? '?'}: ${checked.message}`));
        return;
      }
    }
    this.counts.groups += 1;
    this.postprocess(group);
  }

  private postprocess(group: PromptGroup): void {
    let result: ReturnType<typeof postprocessGroup>;
    try {
      result = postprocessGroup(group, this.postprocessConfig);
    } catch (e) {
      if (!isVerdict(e)) this.unexpected('postprocess', group, e);
      this.deadLetter(groupLetter(group, 'processing_error', `postprocess failed: ${(e as Error).message}`));
      return;
    }
    if (!result.ok) {
      this.deadLetter(result.deadLetter);
      return;
    }
    this.counts.penalized += 1;
    if (this.stage === 'postprocess') this.emit({ kind: 'penalized', group: result.penalized });
    else this.pack(result.penalized);
    this.counts.metrics += 1;
    this.emit({
      kind: 'metrics',
      metrics: { scope: 'group', group_id: group.group_id, batch_id: group.batch_id, values: result.metrics },
    });
    const batch = this.batchRows.get(group.batch_id) ?? [];
    batch.push({ group_index: group.group_index, rows: result.metricRows });
    this.batchRows.set(group.batch_id, batch);
  }

  private pack(group: PenalizedGroup): void {
    let packed: ReturnType<typeof packGroup>;
    try {
      packed = packGroup(group, this.config.pack);
    } catch (e) {
      if (!isVerdict(e)) this.unexpected('pack', group, e);
      this.deadLetter(groupLetter(group, 'processing_error', `pack failed: ${(e as Error).message}`));
      return;
    }
    this.counts.packed += 1;
    this.emit({ kind: 'packed', packed });
  }

  /** An exception that is no decision: under `runtime.poison.policy: stop` it ends the run (thrown), else the caller dead-letters it. */
  private unexpected(stage: string, group: { group_id: string }, e: unknown): void {
    if (this.config.runtime.poison.policy !== 'stop') return;
    const what = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    throw new RolloutStreamError('processing_error', `offline ${stage} failed on group ${group.group_id}: ${what} (runtime.poison.policy is stop)`, { cause: e });
  }

  private deadLetter(d: DeadLetterDecision): void {
    this.counts.dead_letters[d.reason] = (this.counts.dead_letters[d.reason] ?? 0) + 1;
    this.emit({ kind: 'dead_letter', deadLetter: d });
  }
}

function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

function undecodable(message: string, text: string): DeadLetterDecision {
  return {
    reason: 'undecodable',
    message,
    group_id: null,
    batch_id: null,
    row_indices: [],
    missing_row_indices: [],
    payloads: [utf8(text)],
  };
}

function groupLetter(
  group: { group_id: string; batch_id: string; rows: Array<{ row_index: number }> },
  reason: DeadLetterReason,
  message: string,
): DeadLetterDecision {
  const indices = Array.isArray(group.rows) ? group.rows.map((r) => r?.row_index).filter(Number.isInteger) : [];
  return {
    reason,
    message,
    group_id: typeof group.group_id === 'string' ? group.group_id : null,
    batch_id: typeof group.batch_id === 'string' ? group.batch_id : null,
    row_indices: indices,
    missing_row_indices: [],
    payloads: [],
  };
}

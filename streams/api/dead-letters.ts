/**
 * Turning a processor's dead-letter decision into the record written to
 * `rollout.dead-letter`: the decision plus source coordinates and the
 * original bytes of every affected input record.
 */
import type { DeadLetterDecision } from '../../processors/types.js';
import type { DeadLetterRecord, SourceRecord } from './dead-letter-record.js';

export function deadLetterRecord(d: DeadLetterDecision, stage: string, records: SourceRecord[], nowMs: number): DeadLetterRecord {
  return {
    reason: d.reason,
    message: d.message,
    stage,
    group_id: d.group_id,
    batch_id: d.batch_id,
    row_indices: d.row_indices,
    missing_row_indices: d.missing_row_indices,
    records,
    produced_at: nowMs,
  };
}

/** A dead letter for an input record nothing could be read from. */
export function undecodableRecord(stage: string, source: SourceRecord, message: string, nowMs: number): DeadLetterRecord {
  return {
    reason: 'undecodable',
    message,
    stage,
    group_id: source.key ? source.key.toString('utf8') : null,
    batch_id: null,
    row_indices: [],
    missing_row_indices: [],
    records: [source],
    produced_at: nowMs,
  };
}

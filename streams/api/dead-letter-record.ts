/**
 * The dead-letter record as written to `rollout.dead-letter`: the processor's
 * decision plus where the rejected input came from and its original bytes.
 */
import type { DeadLetterReason } from '../../processors/types.js';

export interface SourceRecord {
  topic: string;
  partition: number;
  /** Kafka offset as a decimal string (offsets never pass through JS numbers). */
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
}

export interface DeadLetterRecord {
  reason: DeadLetterReason;
  message: string;
  stage: string;
  group_id: string | null;
  batch_id: string | null;
  row_indices: number[];
  missing_row_indices: number[];
  records: SourceRecord[];
  produced_at: number;
  /** Not in the Avro record: the group's weight version when the stage knows it, for the `weight_version` header. */
  weight_version?: number | null;
}

/**
 * Batch-level metrics (SPEC §4.8) need every row of a batch's emitted groups,
 * but a batch's groups are spread over partitions and instances. So the
 * stages report progress to an internal topic keyed by batch id, where one
 * aggregator instance sees all of a batch:
 *
 *   partition_closed  accumulate, once per input partition per batch: its
 *                     BatchEnd arrived, the grace passed, no group of the
 *                     batch is still open there; lists the groups it emitted
 *   group_rows        postprocess: a group's MetricRows (from the same code
 *                     that computed its group metrics)
 *   group_failed      postprocess: a group that became a dead letter
 *
 * The batch's metrics are due when every input partition closed it and every
 * emitted group reported rows or failure. Values are JSON (internal topic).
 */
import type { MetricRow } from '../../processors/postprocess.js';

export type BatchProgress =
  | { type: 'partition_closed'; batch_id: string; partition: number; partitions: number; emitted: string[] }
  | { type: 'group_rows'; batch_id: string; group_id: string; group_index: number; rows: MetricRow[] }
  | { type: 'group_failed'; batch_id: string; group_id: string };

export function encodeProgress(p: BatchProgress): Buffer {
  return Buffer.from(JSON.stringify(p), 'utf8');
}

export function decodeProgress(value: Buffer): BatchProgress {
  const p = JSON.parse(value.toString('utf8')) as BatchProgress;
  if (!p || typeof p !== 'object' || typeof p.batch_id !== 'string') throw new Error('not a batch progress record');
  return p;
}

/** Changelog/state key of a progress record: one per partition close and per group (JSON, so any id is safe). */
export function progressKey(p: BatchProgress): string {
  return JSON.stringify(p.type === 'partition_closed' ? [p.batch_id, 'p', p.partition] : [p.batch_id, 'g', p.group_id]);
}

/** The batch id of a progress key. */
export function batchOfKey(key: string): string {
  return (JSON.parse(key) as [string])[0];
}

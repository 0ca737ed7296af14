/**
 * The record headers every stage writes beside its values (SPEC §6.2): the
 * group's `weight_version` (decimal, the version of its first row, as the
 * packed tags carry it) and its `batch_id` (UTF-8), so a consumer can filter
 * stale or unwanted groups without decoding a value.
 */
export const HEADER_WEIGHT_VERSION = 'weight_version';
export const HEADER_BATCH_ID = 'batch_id';

/** Headers for a record of `batchId` (and `weightVersion` when it has one). */
export function recordHeaders(batchId: string | null | undefined, weightVersion?: number | null): Record<string, string> {
  const h: Record<string, string> = {};
  if (batchId !== null && batchId !== undefined) h[HEADER_BATCH_ID] = batchId;
  if (weightVersion !== null && weightVersion !== undefined) h[HEADER_WEIGHT_VERSION] = String(weightVersion);
  return h;
}

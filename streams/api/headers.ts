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

/**
 * Set on every record a fused process hands from one of its stages to the
 * next (group-complete, penalized): the record was processed by the next
 * stage in the same transaction that wrote it. Any reader of those topics
 * (a fused process's reader of records it did not write, a separate stage)
 * skips such records; everything else written there (an operator's redrive
 * or replay, separate stages' output) is processed. Tools that copy
 * records strip it.
 */
export const HEADER_FUSED_HANDOFF = 'rs-fused-handoff';

/** Whether a fetched record carries the fused hand-off marker. */
export function isHandedOff(headers: Record<string, unknown> | undefined): boolean {
  return headers !== undefined && headers[HEADER_FUSED_HANDOFF] !== undefined;
}

/** `headers` without the fused hand-off marker (for tools that re-publish records). */
export function withoutHandoff<T>(headers: Record<string, T>): Record<string, T> {
  if (!(HEADER_FUSED_HANDOFF in headers)) return headers;
  const { [HEADER_FUSED_HANDOFF]: _marker, ...rest } = headers;
  return rest;
}

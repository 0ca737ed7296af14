/**
 * The `_rowidx`-style stream identity of SPEC §2.2, for a producer whose
 * task rows come as one flat list per batch: groups of N consecutive rows,
 * so the i-th task row of the batch (from 0) is row `i` of group `i // N`.
 * Pure; shared by the publishers that stamp identity when asked.
 */

export interface StampedIdentity {
  group_index: number;
  row_index: number;
  num_generations: number;
}

/** The identity of the `i`-th task row of a batch of groups of `numGenerations` consecutive rows. */
export function batchIdentity(i: number, numGenerations: number): StampedIdentity {
  if (!Number.isSafeInteger(i) || i < 0) throw new RangeError(`task row position must be a non-negative integer, got ${i}`);
  if (!Number.isSafeInteger(numGenerations) || numGenerations < 1) throw new RangeError(`num_generations must be an integer >= 1, got ${numGenerations}`);
  return { group_index: Math.floor(i / numGenerations), row_index: i, num_generations: numGenerations };
}

/** Copies of `records` (one batch, in task-row order) with `batchIdentity` stamped on each; the inputs are not modified. */
export function stampBatchIdentity<T extends object>(records: readonly T[], numGenerations: number): Array<T & StampedIdentity> {
  return records.map((r, i) => ({ ...r, ...batchIdentity(i, numGenerations) }));
}

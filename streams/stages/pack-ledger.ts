/**
 * The pack ledger: which groups a pack partition has packed, so that the
 * same group reaching pack again — a dead letter redriven twice, penalized
 * records replayed into their own topic, a separate stage's output seen
 * again after a mode switch — is not packed twice (a trainer never sees two
 * records of one group). Keyed by the group's identity (batch id and group
 * id), each entry holds a digest of the packed value body; it is written to
 * a compacted changelog in the transaction that writes the packed record
 * and restored at start, like accumulate's state.
 *
 * Bounded: at most PACK_LEDGER_GROUPS groups per partition are remembered;
 * packing one more forgets the oldest (a tombstone in the changelog), so a
 * group is recognised while fewer than that many later groups were packed
 * on its partition. Memory: about 200 bytes per entry, ~20 MB per partition
 * at the bound.
 */
import { createHash } from 'node:crypto';
import type { ChangelogRecord } from '../api/stage.js';

/** Groups remembered per partition (the oldest is forgotten beyond). */
export const PACK_LEDGER_GROUPS = 100_000;

/** A group's ledger key: batch id and group id (a group id is unique within its batch). */
export function ledgerKey(batchId: string, groupId: string): string {
  return JSON.stringify([batchId, groupId]);
}

/** The digest of a packed value's body (after the 5-byte wire header, so a schema id never matters). */
export function packedDigest(body: Uint8Array): Buffer {
  return createHash('sha256').update(body).digest();
}

export type LedgerVerdict = 'new' | 'same' | 'different';

export class PackLedger {
  private readonly entries = new Map<string, Buffer>();

  constructor(private readonly limit = PACK_LEDGER_GROUPS) {}

  get size(): number {
    return this.entries.size;
  }

  /** Applies one changelog record (restore). */
  restore(r: ChangelogRecord): void {
    if (r.value === null) this.entries.delete(r.key);
    else {
      this.entries.delete(r.key);
      this.entries.set(r.key, Buffer.from(r.value));
    }
    while (this.entries.size > this.limit) this.entries.delete(this.entries.keys().next().value!);
  }

  /** Whether `key` was packed before, with the same digest or another. */
  check(key: string, digest: Buffer): LedgerVerdict {
    const had = this.entries.get(key);
    return had === undefined ? 'new' : had.equals(digest) ? 'same' : 'different';
  }

  /** Forgets `key` (its packed record was not written after all). */
  forget(key: string): void {
    this.entries.delete(key);
  }

  /** Records `key` as packed; returns the changelog records to write with it (the entry, and tombstones of what the bound forgets). */
  record(key: string, digest: Buffer): ChangelogRecord[] {
    const out: ChangelogRecord[] = [{ key, value: digest }];
    this.entries.delete(key);
    this.entries.set(key, digest);
    while (this.entries.size > this.limit) {
      const oldest = this.entries.keys().next().value!;
      this.entries.delete(oldest);
      out.push({ key: oldest, value: null });
    }
    return out;
  }
}

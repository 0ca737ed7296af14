/**
 * Where each outgoing record goes and where it landed, for every adapter's
 * sinks: a record's partition is its own, else murmur2 of its key as Java's
 * default partitioner picks it (round robin without a key); the positions of
 * an acknowledged send follow, in input order, from the base offset the
 * broker answered for each partition.
 */
import { RolloutStreamError } from '../../errors/index.js';
import { partitionForKey } from '../topics/partitioner.js';
import type { OutgoingRecord, RecordPosition } from './types.js';

/** Records without a key and without a partition are spread round robin. */
let nullKeyPartition = 0;

/**
 * The partition of `r`. A topic that is gone (deleted under a running stage)
 * is a partition the broker does not host: transient, as the clients' own
 * sends report it, so the stage retries and reports a stall.
 */
export async function placeRecord(r: OutgoingRecord, partitionsOf: (topic: string) => Promise<number>): Promise<number> {
  if (r.partition !== undefined) return r.partition;
  let count: number;
  try {
    count = await partitionsOf(r.topic);
  } catch (e) {
    if (e instanceof RolloutStreamError && e.code === 'unknown_topic') {
      throw new RolloutStreamError('partition_unavailable', `${r.topic} is not hosted by the cluster (deleted?): ${e.message}`, { cause: e, retriable: true });
    }
    throw e;
  }
  return r.key === null ? nullKeyPartition++ % count : partitionForKey(typeof r.key === 'string' ? r.key : new Uint8Array(r.key), count);
}

/**
 * Positions in input order of `placed`, from the base offset the broker
 * answered per partition (one record batch per partition and send). A
 * partition answered twice was written twice (`twice` says how), one not
 * answered has no known offset: either refuses the send as an unknown
 * outcome, so the transaction is aborted.
 */
export function positionsFrom(
  placed: ReadonlyArray<{ topic: string; partition: number }>,
  answers: ReadonlyArray<{ topic: string; partition: number; baseOffset: bigint | null }>,
  twice = '',
): RecordPosition[] {
  const base = new Map<string, bigint | null>();
  for (const a of answers) {
    const k = `${a.topic}/${a.partition}`;
    if (base.has(k)) throw new RolloutStreamError('transaction_outcome_unknown', `the records for ${k} were written twice by one send${twice}`, { retriable: true });
    base.set(k, a.baseOffset);
  }
  const next = new Map<string, bigint>();
  return placed.map((p) => {
    const k = `${p.topic}/${p.partition}`;
    const start = base.get(k);
    if (start === undefined || start === null) throw new RolloutStreamError('transaction_outcome_unknown', `the broker returned no offset for ${k}`);
    const i = next.get(k) ?? 0n;
    next.set(k, i + 1n);
    return { topic: p.topic, partition: p.partition, offset: (start + i).toString() };
  });
}

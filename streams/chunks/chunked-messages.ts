/**
 * Whole records out of a plain consumer's messages (a kafkajs `eachMessage`
 * that reads a topic from its beginning: the benchmarks' and the tests'
 * readers), one Reassembler per partition. The start is untrusted: a set
 * whose head is not there, or one that never completes, goes to `onFault`.
 */
import type { FetchedRecord } from '../kafka/types.js';
import { toFetchedRecord } from './chunked-group-source.js';
import { Reassembler, type Reassembled } from './reassembler.js';

/** What a plain consumer hands over of one message (kafkajs's `KafkaMessage` fits). */
export interface PlainMessage {
  offset: string;
  timestamp: string;
  key: Buffer | null;
  value: Buffer | null;
  headers?: Record<string, unknown>;
}

/**
 * A message handler for `topic` that calls `onRecord` with each whole record
 * (at its first chunk's offset) and `onFault` with each set that cannot be
 * read whole (by default it throws, naming it).
 */
export function reassembling(
  topic: string,
  onRecord: (r: FetchedRecord) => void | Promise<void>,
  onFault: (r: Exclude<Reassembled, { kind: 'record' }>) => void = (r) => {
    throw new Error(`${topic} ${r.partition}@${r.offset}: a chunk set that cannot be read whole (${r.kind})`);
  },
): (partition: number, m: PlainMessage) => Promise<void> {
  const sets = new Map<number, Reassembler>();
  return async (partition, m) => {
    let re = sets.get(partition);
    if (!re) sets.set(partition, (re = new Reassembler({ start: m.offset, trusted: false, maxHeldBytes: Number.MAX_SAFE_INTEGER, chunkWaitMs: Number.MAX_SAFE_INTEGER })));
    const headers: Record<string, Buffer> = {};
    for (const [k, v] of Object.entries(m.headers ?? {})) if (Buffer.isBuffer(v)) headers[k] = v;
    re.push({ topic, partition, offset: m.offset, timestamp: Number(m.timestamp), key: m.key, value: m.value, headers }, Date.now());
    for (const r of re.take()) {
      if (r.kind === 'record') await onRecord(toFetchedRecord(r));
      else if (r.kind !== 'skipped') onFault(r);
    }
  };
}

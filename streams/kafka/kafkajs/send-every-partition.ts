/**
 * An idempotent (non-transactional) kafkajs send that makes sure every
 * partition it wrote to was answered.
 *
 * kafkajs sends one request per partition leader and, on a retry, only to
 * the brokers that have not answered yet, with partitions placed on the
 * leaders it knows then. When a partition's leader moves during the retries
 * to a broker that had already answered (a broker lost on a cluster), that
 * partition's records are never sent, and the send still resolves. Seen on
 * the three-broker cluster as rows missing from row-completed (their groups
 * dead-lettered `incomplete_group`). This send looks for each partition in
 * kafkajs's answer and sends the records of any missing one again. (The
 * converse, a partition answered twice, writes its records twice: harmless
 * for rows, which accumulate drops as identical replays; it is reported.)
 */
import type { CompressionTypes, Message, Producer, RecordMetadata } from 'kafkajs';
import { RolloutStreamError } from '../../../errors/index.js';

export interface PlacedMessage extends Message {
  partition: number;
}

const ATTEMPTS = 5;

/**
 * Sends `messages` (each with its partition) to `topic` with acks=all,
 * resending the records of partitions kafkajs skipped; returns the metadata
 * of every partition written. Throws `partition_unavailable` if a partition is
 * still missing after a few rounds.
 */
export async function sendEveryPartition(
  producer: Producer,
  topic: string,
  messages: PlacedMessage[],
  compression?: CompressionTypes,
  onTwice?: (partitions: number[]) => void,
): Promise<RecordMetadata[]> {
  let pending = messages;
  const written: RecordMetadata[] = [];
  for (let round = 1; pending.length > 0; round++) {
    const meta = await producer.send({ topic, acks: -1, messages: pending, ...(compression !== undefined ? { compression } : {}) });
    const answered = new Map<number, number>();
    for (const m of meta) answered.set(m.partition, (answered.get(m.partition) ?? 0) + 1);
    const twice = [...answered].filter(([, n]) => n > 1).map(([p]) => p);
    if (twice.length > 0) onTwice?.(twice);
    written.push(...meta);
    pending = pending.filter((m) => !answered.has(m.partition));
    if (pending.length > 0) {
      const skipped = [...new Set(pending.map((m) => m.partition))];
      process.stderr.write(`${new Date().toISOString()} warn kafka: a send to ${topic} resolved without writing partitions [${skipped.join(',')}] (their leader moved during its retries); sending their ${pending.length} records again\n`);
    }
    if (pending.length > 0 && round >= ATTEMPTS) {
      const missing = [...new Set(pending.map((m) => m.partition))];
      throw new RolloutStreamError('partition_unavailable', `${topic}: partitions [${missing.join(',')}] were not written after ${round} sends`, { retriable: true });
    }
  }
  return written;
}

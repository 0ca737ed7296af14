/**
 * Reads a topic from the beginning with read_committed until a condition
 * holds. Chunk sets come out as one record at their first chunk's offset
 * (the Reassembler of streams/chunks/); a set that cannot be read whole
 * fails the read.
 */
import { randomUUID } from 'node:crypto';
import type { Kafka } from 'kafkajs';
import { reassembling } from '../../streams/chunks/chunked-messages.js';

export interface ReadRecord {
  key: string;
  value: Buffer;
  partition: number;
  offset: string;
}

/**
 * Reads `topic` (every partition, from the beginning, read_committed) until
 * `done(records)` is true, then waits `settleMs` more to catch extras (e.g.
 * duplicates) and returns everything read. Throws on timeout with what it saw.
 */
export async function readTopic(
  kafka: Kafka,
  topic: string,
  done: (records: ReadRecord[]) => boolean,
  { timeoutMs = 120_000, settleMs = 1_500 } = {},
): Promise<ReadRecord[]> {
  const consumer = kafka.consumer({ groupId: `reader.${randomUUID()}`, readUncommitted: false, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const records: ReadRecord[] = [];
  let satisfied = false;
  const onMessage = reassembling(topic, (r) => void records.push({ key: r.key?.toString() ?? '', value: Buffer.from(r.value!), partition: r.partition, offset: r.offset }));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out reading ${topic}: ${records.length} records`)), timeoutMs);
      const check = () => {
        if (!satisfied && done(records)) {
          satisfied = true;
          clearTimeout(timer);
          setTimeout(resolve, settleMs);
        }
      };
      const poll = setInterval(check, 250);
      void consumer
        .run({
          eachMessage: async ({ message, partition }) => {
            try {
              await onMessage(partition, message);
            } catch (e) {
              reject(e);
            }
          },
        })
        .catch(reject);
      void Promise.resolve().then(check);
      setTimeout(() => clearInterval(poll), timeoutMs + settleMs);
    });
  } finally {
    await consumer.disconnect();
  }
  return records;
}

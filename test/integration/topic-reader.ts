/** Reads a topic from the beginning with read_committed until a condition holds. */
import { randomUUID } from 'node:crypto';
import type { Kafka } from 'kafkajs';

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
            records.push({ key: message.key?.toString() ?? '', value: Buffer.from(message.value!), partition, offset: message.offset });
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

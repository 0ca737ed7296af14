/**
 * kafkajs can resolve a send without writing one partition (its leader moved
 * to a broker that had answered already): found on the three-broker cluster
 * as rows missing from row-completed. sendEveryPartition checks the answer and
 * sends the skipped partitions again. The producer here is a stand-in that
 * answers the way kafkajs did.
 */
import type { Producer, ProducerRecord, RecordMetadata } from 'kafkajs';
import { describe, expect, test } from 'vitest';
import { RolloutStreamError } from '../../../errors/index.js';
import { sendEveryPartition } from '../../../streams/kafka/kafkajs/send-every-partition.js';

/** Answers each send with `answer(partitions sent, call number)`; records what was sent. */
function producerAnswering(answer: (partitions: number[], call: number) => number[]) {
  const sent: number[][] = [];
  const producer = {
    send: async (r: ProducerRecord): Promise<RecordMetadata[]> => {
      const parts = [...new Set(r.messages.map((m) => m.partition!))];
      sent.push(r.messages.map((m) => m.partition!));
      return answer(parts, sent.length).map((partition) => ({ topicName: r.topic, partition, errorCode: 0, baseOffset: '0' }));
    },
  } as unknown as Producer;
  return { producer, sent };
}

const messages = [0, 1, 1, 2].map((partition, i) => ({ key: `k${i}`, value: Buffer.from(String(i)), partition }));

describe('sendEveryPartition', () => {
  test('a partition kafkajs did not answer is sent again, alone', async () => {
    const { producer, sent } = producerAnswering((parts, call) => (call === 1 ? parts.filter((p) => p !== 1) : parts));
    const meta = await sendEveryPartition(producer, 't', messages);
    expect(sent).toEqual([[0, 1, 1, 2], [1, 1]]);
    expect(meta.map((m) => m.partition).sort()).toEqual([0, 1, 2]);
  });

  test('a partition that never gets written fails the send after a few rounds', async () => {
    const { producer, sent } = producerAnswering((parts) => parts.filter((p) => p !== 2));
    const err = await sendEveryPartition(producer, 't', messages).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RolloutStreamError);
    expect((err as Error).message).toMatch(/t: partitions \[2\] were not written after 5 sends/);
    expect(sent.length).toBe(5);
  });

  test('a partition answered twice is reported', async () => {
    const { producer } = producerAnswering((parts) => [...parts, 1]);
    const twice: number[][] = [];
    await sendEveryPartition(producer, 't', messages, undefined, (p) => twice.push(p));
    expect(twice).toEqual([[1]]);
  });
});

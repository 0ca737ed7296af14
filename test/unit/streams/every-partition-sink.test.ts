/**
 * The edge's idempotent sink (OpsClient.idempotentSink over kafkajs): every
 * partition a send wrote to is looked for in kafkajs's answer and the
 * records of a skipped one go again; positions come back in input order.
 * The kafkajs client here is a stand-in answering the way kafkajs does.
 */
import type { Kafka, ProducerRecord, RecordMetadata } from 'kafkajs';
import { describe, expect, test } from 'vitest';
import { KafkajsEveryPartitionSink } from '../../../streams/kafka/kafkajs/sink.js';
import { partitionForKey } from '../../../streams/topics/partitioner.js';

/** A kafkajs stand-in: each send is answered by `answer(partitions sent, call)`, offsets counting per topic-partition. */
function kafkaAnswering(answer: (partitions: number[], call: number) => number[] = (p) => p, partitions = 4) {
  const sends: ProducerRecord[] = [];
  const metadataAsked: string[] = [];
  const logEnd = new Map<string, number>();
  const producer = {
    connect: async () => undefined,
    disconnect: async () => undefined,
    send: async (r: ProducerRecord): Promise<RecordMetadata[]> => {
      sends.push(r);
      const parts = [...new Set(r.messages.map((m) => m.partition!))];
      return answer(parts, sends.length).map((partition) => {
        const k = `${r.topic}/${partition}`;
        const base = logEnd.get(k) ?? 0;
        logEnd.set(k, base + r.messages.filter((m) => m.partition === partition).length);
        return { topicName: r.topic, partition, errorCode: 0, baseOffset: String(base) };
      });
    },
  };
  const admin = {
    connect: async () => undefined,
    disconnect: async () => undefined,
    fetchTopicMetadata: async ({ topics }: { topics: string[] }) => {
      metadataAsked.push(...topics);
      return { topics: topics.map((name) => ({ name, partitions: Array.from({ length: partitions }, (_, partitionId) => ({ partitionId, leader: 1 })) })) };
    },
  };
  const kafka = { producer: () => producer, admin: () => admin } as unknown as Kafka;
  return { kafka, sends, metadataAsked };
}

describe('the every-partition idempotent sink', () => {
  test('positions come back in input order, per topic and partition, with acks=all and the chosen compression', async () => {
    const { kafka, sends } = kafkaAnswering();
    const sink = await KafkajsEveryPartitionSink.connect(kafka, { compression: 'gzip' });
    const pos = await sink.send([
      { topic: 'a', partition: 1, key: 'x', value: Buffer.from('1') },
      { topic: 'b', partition: 0, key: 'y', value: Buffer.from('2') },
      { topic: 'a', partition: 1, key: 'z', value: Buffer.from('3') },
      { topic: 'a', partition: 0, key: 'w', value: Buffer.from('4') },
    ]);
    expect(pos).toEqual([
      { topic: 'a', partition: 1, offset: '0' },
      { topic: 'b', partition: 0, offset: '0' },
      { topic: 'a', partition: 1, offset: '1' },
      { topic: 'a', partition: 0, offset: '0' },
    ]);
    expect(sends.map((s) => [s.topic, s.acks, s.compression])).toEqual([
      ['a', -1, 1],
      ['b', -1, 1],
    ]);
  });

  test('the records of a partition kafkajs skipped are sent again, and their positions are those of the second answer', async () => {
    const { kafka, sends } = kafkaAnswering((parts, call) => (call === 1 ? parts.filter((p) => p !== 2) : parts));
    const sink = await KafkajsEveryPartitionSink.connect(kafka);
    const pos = await sink.send([0, 2, 2, 3].map((partition, i) => ({ topic: 't', partition, key: `k${i}`, value: Buffer.from(String(i)) })));
    expect(sends.map((s) => s.messages.map((m) => m.partition))).toEqual([[0, 2, 2, 3], [2, 2]]);
    expect(pos.map((p) => `${p.partition}@${p.offset}`)).toEqual(['0@0', '2@0', '2@1', '3@0']);
  });

  test('a partition that never gets written fails the send with partition_unavailable', async () => {
    const { kafka, sends } = kafkaAnswering((parts) => parts.filter((p) => p !== 1));
    const sink = await KafkajsEveryPartitionSink.connect(kafka);
    const err = await sink.send([{ topic: 't', partition: 1, key: 'k', value: Buffer.from('v') }]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'partition_unavailable' });
    expect(sends.length).toBe(5);
  });

  test('a record without a partition is placed by murmur2 of its key, the partition count read once per topic', async () => {
    const { kafka, sends, metadataAsked } = kafkaAnswering(undefined, 6);
    const sink = await KafkajsEveryPartitionSink.connect(kafka);
    const keys = ['g1', 'g2', 'g3'];
    await sink.send(keys.map((key) => ({ topic: 't', key, value: Buffer.from(key) })));
    await sink.send([{ topic: 't', key: Buffer.from('g1'), value: Buffer.from('again') }]);
    expect(sends[0]!.messages.map((m) => m.partition)).toEqual(keys.map((k) => partitionForKey(k, 6)));
    expect(sends[1]!.messages[0]!.partition).toBe(partitionForKey('g1', 6));
    expect(metadataAsked).toEqual(['t']);
    await sink.close();
  });
});

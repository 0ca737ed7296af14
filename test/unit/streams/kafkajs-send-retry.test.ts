/**
 * kafkajs's send retries while requests of the failed attempt are still in
 * flight, and sends their records again with new sequence numbers (issue 14,
 * streams/kafka/kafkajs/send-retry.ts). kafkajs's own sendMessages is driven
 * here over a fake two-leader cluster whose broker keeps a log per partition
 * and drops a batch whose sequence numbers it has seen, as Kafka does:
 * AddPartitionsToTxn for one leader fails fast (CONCURRENT_TRANSACTIONS, as
 * just after a commit) while the produce to the other leader is on its way.
 */
import { createRequire } from 'node:module';
import { describe, expect, test } from 'vitest';
import { kafkaSendRetryPatched } from '../../../streams/kafka/kafkajs/speedups.js';
import { compileSendMessages, type SendMessagesFactory } from '../../../streams/kafka/kafkajs/send-retry.js';

const require = createRequire(import.meta.url);
const createRetry = require('kafkajs/src/retry/index.js') as (o: object) => unknown;
const { KafkaJSProtocolError } = require('kafkajs/src/errors.js') as { KafkaJSProtocolError: new (e: object) => Error };
const Lock = require('kafkajs/src/utils/lock.js') as new (o: object) => { acquire(): Promise<void>; release(): Promise<void> };

const TOPIC = 't';
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Batch {
  partition: number;
  firstSequence: number;
  values: string[];
}

/** One send of 2 records to partition 0 (led by node 1) and 1 to partition 1 (node 3). */
async function sendOnce(factory: SendMessagesFactory) {
  const leaders: Record<number, number> = { 0: 1, 1: 3 };
  const logs = new Map<number, Batch[]>();
  const produce = (nodeId: number) => async ({ topicData }: { topicData: Array<{ topic: string; partitions: Array<{ partition: number; firstSequence: number; messages: Array<{ value: string }> }> }> }) => {
    await sleep(20); // acks=all: the answer comes after the replicas took it
    const partitions = topicData[0]!.partitions.map(({ partition, firstSequence, messages }) => {
      const log = logs.get(partition) ?? logs.set(partition, []).get(partition)!;
      const seen = log.findIndex((b) => b.firstSequence === firstSequence);
      if (seen < 0) log.push({ partition, firstSequence, values: messages.map((m) => m.value) });
      const at = seen < 0 ? log.length - 1 : seen;
      const baseOffset = log.slice(0, at).reduce((n, b) => n + b.values.length, 0);
      return { partition, errorCode: 0, baseOffset: String(baseOffset) };
    });
    return { topics: [{ topicName: TOPIC, partitions }], throttleTime: 0, nodeId };
  };
  const brokers = new Map([1, 3].map((nodeId) => [nodeId, { nodeId, produce: produce(nodeId) }]));
  const cluster = {
    targetTopics: new Set<string>(),
    addMultipleTargetTopics: async () => {},
    refreshMetadataIfNecessary: async () => {},
    refreshMetadata: async () => {},
    isConnected: () => true,
    removeBroker: () => {},
    findTopicPartitionMetadata: () => Object.entries(leaders).map(([p, leader]) => ({ partitionId: Number(p), leader, partitionErrorCode: 0 })),
    findLeaderForPartitions: (_: string, partitions: string[]) => {
      const out: Record<number, number[]> = {};
      for (const p of partitions) (out[leaders[Number(p)]!] ??= []).push(Number(p));
      return out;
    },
    findBroker: async ({ nodeId }: { nodeId: string }) => brokers.get(Number(nodeId)),
  };
  const sequences = new Map<number, number>();
  const locks = new Map<number, InstanceType<typeof Lock>>();
  const added = new Set<number>();
  let concurrentOnce = true;
  const eosManager = {
    isTransactional: () => true,
    getTransactionalId: () => 'tx',
    getProducerId: () => 8,
    getProducerEpoch: () => 0,
    getSequence: (_: string, p: number) => sequences.get(p) ?? 0,
    updateSequence: (_: string, p: number, n: number) => sequences.set(p, (sequences.get(p) ?? 0) + n),
    acquireBrokerLock: async (b: { nodeId: number }) => (locks.get(b.nodeId) ?? locks.set(b.nodeId, new Lock({ timeout: 0xffff })).get(b.nodeId)!).acquire(),
    releaseBrokerLock: async (b: { nodeId: number }) => locks.get(b.nodeId)!.release(),
    addPartitionsToTransaction: async (topicData: Array<{ partitions: Array<{ partition: number }> }>) => {
      const partitions = topicData.flatMap((t) => t.partitions.map((p) => p.partition)).filter((p) => !added.has(p));
      if (partitions.includes(1) && concurrentOnce) {
        concurrentOnce = false;
        throw new KafkaJSProtocolError({ type: 'CONCURRENT_TRANSACTIONS', code: 51, retriable: true, message: 'concurrent operation on the same transaction' });
      }
      await sleep(5);
      for (const p of partitions) added.add(p);
    },
  };
  const send = factory({ logger: quiet, cluster, partitioner: ({ message }: { message: { partition: number } }) => message.partition, eosManager, retrier: createRetry({ initialRetryTime: 5, retries: 5 }) });
  const answer = (await send({
    acks: -1,
    timeout: 30_000,
    topicMessages: [{ topic: TOPIC, messages: [{ value: 'a', partition: 0 }, { value: 'b', partition: 0 }, { value: 'c', partition: 1 }] }],
  })) as Array<{ partition: number; baseOffset: string }>;
  return { answer: answer.map((a) => `${a.partition}@${a.baseOffset}`).sort(), logs };
}

describe("kafkajs's send retry and the requests still in flight", () => {
  test('is patched (fails when a kafkajs upgrade changes the module it replaces)', () => {
    expect(kafkaSendRetryPatched).toBe(true);
    // What kafkajs's producer loads: the module with the retry awaiting every request.
    expect(String(require('kafkajs/src/producer/sendMessages.js'))).toContain('Promise.allSettled(requests)');
  });

  test('as published, the retry writes the in-flight partition again with new sequences, and the answer names it once', async () => {
    const { answer, logs } = await sendOnce(compileSendMessages(false)!.factory);
    expect(logs.get(0)!.map((b) => `${b.firstSequence}:${b.values.join('')}`)).toEqual(['0:ab', '2:ab']);
    expect(answer).toEqual(['0@2', '1@0']); // nothing for the sink to notice
  });

  test('patched, the retry waits for that request and sends only what failed: every record once', async () => {
    const { answer, logs } = await sendOnce(require('kafkajs/src/producer/sendMessages.js') as SendMessagesFactory);
    expect(logs.get(0)!.map((b) => `${b.firstSequence}:${b.values.join('')}`)).toEqual(['0:ab']);
    expect(logs.get(1)!.map((b) => `${b.firstSequence}:${b.values.join('')}`)).toEqual(['0:c']);
    expect(answer).toEqual(['0@0', '1@0']);
  });
});

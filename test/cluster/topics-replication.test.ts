import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Admin, Kafka } from 'kafkajs';
import { loadConfig } from '../../config/load.js';
import { createKafka } from '../../streams/kafka/kafkajs/client.js';
import { topicNames } from '../../streams/topics/names.js';
import { launcher } from '../integration/launcher.js';
import { deleteTopicsWithPrefix } from './cluster.js';

let kafka: Kafka;
let admin: Admin;
const TOPIC_RESOURCE = 2; // kafkajs ConfigResourceTypes.TOPIC

beforeAll(async () => {
  kafka = createKafka(loadConfig({ file: undefined }).config.kafka, 'cluster-topics-test');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await deleteTopicsWithPrefix(admin, 'cl.topics.').catch(() => undefined);
  await admin?.disconnect();
});

async function minIsrOf(topics: string[]): Promise<Record<string, string>> {
  const r = await admin.describeConfigs({
    includeSynonyms: false,
    resources: topics.map((name) => ({ type: TOPIC_RESOURCE, name, configNames: ['min.insync.replicas'] })),
  });
  return Object.fromEntries(r.resources.map((res) => [res.resourceName, res.configEntries[0]?.configValue ?? '?']));
}

async function replicasOf(topics: string[]): Promise<Record<string, number[]>> {
  const { topics: meta } = await admin.fetchTopicMetadata({ topics });
  return Object.fromEntries(meta.map((t) => [t.name, [...new Set(t.partitions.map((p) => p.replicas.length))]]));
}

function configFile(content: unknown): string {
  const path = join(tmpdir(), `rs-cluster-${randomUUID()}.json`);
  writeFileSync(path, JSON.stringify(content));
  return path;
}

describe('topics on a three-broker cluster', () => {
  test('topics create, unconfigured, replicates every topic 3 times with min.insync.replicas 2', async () => {
    const prefix = `cl.topics.${randomUUID().slice(0, 8)}.`;
    const r = await launcher(['topics', 'create', '--prefix', prefix]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/replicas 3, min\.insync\.replicas 2 \(decided from the cluster's 3 broker\(s\)\)/);
    const names = Object.values(topicNames(prefix));
    expect(Object.values(await replicasOf(names))).toEqual(names.map(() => [3]));
    expect(Object.values(await minIsrOf(names))).toEqual(names.map(() => '2'));
  });

  test('explicit topics.replication_factor 2 and min_insync_replicas 2 are used as given', async () => {
    const prefix = `cl.topics.${randomUUID().slice(0, 8)}.`;
    const r = await launcher(['topics', 'create', '--prefix', prefix, '--config', configFile({ topics: { replication_factor: 2, min_insync_replicas: 2 } })]);
    expect(r.code, r.stderr).toBe(0);
    const names = Object.values(topicNames(prefix));
    expect(Object.values(await replicasOf(names))).toEqual(names.map(() => [2]));
    expect(Object.values(await minIsrOf(names))).toEqual(names.map(() => '2'));
  });

  test('a replication factor the cluster cannot give stops topics create with an error naming the key, creating nothing', async () => {
    const prefix = `cl.topics.${randomUUID().slice(0, 8)}.`;
    const r = await launcher(['topics', 'create', '--prefix', prefix, '--config', configFile({ topics: { replication_factor: 4 } })]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/topics\.replication_factor: 4 replicas requested but the cluster has 3 live broker\(s\)/);
    expect((await admin.listTopics()).filter((t) => t.startsWith(prefix))).toEqual([]);
  });

  test('the internal offsets and transaction-state topics are replicated 3 times with min.insync.replicas 2', async () => {
    // A transaction and a consumer group make sure both internal topics exist.
    const topic = `cl.internal.${randomUUID().slice(0, 8)}`;
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }] });
    const producer = kafka.producer({ transactionalId: `${topic}.tx`, idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const tx = await producer.transaction();
    await tx.send({ topic, messages: [{ key: 'k', value: 'v' }] });
    await tx.commit();
    await producer.disconnect();
    const consumer = kafka.consumer({ groupId: `${topic}.reader` });
    await consumer.connect();
    await consumer.disconnect();
    const internal = ['__consumer_offsets', '__transaction_state'];
    expect(await replicasOf(internal)).toEqual({ __consumer_offsets: [3], __transaction_state: [3] });
    expect(await minIsrOf(internal)).toEqual({ __consumer_offsets: '2', __transaction_state: '2' });
    await admin.deleteTopics({ topics: [topic] });
  });
});

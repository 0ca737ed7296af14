import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Admin } from 'kafkajs';
import { loadConfig } from '../../config/load.js';
import { createKafka } from '../../streams/kafka/kafkajs/client.js';
import { topicNames } from '../../streams/topics/names.js';
import { launcher } from './launcher.js';

// On the single local broker (the three-broker side is test/cluster/topics-replication.test.ts).
let admin: Admin;
beforeAll(async () => {
  admin = createKafka(loadConfig({ file: undefined }).config.kafka, 'topics-replication-test').admin();
  await admin.connect();
});
afterAll(async () => admin?.disconnect());

describe('topics create on one broker', () => {
  test('unconfigured, it follows the brokers: on one broker one replica and min.insync.replicas 1', async () => {
    // RS_BROKERS=3 runs this tier on the local cluster: the same rule gives 3 and 2 there.
    const n = (await admin.describeCluster()).brokers.length;
    const rf = Math.min(3, n);
    const isr = rf >= 3 ? 2 : 1;
    const prefix = `it.topics-rf.${randomUUID().slice(0, 8)}.`;
    const r = await launcher(['topics', 'create', '--prefix', prefix]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`replicas ${rf}, min.insync.replicas ${isr} (decided from the cluster's ${n} broker(s))`);
    const { topics } = await admin.fetchTopicMetadata({ topics: Object.values(topicNames(prefix)) });
    expect(new Set(topics.flatMap((t) => t.partitions.map((p) => p.replicas.length)))).toEqual(new Set([rf]));
  });

  test('more replicas than brokers stops topics create with an error naming the key', async () => {
    const { brokers } = await admin.describeCluster();
    const path = join(tmpdir(), `rs-rf-${randomUUID()}.json`);
    writeFileSync(path, JSON.stringify({ topics: { replication_factor: brokers.length + 1 } }));
    const r = await launcher(['topics', 'create', '--prefix', `it.topics-rf.${randomUUID().slice(0, 8)}.`, '--config', path]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(new RegExp(`topics\\.replication_factor: ${brokers.length + 1} replicas requested but the cluster has ${brokers.length} live broker\\(s\\)`));
  });
});

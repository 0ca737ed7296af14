/** The kafkajs KafkaAdmin against the real broker: partition counts, offsets, committed offsets, time lookups. */
import { afterEach, describe, expect, test } from 'vitest';
import { KafkajsAdmin } from '../../streams/kafka/kafkajs/admin.js';
import { KafkajsTransactionalSink } from '../../streams/kafka/kafkajs/sink.js';
import { topicNames } from '../../streams/topics/names.js';
import { testEnv, type TestEnv } from './helpers.js';

let env: TestEnv | undefined;
let admin: KafkajsAdmin | undefined;
afterEach(async () => {
  await admin?.close();
  await env?.close();
  env = admin = undefined;
});

describe('kafkajs admin', () => {
  test('answers the runtime\'s cluster questions', async () => {
    env = await testEnv('admin');
    const e = env;
    admin = await KafkajsAdmin.connect(e.kafka);
    const topic = topicNames(e.prefix).metrics;
    expect(await admin.partitionCount(topic)).toBe(4);
    await expect(admin.partitionCount(`${e.prefix}no-such-topic`)).rejects.toMatchObject({ code: 'unknown_topic' });
    expect(await admin.brokerCount()).toBeGreaterThanOrEqual(1);

    const before = Date.now();
    const sink = new KafkajsTransactionalSink(e.kafka, `${e.prefix}admin-tx`, 30_000, { partitionsOf: (t) => admin!.partitionCount(t) });
    await sink.init();
    await sink.begin();
    await sink.send([0, 1, 2].map((i) => ({ topic, partition: 1, key: `k${i}`, value: Buffer.from('v') })));
    expect((await admin.committedOffsets('admin-test-group', topic)).size).toBe(0);
    await sink.sendOffsets('admin-test-group', [{ topic, partition: 1, offset: '2' }]);
    await sink.commit();
    await sink.close();

    const offsets = await admin.topicOffsets(topic);
    expect(offsets.map((o) => o.partition)).toEqual([0, 1, 2, 3]);
    // Three records and the commit marker.
    expect(offsets[1]).toMatchObject({ low: '0', high: '4' });
    expect(await admin.committedOffsets('admin-test-group', topic)).toEqual(new Map([[1, '2']]));
    const atTime = await admin.offsetsForTime(topic, before - 1000);
    expect(atTime.get(1)).toBe('0');
  });
});

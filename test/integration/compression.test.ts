import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generateEvents, type ProfileName } from '../../loadgen/index.js';
import type { RolloutRow } from '../../processors/types.js';
import { AvroBodyCodec, TopicCodec } from '../../streams/codecs/codec.js';
import { COMPRESSION_NAMES, compressionType, registerCompressionCodecs, type CompressionName } from '../../streams/kafka/kafkajs/compression.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { countingDecompressions, testEnv, type TestEnv } from './helpers.js';
import { readTopic } from './topic-reader.js';

let env: TestEnv;

beforeAll(async () => {
  registerCompressionCodecs();
  env = await testEnv('compression');
});

afterAll(async () => {
  await env?.close();
});

function rows(profile: ProfileName, generations: number): RolloutRow[] {
  const out: RolloutRow[] = [];
  for (const e of generateEvents({ batches: 1, groupsPerBatch: 1, generations, seed: 7, profile, runId: `${env.prefix}lg` })) {
    if (e.kind === 'row') out.push(e.row);
  }
  return out;
}

async function produce(topic: string, name: CompressionName, messages: Array<{ key: string; value: Buffer }>): Promise<void> {
  const producer = env.kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  await producer.connect();
  try {
    await producer.send({ topic, acks: -1, compression: compressionType(name), messages });
  } finally {
    await producer.disconnect();
  }
}

describe('compressed record batches on the real broker', () => {
  test('a router-replay row sent with the default codec, and with zstd, comes back byte-equal and decodes to the same row', async () => {
    const topic = topicNames(env.prefix).rowCompleted;
    const codec = await new TopicCodec('rowCompleted', subjectOf(topic), env.registry).init();
    // The largest of a few rows: a MoE row with routes [48, 8] int8 is megabytes.
    const row = rows('router-replay', 4).reduce((a, b) => (codec.encode({ kind: 'row', row: b }).length > codec.encode({ kind: 'row', row: a }).length ? b : a));
    const value = codec.encode({ kind: 'row', row });
    expect(value.length).toBeGreaterThan(100_000);

    // The default, and zstd: the codec bench/README.md recommends where bytes cost more than CPU.
    const names = [...new Set<CompressionName>([env.config.kafka.compression, 'zstd'])];
    for (const [i, name] of names.entries()) {
      await produce(topic, name, [{ key: row.group_id, value }]);
      const { result: read, batches } = await countingDecompressions(name, () =>
        readTopic(env.kafka, topic, (rs) => rs.length >= i + 1, { settleMs: 300 }),
      );
      expect(read, name).toHaveLength(i + 1);
      const last = read[i]!.value;
      expect(last.equals(value), name).toBe(true);
      // Re-encoding what was decoded gives the sent bytes back (a deep toEqual on megabytes of typed arrays takes seconds).
      const decoded = await codec.decode(last);
      expect(decoded.kind === 'row' && decoded.row.group_id === row.group_id && decoded.row.row_index === row.row_index).toBe(true);
      expect(codec.encode(decoded).equals(value)).toBe(true);
      if (name !== 'none') expect(batches, name).toBeGreaterThanOrEqual(1);
    }
  });

  test('the broker accepts and returns batches of every codec, each read back byte-equal', async () => {
    const body = new AvroBodyCodec('rowCompleted');
    const messages = rows('published-max', 4).map((row) => ({ key: row.group_id, value: body.encodeBody({ kind: 'row', row }) }));
    const topics = COMPRESSION_NAMES.map((name) => ({ name, topic: `${env.prefix}compression.${name}` }));
    await env.admin.createTopics({
      waitForLeaders: true,
      topics: topics.map(({ topic }) => ({ topic, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: String(env.config.kafka.max_message_bytes) }] })),
    });
    for (const { name, topic } of topics) {
      await produce(topic, name, messages);
      const { result: read, batches } = await countingDecompressions(name, () =>
        readTopic(env.kafka, topic, (rs) => rs.length >= messages.length, { settleMs: 300 }),
      );
      expect(read.map((r) => r.key), name).toEqual(messages.map((m) => m.key));
      read.forEach((r, i) => expect(r.value.equals(messages[i]!.value), `${name} record ${i}`).toBe(true));
      if (name !== 'none') expect(batches, name).toBeGreaterThanOrEqual(1);
    }
  });
});

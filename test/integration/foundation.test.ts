import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RecordKind } from '../../schemas/index.js';
import { avroSchema } from '../../schemas/index.js';
import { TopicCodec, type RecordTypes } from '../../streams/codecs/codec.js';
import { RegistryError } from '../../streams/codecs/schema-registry.js';
import { subjectOf, topicNames, type TopicRole } from '../../streams/topics/names.js';
import { createTopics } from '../../streams/topics/create.js';
import { UndecodableError } from '../../streams/codecs/wire-format.js';
import {
  sampleDeadLetter,
  sampleGroup,
  sampleMetrics,
  samplePacked,
  samplePenalized,
  sampleRow,
} from '../fixtures/records.js';
import { partitionSizes } from '../../bench/log-sizes.js';
import { synthesizeGroup } from '../../bench/synthetic-groups.js';
import { configSchema } from '../../config/schema.js';
import { packGroup } from '../../processors/pack.js';
import { SlabPool } from '../../processors/slab.js';
import { AvroBodyCodec } from '../../streams/codecs/codec.js';
import { countingDecompressions, testEnv, type TestEnv } from './helpers.js';

let env: TestEnv;

beforeAll(async () => {
  env = await testEnv('foundation');
});

afterAll(async () => {
  await env?.close();
});

/** Produces values to a topic and reads them back with read_committed from the beginning. */
async function roundTrip(topic: string, values: Buffer[]): Promise<Buffer[]> {
  const producer = env.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  await producer.send({ topic, messages: values.map((value) => ({ key: 'g-1', value })) });
  await producer.disconnect();
  const consumer = env.kafka.consumer({ groupId: `${env.prefix}rt-${topic}`, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out reading ${topic}`)), 60_000);
    void consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value!);
        if (got.length === values.length) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await consumer.disconnect();
  return got;
}

describe('topics and codecs on the real broker and registry', () => {
  test('topics create makes every topic with its size limit and is idempotent', async () => {
    const names = topicNames(env.prefix);
    const listed = new Set(await env.admin.listTopics());
    for (const t of Object.values(names)) expect(listed.has(t)).toBe(true);
    const again = await createTopics(env.opsAdmin, env.registry, env.config);
    expect(again.created).toEqual([]);
    expect(again.differing).toEqual([]);
    const described = await env.admin.describeConfigs({
      includeSynonyms: false,
      resources: [
        { type: 2, name: names.packed, configNames: ['max.message.bytes', 'cleanup.policy', 'compression.type'] },
        { type: 2, name: names.accumulateChangelog, configNames: ['cleanup.policy'] },
      ],
    });
    const entries = described.resources.map((r) =>
      Object.fromEntries(r.configEntries.map((e) => [e.configName, e.configValue])),
    );
    expect(entries[0]).toEqual({ 'max.message.bytes': String(env.config.kafka.max_message_bytes), 'cleanup.policy': 'delete', 'compression.type': 'zstd' });
    expect(entries[1]).toEqual({ 'cleanup.policy': 'compact' });
  });

  test('the broker stores rollout.packed zstd-compressed: trainer-wire values take under half their bytes on disk, and read back equal', async () => {
    const topic = topicNames(env.prefix).packed;
    const codec = new AvroBodyCodec('packed', { packedWire: 'trainer' });
    const cfg = configSchema.parse({}).pack;
    const pool = new SlabPool();
    const synth = { rows: 4, minTokens: 2048, maxTokens: 8192, routes: null, media: false } as const;
    // Sent uncompressed, as the pack stage sends them by default (kafka.compression: none).
    const values = Array.from({ length: 6 }, (_, i) => Buffer.from(codec.packFramed((m) => packGroup(synthesizeGroup(7, i, synth), cfg, m), 1, pool)));
    const sent = values.reduce((n, v) => n + v.length, 0);
    const { result: back, batches } = await countingDecompressions('zstd', () => roundTrip(topic, values));
    expect(back.map((b, i) => b.equals(values[i]!))).toEqual(values.map(() => true));
    expect(batches, 'batches the consumer decompressed with zstd').toBeGreaterThan(0);
    const sizes = await partitionSizes(env.admin, env.config.kafka.brokers.join(','), [topic]);
    const stored = [...sizes.get(topic)!.values()].reduce((n, b) => n + b, 0);
    expect(stored / sent, `${stored} bytes on disk for ${sent} bytes sent`).toBeLessThan(0.5);
  });

  test('topics create leaves an existing topic as it is and reports a config that differs from what it would set now', async () => {
    const before = await testEnv('foundation-drift', [[['topics', 'packed_compression'], 'none']]);
    try {
      const packed = topicNames(before.prefix).packed;
      const now = configSchema.parse({ ...before.config, topics: { ...before.config.topics, packed_compression: 'zstd' } });
      const r = await createTopics(before.opsAdmin, before.registry, now);
      expect(r.created).toEqual([]);
      expect(r.differing).toEqual([{ topic: packed, name: 'compression.type', actual: 'uncompressed', wanted: 'zstd' }]);
      expect((await before.opsAdmin.topicConfigs([packed], ['compression.type'])).get(packed)).toEqual({ 'compression.type': 'uncompressed' });
    } finally {
      await before.close();
    }
  });

  const cases: Array<[TopicRole & RecordKind, () => RecordTypes[RecordKind]]> = [
    ['rowCompleted', () => ({ kind: 'row', row: sampleRow(1) })],
    ['groupComplete', sampleGroup],
    ['penalized', samplePenalized],
    ['packed', samplePacked],
    ['deadLetter', sampleDeadLetter],
    ['metrics', sampleMetrics],
  ];

  test.each(cases)('a %s record goes through the broker and comes back equal', async (role, make) => {
    const topic = topicNames(env.prefix)[role];
    const codec = await new TopicCodec(role, subjectOf(topic), env.registry).init();
    const value = make();
    const [bytes] = await roundTrip(topic, [codec.encode(value as never)]);
    expect(bytes!.readInt32BE(1)).toBe(codec.schemaId);
    // A second codec with an empty cache fetches the writer schema by id.
    const reader = new TopicCodec(role, subjectOf(topic), env.registry);
    expect(await reader.decode(bytes!)).toEqual(value);
  });

  test('a value framed with a schema id the registry does not know is undecodable', async () => {
    const topic = topicNames(env.prefix).metrics;
    const codec = new TopicCodec('metrics', subjectOf(topic), env.registry);
    const bogus = Buffer.from([0, 0x7f, 0xff, 0xff, 0xf0, 0x02]);
    await expect(codec.decode(bogus)).rejects.toThrow(UndecodableError);
  });

  test('a schema change that breaks BACKWARD compatibility is refused by the registry', async () => {
    const subject = `${env.prefix}compat-check-value`;
    const base = avroSchema('metrics') as { fields: object[] };
    await env.registry.register(subject, base);
    const compatible = { ...base, fields: [...base.fields, { name: 'host', type: ['null', 'string'], default: null }] };
    await expect(env.registry.register(subject, compatible)).resolves.toBeGreaterThan(0);
    const breaking = { ...compatible, fields: [...compatible.fields, { name: 'required_new', type: 'string' }] };
    await expect(env.registry.register(subject, breaking)).rejects.toThrow(RegistryError);
  });
});

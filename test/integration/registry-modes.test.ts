/**
 * The registry as a managed-Kafka user meets it: both URL forms (Apicurio's
 * compatibility path, with or without a trailing slash, and a registry
 * served at its root as Confluent Schema Registry is, with basic auth from
 * the config or the URL's user-info), and read-only use (`kafka.register_schemas: false`, for
 * clients without write rights): a stage looks its topics' ids up and
 * reads and writes with them; a schema the registry does not hold stops
 * start-up with an error naming the subject.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../config/load.js';
import { generateEvents } from '../../loadgen/index.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { createRegistry } from '../../streams/codecs/schema-registry.js';
import { startPipeline, type RunningPipeline } from '../../streams/runtime/pipeline.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { avroSchema } from '../../schemas/index.js';
import { RowProducer } from '../../tools/row-producer.js';
import { testEnv, type TestEnv } from './helpers.js';
import { readTopic } from './topic-reader.js';
import { startRegistryProxy } from './registry-proxy.js';
import { createTopics } from '../../streams/topics/create.js';

const quiet = { info: () => undefined, warn: () => undefined, error: (m: string) => console.error(m) };

describe('registry URL forms and read-only schemas', () => {
  let env: TestEnv;
  let pipeline: RunningPipeline | undefined;
  let rootPipeline: RunningPipeline | undefined;

  beforeAll(async () => {
    env = await testEnv('registry-ro', [[['accumulate', 'batch_end_grace_ms'], 300], [['runtime', 'metrics_port'], 0]]);
  });
  afterAll(async () => {
    await pipeline?.stop();
    await rootPipeline?.stop();
    await env?.close();
  });

  test('the URL with and without a trailing slash gives the same ids', async () => {
    const subject = subjectOf(topicNames(env.prefix).packed);
    const base = env.config.kafka.schema_registry_url.replace(/\/+$/, '');
    const schema = avroSchema('packed');
    const a = await createRegistry({ ...env.config.kafka, schema_registry_url: base }).register(subject, schema);
    const b = await createRegistry({ ...env.config.kafka, schema_registry_url: `${base}/` }).register(subject, schema);
    expect(b).toBe(a);
  });

  test('a registry at its root (Confluent form): topics create, a pipeline and decoding through http://host:port', async () => {
    const proxy = await startRegistryProxy(env.config.kafka.schema_registry_url);
    try {
      const prefix = `${env.prefix}root.`;
      const { config } = loadConfig({
        env: { ...process.env, SCHEMA_REGISTRY_URL: proxy.url },
        overrides: [
          [['topics', 'prefix'], prefix],
          [['accumulate', 'batch_end_grace_ms'], 300],
          [['runtime', 'metrics_port'], 0],
        ],
      });
      expect(config.kafka.schema_registry_url.replace(/\/+$/, '')).toBe(proxy.url);
      const names = topicNames(prefix);
      const created = await createTopics(env.opsAdmin, createRegistry(config.kafka), config);
      // The same registry answers both forms: the ids are the ones the compatibility path gives.
      expect(await env.registry.register(subjectOf(names.packed), avroSchema('packed'))).toBe(created.schemaIds[subjectOf(names.packed)]);
      expect(await env.registry.register(subjectOf(names.rowCompleted), avroSchema('rowCompleted'))).toBe(created.schemaIds[subjectOf(names.rowCompleted)]);
      rootPipeline = await startPipeline({ config, configDir: process.cwd(), stages: ['accumulate', 'postprocess', 'pack'], log: quiet });
      const events = [...generateEvents({ batches: 1, groupsPerBatch: 3, generations: 4, seed: 5, profile: 'small', runId: `${prefix}run` })];
      const producer = new RowProducer({ kafka: env.ops, topic: names.rowCompleted, codec: await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), createRegistry(config.kafka)).init() });
      await producer.connect();
      await producer.send(events);
      await producer.disconnect();
      const packed = await readTopic(env.kafka, names.packed, (rs) => rs.length >= 3);
      expect(packed.length).toBe(3);
      // A fresh client (nothing cached) fetches the writer schema by id through the root URL.
      const reader = new TopicCodec('packed', subjectOf(names.packed), createRegistry(config.kafka));
      for (const r of packed) expect((await reader.decode(r.value)).batch_id).toBeTruthy();
      expect(proxy.paths.some((p) => p.startsWith('/subjects/'))).toBe(true);
      expect(proxy.paths.some((p) => p.startsWith('/schemas/ids/'))).toBe(true);
      expect(proxy.paths.filter((p) => !p.startsWith('/') || p.startsWith('//') || p.includes('/apis/'))).toEqual([]);
    } finally {
      await rootPipeline?.stop();
      rootPipeline = undefined;
      await proxy.close();
    }
  });

  test('a registry at its root behind basic auth: from kafka.registry_auth or the URL\'s user-info; none is a clear error', async () => {
    const auth = { username: 'rs-user', password: 'p@ss:word' };
    const proxy = await startRegistryProxy(env.config.kafka.schema_registry_url, auth);
    try {
      const subject = subjectOf(topicNames(env.prefix).packed);
      const schema = avroSchema('packed');
      const want = await env.registry.register(subject, schema);
      const withConfig = createRegistry({ ...env.config.kafka, schema_registry_url: proxy.url, registry_auth: auth });
      expect(await withConfig.register(subject, schema)).toBe(want);
      const userInfo = `http://${encodeURIComponent(auth.username)}:${encodeURIComponent(auth.password)}@${proxy.url.slice('http://'.length)}/`;
      const viaUrl = createRegistry({ ...env.config.kafka, schema_registry_url: userInfo, registry_auth: null });
      expect(viaUrl.url).toBe(proxy.url); // the credentials are not kept in the URL (nor shown in messages)
      expect(await viaUrl.register(subject, schema)).toBe(want);
      expect(await viaUrl.schemaById(want)).toEqual(schema);
      expect(await viaUrl.ping()).toBe(true);
      const none = createRegistry({ ...env.config.kafka, schema_registry_url: proxy.url, registry_auth: null });
      await expect(none.register(subject, schema)).rejects.toThrow(/registering .* at http:\/\/127\.0\.0\.1:\d+ failed.*401|Unauthorized/);
      expect(proxy.paths.filter((p) => p.includes('/apis/') || p.startsWith('//'))).toEqual([]);
    } finally {
      await proxy.close();
    }
  });

  test('read-only: a pipeline that never registers reads and writes with the ids topics create registered', async () => {
    const { config } = loadConfig({
      env: { ...process.env },
      overrides: [
        [['topics', 'prefix'], env.prefix],
        [['kafka', 'register_schemas'], false],
        [['accumulate', 'batch_end_grace_ms'], 300],
        [['runtime', 'metrics_port'], 0],
      ],
    });
    pipeline = await startPipeline({ config, configDir: process.cwd(), stages: ['accumulate', 'postprocess', 'pack'], log: quiet });
    const names = topicNames(env.prefix);
    const events = [...generateEvents({ batches: 1, groupsPerBatch: 3, generations: 4, seed: 3, profile: 'small', runId: `${env.prefix}run` })];
    const producer = new RowProducer({ kafka: env.ops, topic: names.rowCompleted, codec: await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), env.registry).init() });
    await producer.connect();
    await producer.send(events);
    await producer.disconnect();
    const packed = await readTopic(env.kafka, names.packed, (rs) => rs.length >= 3);
    expect(packed.length).toBe(3);
  });

  test('read-only: a schema the registry does not hold is a clear error naming the subject', async () => {
    const subject = `it.registry-ro.${randomUUID().slice(0, 8)}.rollout.packed-value`;
    const ro = createRegistry({ ...env.config.kafka, register_schemas: false });
    await expect(ro.register(subject, avroSchema('packed'))).rejects.toThrow(new RegExp(`kafka.register_schemas is false and ${subject.replace(/\./g, '\\.')} at .* does not hold this schema`));
  });
});

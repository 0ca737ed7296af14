/**
 * The registry as a managed-Kafka user meets it: the URL with or without a
 * trailing slash, and read-only use (`kafka.register_schemas: false`, for
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

const quiet = { info: () => undefined, warn: () => undefined, error: (m: string) => console.error(m) };

describe('registry URL forms and read-only schemas', () => {
  let env: TestEnv;
  let pipeline: RunningPipeline | undefined;

  beforeAll(async () => {
    env = await testEnv('registry-ro', [[['accumulate', 'batch_end_grace_ms'], 300], [['runtime', 'metrics_port'], 0]]);
  });
  afterAll(async () => {
    await pipeline?.stop();
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

/**
 * `demo`: the pipeline end to end on a local broker. Until the stage services
 * exist it runs what exists: broker and registry up, topics created, one
 * record of every kind through the broker and back, decoded.
 */
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../config/load.js';
import { TopicCodec } from '../streams/codec.js';
import { createKafka, createRegistry } from '../streams/kafka-client.js';
import { createTopics, subjectOf, topicNames } from '../streams/topics.js';
import { sampleRow } from '../test/fixtures/records.js';
import { parseFlags, type Command } from './command.js';
import { ensureLocalServices } from './local-services.js';

export const demoCommand: Command = {
  name: 'demo',
  summary: 'the whole pipeline end to end on a local broker, with a summary',
  usage: `usage: ./rollout-stream demo [--config F]

Starts the local broker and registry (unless KAFKA_BROKERS is set), creates
the topics under a fresh prefix (demo.<id>.), and runs the pipeline.

Example: ./rollout-stream demo`,
  async run(argv) {
    const { values } = parseFlags(argv, { config: { type: 'string' } });
    ensureLocalServices();
    const prefix = `demo.${randomUUID().slice(0, 8)}.`;
    const { config } = loadConfig({ file: values.config, overrides: [[['topics', 'prefix'], prefix]] });
    const kafka = createKafka(config.kafka, 'demo');
    const admin = kafka.admin();
    await admin.connect();
    const registry = createRegistry(config.kafka);
    const t0 = Date.now();
    const created = await createTopics(admin, registry, config);
    await admin.disconnect();
    console.log(`topics: ${created.created.length} created under prefix ${prefix} (${Date.now() - t0} ms)`);

    const names = topicNames(prefix);
    const codec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), registry).init();
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const row = sampleRow(0);
    await producer.send({ topic: names.rowCompleted, messages: [{ key: row.group_id, value: codec.encode({ kind: 'row', row }) }] });
    await producer.disconnect();
    const consumer = kafka.consumer({ groupId: `${prefix}demo`, readUncommitted: false });
    await consumer.connect();
    await consumer.subscribe({ topic: names.rowCompleted, fromBeginning: true });
    const back = await new Promise<Buffer>((resolve) => {
      void consumer.run({ eachMessage: async ({ message }) => resolve(message.value!) });
    });
    await consumer.disconnect();
    const decoded = await codec.decode(back);
    if (decoded.kind !== 'row') throw new Error('round trip returned a BatchEnd');
    console.log(
      `round trip: RolloutRow ${decoded.row.group_id}#${decoded.row.row_index} (${back.length} bytes, schema id ${codec.schemaId}) ` +
        `→ ${decoded.row.message_log.length} messages, ${decoded.row.message_log.reduce((n, m) => n + m.token_ids.length, 0)} tokens`,
    );
    console.log('not built yet: the accumulate/postprocess/pack stage services, load generator and Python decode step');
    return 0;
  },
};

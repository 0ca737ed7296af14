/** `topics create|list`: the topics of SPEC §1 with their configs, idempotently. */
import { loadConfig } from '../config/load.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import { createRegistry } from '../streams/codecs/schema-registry.js';
import { topicSpecs } from '../streams/topics/names.js';
import { createTopics } from '../streams/topics/create.js';
import { parseFlags, UsageError, type Command } from '../tools/command.js';

export const topicsCommand: Command = {
  name: 'topics',
  summary: 'create the pipeline topics and register their schemas (idempotent)',
  usage: `usage: ./rollout-stream topics <create|list> [--config F] [--prefix P]

  create   create missing topics (partitions, size limits, cleanup policy,
           the packed topic's compression, replication) and register every
           value schema under <topic>-value with BACKWARD compatibility;
           running it again changes nothing. Replicas and
           min.insync.replicas: topics.replication_factor and
           topics.min_insync_replicas, else from the cluster (1 broker: 1/1,
           3 or more: 3/2); more replicas than live brokers stops with an error.
           An existing topic is left as it is; a config of it that differs
           from what create would set now (e.g. compression.type after
           topics.packed_compression changed) is printed as "differs", with
           the kafka-configs.sh line that alters it
  list     print the topics and their configs without touching the broker

Options:
  --config F   config file (else ROLLOUT_STREAM_CONFIG, else defaults)
  --prefix P   topic name prefix (else TOPIC_PREFIX, else none)

Example: ./rollout-stream topics create --prefix sandbox.`,
  async run(argv) {
    const { values, positionals } = parseFlags(argv, { config: { type: 'string' }, prefix: { type: 'string' } }, true);
    const sub = positionals[0];
    const overrides: Array<[string[], unknown]> = values.prefix !== undefined ? [[['topics', 'prefix'], values.prefix]] : [];
    const { config } = loadConfig({ file: values.config, overrides });
    if (sub === 'list') {
      for (const s of topicSpecs(config)) {
        console.log(`${s.topic}\tpartitions=${s.numPartitions}\t${s.configEntries.map((c) => `${c.name}=${c.value}`).join(' ')}`);
      }
      return 0;
    }
    if (sub !== 'create') throw new UsageError(`expected 'create' or 'list', got ${sub ?? 'nothing'}`);
    const admin = await createOpsClient(config.kafka, 'admin').admin();
    try {
      const r = await createTopics(admin, createRegistry(config.kafka), config);
      for (const t of r.created) console.log(`created  ${t}`);
      for (const t of r.existing) console.log(`exists   ${t}`);
      for (const d of r.differing) {
        console.log(
          `differs  ${d.topic} ${d.name}=${d.actual ?? '(not reported)'}, the configuration asks for ${d.wanted}: ` +
            `kafka-configs.sh --bootstrap-server ${config.kafka.brokers.join(',')} --alter --entity-type topics --entity-name ${d.topic} --add-config ${d.name}=${d.wanted}`,
        );
      }
      for (const [subject, id] of Object.entries(r.schemaIds)) console.log(`schema   ${subject} id=${id}`);
      const { replicationFactor: rf, minInsyncReplicas: isr, brokers, source } = r.replication;
      if (r.created.length > 0) {
        console.log(`replicas ${rf}, min.insync.replicas ${isr} (${source === 'config' ? 'from topics.replication_factor / topics.min_insync_replicas' : `decided from the cluster's ${brokers} broker(s)`})`);
      }
    } finally {
      await admin.close();
    }
    return 0;
  },
};

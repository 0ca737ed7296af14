import type { Config } from '../config/schema.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import { topicSpecs } from '../streams/topics/names.js';

/** Deletes the pipeline's topics of `config`'s prefix that exist. */
export async function deleteTopics(config: Config): Promise<void> {
  const admin = await createOpsClient(config.kafka, 'demo').admin();
  try {
    const existing = new Set(await admin.listTopics());
    const topics = topicSpecs(config)
      .map((s) => s.topic)
      .filter((t) => existing.has(t));
    if (topics.length > 0) await admin.deleteTopics(topics);
  } finally {
    await admin.close();
  }
}

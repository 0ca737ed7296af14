/**
 * Shared by the ops-* integration tests: a fresh prefix with the whole
 * pipeline running in-process, a way to produce load-generator events, and
 * a wait until the expected packed groups and dead letters are committed.
 */
import type { LoadgenEvent } from '../../loadgen/index.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import type { DeadLetterRecord } from '../../streams/api/dead-letter-record.js';
import { startPipeline, type RunningPipeline } from '../../streams/runtime/pipeline.js';
import { RowProducer } from '../../tools/row-producer.js';
import { subjectOf, topicNames, type TopicNames } from '../../streams/topics/names.js';
import { testEnv, type TestEnv } from './helpers.js';
import { readTopic, type ReadRecord } from './topic-reader.js';

export const quietLog = { info: () => undefined, warn: (m: string) => console.warn(m), error: (m: string) => console.error(m) };

export interface OpsEnv extends TestEnv {
  names: TopicNames;
  pipeline: RunningPipeline | null;
  produce(events: Iterable<LoadgenEvent>): Promise<void>;
  /** Waits until `packed` groups are on the packed topic and `dead` dead letters on the dead-letter topic. */
  settle(packed: number, dead: number): Promise<{ packed: ReadRecord[]; dead: Array<ReadRecord & { record: DeadLetterRecord }> }>;
  stop(): Promise<void>;
}

/** A fresh prefix, its topics, and (unless `withPipeline` is false) accumulate/postprocess/pack running in-process. */
export async function opsEnv(name: string, withPipeline = true): Promise<OpsEnv> {
  const env = await testEnv(name, [
    [['accumulate', 'batch_end_grace_ms'], 300],
    [['runtime', 'metrics_port'], 0],
  ]);
  const names = topicNames(env.prefix);
  const pipeline = withPipeline
    ? await startPipeline({ config: env.config, configDir: process.cwd(), stages: ['accumulate', 'postprocess', 'pack'], log: quietLog })
    : null;
  const rowCodec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), env.registry).init();
  const dlCodec = new TopicCodec('deadLetter', subjectOf(names.deadLetter), env.registry);
  return {
    ...env,
    names,
    pipeline,
    async produce(events) {
      const producer = new RowProducer({ kafka: env.ops, topic: names.rowCompleted, codec: rowCodec });
      await producer.connect();
      await producer.send(events);
      await producer.disconnect();
    },
    async settle(packed, dead) {
      const p = await readTopic(env.kafka, names.packed, (rs) => rs.length >= packed, { settleMs: 300 });
      const d = dead === 0 ? [] : await readTopic(env.kafka, names.deadLetter, (rs) => rs.length >= dead, { settleMs: 300 });
      return { packed: p, dead: await Promise.all(d.map(async (r) => ({ ...r, record: await dlCodec.decode(r.value) }))) };
    },
    async stop() {
      await pipeline?.stop();
      await env.close();
    },
  };
}

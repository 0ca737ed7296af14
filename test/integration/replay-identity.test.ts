/**
 * Through Kafka, a row re-sent with its JSON fields spelled differently
 * (another publisher's key order) and a new produced_at is a replay: the
 * group is packed once and nothing is dead-lettered; a copy whose content
 * changed is a duplicate_row_index dead letter.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generateEvents, type LoadgenEvent } from '../../loadgen/index.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { startPipeline, type RunningPipeline } from '../../streams/runtime/pipeline.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { RowProducer } from '../../tools/row-producer.js';
import { testEnv, type TestEnv } from './helpers.js';
import { readTopic } from './topic-reader.js';
import { reversed } from '../unit/accumulate/fixtures.js';

const quiet = { info: () => undefined, warn: (m: string) => console.warn(m), error: (m: string) => console.error(m) };

describe('replay recognised by content through Kafka', () => {
  let env: TestEnv;
  let pipeline: RunningPipeline;
  beforeAll(async () => {
    env = await testEnv('replay-content', [[['accumulate', 'batch_end_grace_ms'], 300], [['runtime', 'metrics_port'], 0]]);
    pipeline = await startPipeline({ config: env.config, configDir: process.cwd(), stages: ['accumulate', 'postprocess', 'pack'], log: quiet });
  });
  afterAll(async () => {
    await pipeline?.stop();
    await env?.close();
  });

  test('a re-spelled re-send is dropped as a replay, a changed copy is duplicate_row_index', async () => {
    const events = [...generateEvents({ batches: 1, groupsPerBatch: 2, generations: 2, seed: 8, profile: 'small', runId: `${env.prefix}run` })];
    const rows = events.filter((e): e is Extract<LoadgenEvent, { kind: 'row' }> => e.kind === 'row');
    const first = rows.find((r) => r.row.group_index === 0)!;
    const second = rows.find((r) => r.row.group_index === 1)!;
    const respelled = { ...first, row: { ...first.row, full_result: reversed(first.row.full_result), request: reversed(first.row.request), produced_at: 1_900_000_000_000 } } as LoadgenEvent;
    const changed = { ...second, row: { ...second.row, full_result: { ...second.row.full_result, reward: 123.5 } } } as LoadgenEvent;
    const names = topicNames(env.prefix);
    const producer = new RowProducer({ kafka: env.ops, topic: names.rowCompleted, codec: await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), env.registry).init() });
    await producer.connect();
    // The copies arrive while their groups are still open (before the batch end and the rows that complete them).
    const [head, tail] = [events.filter((e) => e !== events.find((x) => x.kind === 'batch_end')), events.filter((e) => e.kind === 'batch_end')];
    await producer.send([first, second, respelled, changed, ...head.filter((e) => e !== first && e !== second), ...tail]);
    await producer.disconnect();
    const packed = await readTopic(env.kafka, names.packed, (rs) => rs.length >= 2, { settleMs: 3_000 });
    expect(packed.map((r) => r.key).sort()).toEqual([first.row.group_id, second.row.group_id].sort());
    const dlCodec = new TopicCodec('deadLetter', subjectOf(names.deadLetter), env.registry);
    const dead = await readTopic(env.kafka, names.deadLetter, (rs) => rs.length >= 1, { settleMs: 2_000 });
    const reasons = await Promise.all(dead.map(async (r) => { const d = await dlCodec.decode(r.value); return `${d.reason}:${d.group_id}`; }));
    expect(reasons).toEqual([`duplicate_row_index:${second.row.group_id}`]);
  });
});

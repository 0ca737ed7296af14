/**
 * Routed experts keep the producer's dtype through Kafka: router-replay rows
 * whose routes are int8, int16 or int32 come out of `rollout.packed` with
 * that dtype and byte-equal to the offline runner (no cast to one dtype).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runOffline } from '../../cli/offline.js';
import { formatJsonLine, parseJsonLine } from '../../json-form/form.js';
import { generateEvents, type LoadgenEvent } from '../../loadgen/index.js';
import type { Tensor } from '../../processors/types.js';
import { AvroBodyCodec, TopicCodec } from '../../streams/codecs/codec.js';
import { HEADER_BYTES } from '../../streams/codecs/wire-format.js';
import { startPipeline, type RunningPipeline } from '../../streams/runtime/pipeline.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { RowProducer } from '../../tools/row-producer.js';
import { testEnv, type TestEnv } from './helpers.js';
import { readTopic } from './topic-reader.js';

const quiet = { info: () => undefined, warn: (m: string) => console.warn(m), error: (m: string) => console.error(m) };
const DTYPES = ['int8', 'int16', 'int32'] as const;

function withRoutesAs(events: LoadgenEvent[], dtype: (typeof DTYPES)[number], groupOf: (i: number) => string): LoadgenEvent[] {
  const make = { int8: Int8Array, int16: Int16Array, int32: Int32Array }[dtype];
  return events.map((e) => {
    if (e.kind !== 'row') return e;
    const convert = (t: Tensor | null | undefined) => (t == null ? t : { ...t, dtype, data: make.from(t.data as ArrayLike<number>) });
    const row = { ...e.row, group_id: groupOf(e.row.group_index), message_log: e.row.message_log.map((m) => ({ ...m, routed_experts: convert(m.routed_experts) })) };
    return { ...e, row };
  }) as LoadgenEvent[];
}

describe('routed experts through Kafka', () => {
  let env: TestEnv;
  let pipeline: RunningPipeline;
  beforeAll(async () => {
    env = await testEnv('routes-dtype', [[['accumulate', 'batch_end_grace_ms'], 300], [['runtime', 'metrics_port'], 0]]);
    pipeline = await startPipeline({ config: env.config, configDir: process.cwd(), stages: ['accumulate', 'postprocess', 'pack'], log: quiet });
  });
  afterAll(async () => {
    await pipeline?.stop();
    await env?.close();
  });

  test('int8, int16 and int32 routes are packed in their own dtype, byte-equal to offline', async () => {
    const base = [...generateEvents({ batches: 1, groupsPerBatch: 1, generations: 2, seed: 4, profile: 'router-replay', runId: `${env.prefix}run` })];
    // One batch, three groups: the same rollouts with routes in each dtype (the batch end counts all their rows).
    const rows = DTYPES.flatMap((d) => withRoutesAs(base.filter((e) => e.kind === 'row'), d, () => `${env.prefix}g-${d}`).map((e, i) => (e.kind === 'row' ? { ...e, row: { ...e.row, group_index: DTYPES.indexOf(d), row_index: DTYPES.indexOf(d) * 2 + (i % 2) } } : e)));
    const end = base.find((e) => e.kind === 'batch_end')!;
    const events = [...rows, end.kind === 'batch_end' ? { ...end, end: { ...end.end, num_rows: rows.length } } : end] as LoadgenEvent[];
    const names = topicNames(env.prefix);
    const producer = new RowProducer({ kafka: env.ops, topic: names.rowCompleted, codec: await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), env.registry).init() });
    await producer.connect();
    await producer.send(events);
    await producer.disconnect();

    const lines: string[] = [];
    await runOffline('all', env.config, events.map((e) => (e.kind === 'row' ? formatJsonLine({ kind: 'row', record: e.row }) : formatJsonLine({ kind: 'batch_end', end: (e as Extract<LoadgenEvent, { kind: 'batch_end' }>).end }))), (l) => void lines.push(l));
    const body = new AvroBodyCodec('packed');
    const want = new Map<string, { bytes: Buffer; dtype: string }>();
    for (const l of lines.map(parseJsonLine)) {
      if (l.kind !== 'packed') continue;
      const re = l.packed.fields.find((f) => f.name === 'routed_experts');
      want.set(l.packed.group_id, { bytes: body.encodeFramed(l.packed, 0).subarray(HEADER_BYTES), dtype: re!.dtype });
    }
    expect([...want.entries()].map(([g, w]) => [g.slice(env.prefix.length), w.dtype]).sort()).toEqual(DTYPES.map((d) => [`g-${d}`, d]).sort());
    const packed = await readTopic(env.kafka, names.packed, (rs) => rs.length >= 3);
    expect(packed.length).toBe(3);
    for (const r of packed) expect(r.value.subarray(HEADER_BYTES).equals(want.get(r.key)!.bytes), `packed bytes of ${r.key}`).toBe(true);
  });
});

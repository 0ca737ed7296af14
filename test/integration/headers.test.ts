/**
 * Every record the stages write carries `batch_id` and, where the record
 * belongs to a group, `weight_version` headers (SPEC §6.2), equal to what
 * its value says: group-complete, penalized, packed, metrics (group and
 * batch scope) and dead letters (garbage, which has no batch, and a
 * mixed-agents group, which has). The /metrics endpoint reports the weight versions of the groups
 * held open. Separate stages, so every topic is written by a stage.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { collectExpectations, generateEvents, parseFaultSpec } from '../../loadgen/index.js';
import { RecordDecoder, openRowResolver } from '../../cli/topic-records.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { partitionRanges, type ScanRecord } from '../../streams/ops/topic-scan.js';
import { scanRanges } from '../../streams/kafka/kafkajs/scan.js';
import { KafkajsAdmin } from '../../streams/kafka/kafkajs/admin.js';
import { startPipeline, type RunningPipeline } from '../../streams/runtime/pipeline.js';
import { subjectOf, topicNames, type TopicRole } from '../../streams/topics/names.js';
import { connectRowProducer, testEnv, type TestEnv } from './helpers.js';
import { readTopic } from './topic-reader.js';

const quiet = { info: () => undefined, warn: (m: string) => console.warn(m), error: (m: string) => console.error(m) };
const PORT = 19481;

async function readAll(e: TestEnv, topic: string): Promise<ScanRecord[]> {
  const out: ScanRecord[] = [];
  await scanRanges(e.kafka, await partitionRanges(KafkajsAdmin.over(e.admin), topic, { kind: 'beginning' }), (r) => void out.push(r));
  return out;
}

const header = (r: ScanRecord, name: string) => r.headers[name]?.toString('utf8');

describe('record headers', () => {
  let env: TestEnv;
  let pipeline: RunningPipeline;
  const names = () => topicNames(env.prefix);

  beforeAll(async () => {
    env = await testEnv('headers', [
      [['accumulate', 'batch_end_grace_ms'], 300],
      [['runtime', 'fused'], false],
      [['runtime', 'metrics_port'], PORT],
    ]);
    pipeline = await startPipeline({ config: env.config, configDir: process.cwd(), stages: ['accumulate', 'postprocess', 'pack'], log: quiet });
    const events = [
      ...generateEvents({ batches: 2, groupsPerBatch: 4, generations: 4, seed: 31, profile: 'small', runId: `${env.prefix}run`, faults: parseFaultSpec('garbage=0.05,mixed_agents=0.25') }),
    ];
    const producer = await connectRowProducer(env);
    await producer.send(events);
    await producer.disconnect();
    const complete = collectExpectations(events).completeGroups.size;
    expect(complete).toBeGreaterThanOrEqual(4);
    await readTopic(env.kafka, names().packed, (rs) => rs.length >= complete, { timeoutMs: 120_000, settleMs: 500 });
    // One group-scope record per packed group, one batch-scope record per batch.
    await readTopic(env.kafka, names().metrics, (rs) => rs.length >= complete + 2, { timeoutMs: 60_000, settleMs: 2000 });
  }, 240_000);

  afterAll(async () => {
    await pipeline?.stop();
    await env?.close();
  });

  test.each<[TopicRole]>([['groupComplete'], ['penalized'], ['packed']])('every %s record has the batch id and weight version of its group', async (role) => {
    // Group-complete records name their rows by reference (the default): read them back for the rows' weight versions.
    const { rows, close } = openRowResolver(env.config, process.cwd(), env.registry, env.prefix);
    try {
      const decoder = new RecordDecoder(env.registry, rows);
      const records = await readAll(env, names()[role]);
      expect(records.length).toBeGreaterThanOrEqual(4);
      for (const r of records) {
        const v = (await decoder.decode(role, r.value!)).value as { batch_id: string; weight_version?: number; rows?: Array<{ weight_version: number }>; tags?: Array<{ weight_version: number }> };
        const wv = v.weight_version ?? v.rows?.[0]?.weight_version ?? v.tags?.[0]?.weight_version;
        expect([header(r, 'batch_id'), header(r, 'weight_version')], `${role} ${r.partition}/${r.offset}`).toEqual([v.batch_id, String(wv)]);
      }
    } finally {
      await close();
    }
  });

  test('metrics records: the batch id (and the group weight version on group-scope ones)', async () => {
    const codec = new TopicCodec('metrics', subjectOf(names().metrics), env.registry);
    const packed = new Map<string, string>();
    for (const r of await readAll(env, names().packed)) packed.set(r.key!.toString(), header(r, 'weight_version')!);
    const records = await readAll(env, names().metrics);
    expect(records.some((r) => header(r, 'weight_version') === undefined), 'batch-scope records have no group version').toBe(true);
    for (const r of records) {
      const m = await codec.decode(r.value!);
      expect(header(r, 'batch_id')).toBe(m.batch_id);
      if (m.scope === 'group') expect(header(r, 'weight_version')).toBe(packed.get(m.group_id!));
      else expect(header(r, 'weight_version')).toBeUndefined();
    }
  });

  test('dead letters carry the batch id when the stage knows it', async () => {
    const codec = new TopicCodec('deadLetter', subjectOf(names().deadLetter), env.registry);
    const records = await readAll(env, names().deadLetter);
    expect(records.length).toBeGreaterThan(0);
    expect(records.some((r) => header(r, 'batch_id') !== undefined), 'a group dead letter has its batch').toBe(true);
    for (const r of records) {
      const d = await codec.decode(r.value!);
      expect(header(r, 'batch_id')).toBe(d.batch_id ?? undefined);
    }
  });

  test('/metrics reports the weight versions of the groups held open, per stage', async () => {
    // Half a group: rows 0 and 1 of a new group stay open in accumulate.
    // (Batch 3: the first two batches have ended, so a group of theirs would be incomplete at once.)
    const events = [...generateEvents({ batches: 3, groupsPerBatch: 1, generations: 4, seed: 5, profile: 'small', runId: `${env.prefix}open` })].filter(
      (e) => e.kind === 'row' && e.row.batch_id.endsWith('3') && e.row.row_index % 4 < 2,
    );
    expect(events).toHaveLength(2);
    const wv = events[0]!.kind === 'row' ? events[0]!.row.weight_version : -1;
    const producer = await connectRowProducer(env);
    await producer.send(events);
    await producer.disconnect();
    let text = '';
    for (let i = 0; i < 60 && !/open_weight_version\{stage="accumulate",bound="max"\}/.test(text); i++) {
      await new Promise((r) => setTimeout(r, 500));
      text = await (await fetch(`http://127.0.0.1:${PORT}/metrics`)).text();
    }
    expect(text).toContain(`rollout_stream_open_weight_version{stage="accumulate",bound="min"} ${wv}`);
    expect(text).toContain(`rollout_stream_open_weight_version{stage="accumulate",bound="max"} ${wv}`);
  }, 60_000);
});

import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseDlqArgs, runDlq } from '../../cli/dlq.js';
import { captureIo } from '../../cli/io.js';
import { formatTrace, runTrace } from '../../cli/trace.js';
import { collectExpectations, generateEvents, parseFaultSpec, type Expectations, type LoadgenEvent } from '../../loadgen/index.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import type { DeadLetterRecord } from '../../streams/api/dead-letter-record.js';
import { partitionForKey } from '../../streams/topics/partitioner.js';
import { subjectOf } from '../../streams/topics/names.js';
import { opsEnv, type OpsEnv } from './ops-fixture.js';
import { readTopic, type ReadRecord } from './topic-reader.js';

let env: OpsEnv;
let events: LoadgenEvent[];
let expected: Expectations;
let packed: ReadRecord[];

async function dlq(argv: string[]) {
  const io = captureIo();
  const result = await runDlq(parseDlqArgs(argv), env.config, io);
  return { ...result, stdout: io.stdout(), lines: io.lines() };
}

beforeAll(async () => {
  env = await opsEnv('ops-trace-dlq');
  // Seed 1 gives NaN copies, a garbage record and a mixed-agents group among 6 groups.
  events = [
    ...generateEvents({ batches: 1, groupsPerBatch: 6, generations: 4, seed: 1, profile: 'small', runId: `${env.prefix}t`, faults: parseFaultSpec('nan=0.1,garbage=0.05,mixed_agents=0.2') }),
  ];
  expected = collectExpectations(events);
  await env.produce(events);
  packed = (await env.settle(expected.completeGroups.size, expected.deadLetters.length)).packed;
});

afterAll(async () => {
  await env?.stop();
});

describe('trace', () => {
  test('trace finds a group whose rows a producer with another partitioner wrote, and its records downstream', async () => {
    const rows = [...generateEvents({ batches: 1, groupsPerBatch: 1, generations: 4, seed: 3, profile: 'small', runId: `${env.prefix}other` })].flatMap((e) =>
      e.kind === 'row' ? [e.row] : [],
    );
    const groupId = rows[0]!.group_id;
    const n = env.config.topics.partitions;
    const elsewhere = (partitionForKey(groupId, n) + 1) % n; // not where murmur2 (our publishers) would put it
    const codec = await new TopicCodec('rowCompleted', subjectOf(env.names.rowCompleted), env.registry).init();
    const producer = env.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    await producer.send({ topic: env.names.rowCompleted, acks: -1, messages: rows.map((row) => ({ key: groupId, partition: elsewhere, value: codec.encode({ kind: 'row', row }) })) });
    await producer.disconnect();
    const onBroker = (await readTopic(env.kafka, env.names.packed, (rs) => rs.some((r) => r.key === groupId), { settleMs: 300 })).find((r) => r.key === groupId)!;

    const report = await runTrace(groupId, env.config);
    const found = (role: string) => report.records.filter((r) => r.role === role);
    expect(found('rowCompleted').map((r) => r.partition)).toEqual([elsewhere, elsewhere, elsewhere, elsewhere]);
    for (const role of ['groupComplete', 'penalized', 'packed'] as const) expect(found(role), role).toHaveLength(1);
    expect(found('packed')[0]).toMatchObject({ partition: onBroker.partition, offset: onBroker.offset });
  });

  test('trace of a packed group lists its records on every topic, the stage latencies and its tags', async () => {
    const groupId = [...expected.completeGroups.keys()].sort()[0]!;
    const report = await runTrace(groupId, env.config);
    const roles = report.records.map((r) => r.role);
    const rows = events.filter((e) => e.kind === 'row' && e.row.group_id === groupId).length;
    expect(roles.filter((r) => r === 'rowCompleted')).toHaveLength(rows);
    for (const role of ['groupComplete', 'penalized', 'metrics', 'packed'] as const) expect(roles.filter((r) => r === role), role).toHaveLength(1);
    expect(report.batchId).toBe('b000001');

    // The one partition read is where the broker really holds the group's packed record.
    const onBroker = packed.find((r) => r.key === groupId)!;
    const traced = report.records.find((r) => r.role === 'packed')!;
    expect(traced.partition).toBe(onBroker.partition);
    expect(traced.partition).toBe(partitionForKey(groupId, env.config.topics.partitions));
    expect(traced.offset).toBe(onBroker.offset);
    expect(traced.size).toBe(onBroker.value.length);

    expect(report.latencies.accumulateMs).not.toBeNull();
    expect(report.latencies.postprocessMs).toBeGreaterThanOrEqual(0);
    expect(report.latencies.packMs).toBeGreaterThanOrEqual(0);
    expect(report.latencies.totalMs).not.toBeNull();
    expect(report.deadLetters).toEqual([]);
    expect(report.sampleIds).toEqual(Array.from({ length: 4 }, (_, i) => `${groupId}_g${i}`));
    expect(report.tags!.map((t) => t.group_id)).toEqual([groupId, groupId, groupId, groupId]);
    expect(report.rewards).toHaveLength(4);

    const text = formatTrace(report);
    for (const topic of ['rollout.row-completed', 'rollout.group-complete', 'rollout.penalized', 'rollout.metrics', 'rollout.packed']) expect(text).toContain(topic);
    expect(text).toContain(`${groupId}_g3: {`);
    expect(text).toContain('dead letters: none');
  });

  test('trace of a dead-lettered group shows the dead letter and no packed record', async () => {
    const failed = expected.deadLetters.find((e) => e.reason === 'mixed_agents')!;
    const report = await runTrace(failed.group_id, env.config);
    expect(report.deadLetters).toHaveLength(1);
    expect(report.deadLetters[0]).toMatchObject({ reason: 'mixed_agents', stage: 'accumulate', row_indices: failed.row_indices });
    expect(report.records.some((r) => r.role === 'packed')).toBe(false);
    expect(report.tags).toBeNull();
    const text = formatTrace(report);
    expect(text).toContain('mixed_agents');
    expect(text).toContain('tags: not packed');
  });

  test('trace of an unknown group finds nothing', async () => {
    const report = await runTrace(`${env.prefix}no-such-group`, env.config);
    expect(report.records).toEqual([]);
    expect(formatTrace(report)).toContain('no records of this group');
  });
});

describe('dlq', () => {
  test('dlq list shows every expected dead letter with its reason, and filters by reason', async () => {
    const all = await dlq(['list']);
    const got = all.entries.map((e) => `${e.record.reason}:${e.record.group_id}`).sort();
    expect(got).toEqual(expected.deadLetters.map((e) => `${e.reason}:${e.group_id}`).sort());
    for (const reason of new Set(expected.deadLetters.map((e) => e.reason!))) expect(all.stdout).toContain(reason);
    expect(all.stdout).toMatch(/dead letters: .*nan_logprobs=\d/);

    const nan = await dlq(['list', '--reason', 'nan_logprobs', '--json']);
    expect(nan.lines).toHaveLength(expected.deadLetters.filter((e) => e.reason === 'nan_logprobs').length);
    for (const line of nan.lines) expect(JSON.parse(line).dead_letter).toMatchObject({ reason: 'nan_logprobs', stage: 'accumulate' });
  });

  test('dlq redrive re-publishes the original record to its source topic and partition with identical bytes', async () => {
    const target = (await dlq(['list', '--reason', 'undecodable'])).entries[0]!;
    const source = target.record.records[0]!;
    const at = `${target.partition}:${target.offset}`;
    const before = await env.admin.fetchTopicOffsets(env.names.rowCompleted);
    const end = BigInt(before.find((o) => o.partition === source.partition)!.high);

    const dry = await dlq(['redrive', '--offsets', at, '--dry-run']);
    expect(dry.redrive!.republished).toHaveLength(1);
    expect(dry.stdout).toContain('would re-publish 1 records');
    expect(await env.admin.fetchTopicOffsets(env.names.rowCompleted)).toEqual(before);

    const done = await dlq(['redrive', '--offsets', at]);
    expect(done.code).toBe(0);
    expect(done.stdout).toContain(`re-published 1 records to ${env.names.rowCompleted}`);
    const records = await readTopic(env.kafka, env.names.rowCompleted, (rs) => rs.some((r) => r.partition === source.partition && BigInt(r.offset) >= end), { settleMs: 300 });
    const redriven = records.filter((r) => r.partition === source.partition && BigInt(r.offset) >= end);
    expect(redriven).toHaveLength(1);
    expect(redriven[0]!.key).toBe(source.key!.toString());
    expect(redriven[0]!.value.equals(source.value!)).toBe(true);
  });

  test('dlq redrive reads omitted values back at their source offsets, and refuses a dead letter whose source is gone', async () => {
    const codec = await new TopicCodec('deadLetter', subjectOf(env.names.deadLetter), env.registry).init();
    const source = (await dlq(['list', '--reason', 'undecodable'])).entries[0]!.record.records[0]!;
    const omitted = (group: string, s: DeadLetterRecord['records'][number]): DeadLetterRecord => ({
      reason: 'record_too_large',
      message: 'pack output is 70000000 bytes [original payloads omitted]',
      stage: 'pack',
      group_id: group,
      batch_id: 'b000009',
      row_indices: [],
      missing_row_indices: [],
      records: [{ ...s, value: null }],
      produced_at: Date.now(),
    });
    const gone = omitted(`${env.prefix}gone`, { topic: env.names.penalized, partition: 2, offset: '999999', key: Buffer.from(`${env.prefix}gone`), value: null });
    const there = omitted(`${env.prefix}there`, source);
    const producer = env.kafka.producer();
    await producer.connect();
    await producer.send({ topic: env.names.deadLetter, messages: [gone, there].map((d) => ({ key: d.group_id, value: codec.encode(d) })) });
    await producer.disconnect();

    const r = await dlq(['redrive', '--reason', 'record_too_large', '--dry-run']);
    expect(r.code).toBe(1);
    expect(r.redrive!.refused.map((e) => e.record.group_id)).toEqual([gone.group_id]);
    expect(r.stdout).toContain('REFUSED');
    expect(r.stdout).toContain(`${env.names.penalized}/2@999999 can no longer be read`);
    // The other one's value was read back at its offset: the exact bytes the dead letter could not carry.
    expect(r.redrive!.republished).toEqual([{ topic: source.topic, partition: source.partition, offset: source.offset, key: source.key!.toString(), bytes: source.value!.length, readBack: true }]);
    expect(r.stdout).toContain('read back at its offset');
  });
});

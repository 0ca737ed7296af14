import { afterEach, describe, expect, test } from 'vitest';
import { asGymResultEvents, generateEvents, type GymLoadgenEvent, type LoadgenEvent } from '../../loadgen/index.js';
import { runOffline } from '../../cli/offline.js';
import { RecordDecoder, openRowResolver } from '../../cli/topic-records.js';
import { formatJsonLine, parseJsonLine } from '../../json-form/form.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { startPipeline, type RunningPipeline } from '../../streams/runtime/pipeline.js';
import type { PromptGroup } from '../../processors/types.js';
import { RowProducer } from '../../tools/row-producer.js';
import { parseChangelogRecord } from '../../streams/stages/accumulator-changelog.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { testEnv, type TestEnv } from './helpers.js';
import { readTopic } from './topic-reader.js';

const quiet = { info: () => undefined, warn: () => undefined, error: (m: string) => console.error(m) };
let env: TestEnv | undefined;
let pipeline: RunningPipeline | undefined;

afterEach(async () => {
  await pipeline?.stop();
  pipeline = undefined;
  await env?.close();
});

async function produce(e: TestEnv, events: Array<LoadgenEvent | GymLoadgenEvent>): Promise<void> {
  const names = topicNames(e.prefix);
  const codec = await new TopicCodec('rowCompleted', subjectOf(names.rowCompleted), e.registry).init();
  const producer = new RowProducer({ kafka: e.ops, topic: names.rowCompleted, codec });
  await producer.connect();
  await producer.send(events);
  await producer.disconnect();
}

/** The groups of group-complete records as the processors see them, with their rows (read back from row-completed when the records name them by reference, the default). */
async function decodeGroups(e: TestEnv, values: Buffer[]): Promise<PromptGroup[]> {
  const { rows, close } = openRowResolver(e.config, process.cwd(), e.registry, e.prefix);
  try {
    const decoder = new RecordDecoder(e.registry, rows);
    const out: PromptGroup[] = [];
    for (const v of values) {
      const d = await decoder.decode('groupComplete', v);
      if (d.role !== 'groupComplete') throw new Error(`not a group: ${d.role}`);
      const { row_refs: _refs, unresolved: _u, ...group } = d.value;
      out.push(group);
    }
    return out;
  } finally {
    await close();
  }
}

const start = (e: TestEnv) => startPipeline({ config: e.config, configDir: process.cwd(), stages: ['accumulate'], log: quiet });

describe('accumulator state across restarts', () => {
  test('rows received before a restart are restored from the changelog and the group completes once after it', async () => {
    env = await testEnv('restore');
    const rows = [...generateEvents({ batches: 1, groupsPerBatch: 3, generations: 4, seed: 9, profile: 'small', runId: `${env.prefix}run`, reorderWindowGroups: 0 })].filter(
      (e) => e.kind === 'row',
    );
    // First half of every group's rows, then a clean stop.
    const firstHalf = rows.filter((e) => e.kind === 'row' && e.row.row_index % 4 < 2);
    const secondHalf = rows.filter((e) => e.kind === 'row' && e.row.row_index % 4 >= 2);
    pipeline = await start(env);
    await produce(env, firstHalf);
    const names = topicNames(env.prefix);
    const changelog = await readTopic(env.kafka, names.accumulateChangelog, (rs) => rs.length >= firstHalf.length, { timeoutMs: 60_000, settleMs: 500 });
    // Pending rows are stored as references to their input offsets, not as a second copy of their bytes.
    const stored = changelog.map((r) => parseChangelogRecord({ key: r.key!, value: r.value }));
    const refs = stored.filter((p) => p?.kind === 'row');
    expect(refs).toHaveLength(firstHalf.length);
    for (const p of refs) expect(p?.kind === 'row' && [p.row.payload, /^\d+$/.test(p.row.offset ?? '')]).toEqual([undefined, true]);
    await pipeline.stop();
    // A new instance restores the pending rows, then the rest arrive.
    pipeline = await start(env);
    await produce(env, secondHalf);
    const groups = await readTopic(env.kafka, names.groupComplete, (rs) => rs.length >= 3);
    expect(groups.map((r) => r.key).sort()).toEqual([...new Set(rows.map((e) => (e.kind === 'row' ? e.row.group_id : '')))].sort());
    for (const g of await decodeGroups(env, groups.map((r) => r.value))) {
      expect(g.rows.map((x) => x.row_index % 4)).toEqual([0, 1, 2, 3]);
    }
  });

  test('NeMo-Gym results received before a restart are converted again on restore: the groups equal the offline runner\'s', async () => {
    env = await testEnv('restore-gym');
    const results = [
      ...asGymResultEvents(generateEvents({ batches: 1, groupsPerBatch: 3, generations: 4, seed: 12, profile: 'default', runId: `${env.prefix}run`, reorderWindowGroups: 0 })),
    ].flatMap((e) => (e.kind === 'gym_result' ? [e] : []));
    expect(results).toHaveLength(12);
    const names = topicNames(env.prefix);
    pipeline = await start(env);
    await produce(env, results.filter((e) => e.result.row_index % 4 < 3));
    await readTopic(env.kafka, names.accumulateChangelog, (rs) => rs.length >= 9, { timeoutMs: 60_000, settleMs: 500 });
    await pipeline.stop();
    pipeline = await start(env);
    await produce(env, results.filter((e) => e.result.row_index % 4 === 3));
    const groups = await readTopic(env.kafka, names.groupComplete, (rs) => rs.length >= 3);
    expect(groups).toHaveLength(3);
    const offline: string[] = [];
    await runOffline('accumulate', env.config, results.map((e) => formatJsonLine({ kind: 'gym_result', record: e.result })), (l) => void offline.push(l));
    const want = new Map(offline.map(parseJsonLine).flatMap((l) => (l.kind === 'group' ? [[l.group.group_id, formatJsonLine(l)] as const] : [])));
    expect(want.size).toBe(3);
    const decoded = await decodeGroups(env, groups.map((r) => r.value));
    groups.forEach((r, i) => expect(formatJsonLine({ kind: 'group', group: decoded[i]! })).toBe(want.get(r.key!)));
  });

  test('a pending row that is gone from the input topic when restoring is missing from its group, which dead-letters as incomplete', async () => {
    env = await testEnv('restore-gone', [[['accumulate', 'group_timeout_ms'], 8000]]);
    const rows = [...generateEvents({ batches: 1, groupsPerBatch: 1, generations: 4, seed: 5, profile: 'small', runId: `${env.prefix}run`, reorderWindowGroups: 0 })].filter(
      (e) => e.kind === 'row' && e.row.row_index < 2,
    );
    pipeline = await start(env);
    await produce(env, rows);
    const names = topicNames(env.prefix);
    const changelog = await readTopic(env.kafka, names.accumulateChangelog, (rs) => rs.length >= 2, { timeoutMs: 60_000, settleMs: 200 });
    await pipeline.stop();
    // Retention took the first row: delete the input records before the second one.
    const refs = changelog.map((r) => parseChangelogRecord({ key: r.key!, value: r.value })).flatMap((p) => (p?.kind === 'row' ? [p.row] : []));
    const second = refs.find((r) => r.change.row_index % 4 === 1)!;
    const first = refs.find((r) => r.change.row_index % 4 === 0)!;
    expect(BigInt(first.offset!)).toBeLessThan(BigInt(second.offset!));
    const input = await readTopic(env.kafka, names.rowCompleted, (rs) => rs.length >= 2, { timeoutMs: 30_000 });
    const partition = input.find((r) => r.offset === second.offset)!.partition;
    await env.admin.fetchTopicMetadata({ topics: [names.rowCompleted] }); // kafkajs needs the leaders known
    await env.admin.deleteTopicRecords({ topic: names.rowCompleted, partitions: [{ partition, offset: second.offset! }] });
    pipeline = await start(env);
    const dead = await readTopic(env.kafka, names.deadLetter, (rs) => rs.length >= 1, { timeoutMs: 60_000 });
    const dl = await new TopicCodec('deadLetter', subjectOf(names.deadLetter), env.registry).decode(dead[0]!.value);
    expect(dl.reason).toBe('incomplete_group');
    expect(dl.row_indices).toEqual([second.change.row_index]);
    expect(dl.missing_row_indices).toEqual([0, 2, 3].map((i) => second.change.row_index - 1 + i));
    // The surviving row's dead letter still carries its original bytes, read back from the input topic.
    expect(dl.records.map((r) => r.offset)).toEqual([second.offset]);
    expect(Buffer.compare(dl.records[0]!.value!, input.find((r) => r.offset === second.offset)!.value)).toBe(0);
  });

  test('a restored open group times out by itself when no more input arrives', async () => {
    env = await testEnv('restore-timeout', [[['accumulate', 'group_timeout_ms'], 8000]]);
    const rows = [...generateEvents({ batches: 1, groupsPerBatch: 1, generations: 4, seed: 4, profile: 'small', runId: `${env.prefix}run` })].filter(
      (e) => e.kind === 'row' && e.row.row_index < 2,
    );
    pipeline = await start(env);
    await produce(env, rows);
    const names = topicNames(env.prefix);
    await readTopic(env.kafka, names.accumulateChangelog, (rs) => rs.length >= 2, { timeoutMs: 60_000, settleMs: 200 });
    await pipeline.stop();
    // Nothing was dead-lettered before the restart: the timeout is still ahead. (The end offsets,
    // not a reader: a reader whose condition holds at once returns before it has read anything.)
    const before = await env.admin.fetchTopicOffsets(names.deadLetter);
    expect(before.map((p) => p.high)).toEqual(before.map(() => '0'));
    const restartedAt = Date.now();
    pipeline = await start(env);
    const dead = await readTopic(env.kafka, names.deadLetter, (rs) => rs.length >= 1, { timeoutMs: 60_000 });
    const dl = await new TopicCodec('deadLetter', subjectOf(names.deadLetter), env.registry).decode(dead[0]!.value);
    expect(dl.reason).toBe('incomplete_group');
    expect(dl.produced_at).toBeGreaterThanOrEqual(restartedAt);
    expect(dl.row_indices).toEqual([0, 1]);
    expect(dl.missing_row_indices).toEqual([2, 3]);
    expect(dl.records.map((r) => r.offset)).toEqual(expect.arrayContaining([expect.stringMatching(/^\d+$/)]));
  });
});

/**
 * Retention on the real broker (issue 16): in separate mode with
 * intermediate records by reference, postprocess reads each group's rows
 * back from rollout.row-completed. Accumulate runs alone first, then the
 * log start of one row-completed partition is moved into the middle of its
 * groups (Kafka's DeleteRecords, as retention would), then postprocess and
 * pack run. A group with a row below the new log start dead-letters once as
 * incomplete_group naming its rows; every other group is packed once,
 * byte-equal to the offline runner.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { generateEvents } from '../../loadgen/index.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { HEADER_BYTES } from '../../streams/codecs/wire-format.js';
import { KafkajsAdmin } from '../../streams/kafka/kafkajs/admin.js';
import { startPipeline, type RunningPipeline } from '../../streams/runtime/pipeline.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { ROOT } from '../../tools/local-services.js';
import { expectedRun } from './exactly-once-expectations.js';
import { connectRowProducer, testEnv, type TestEnv } from './helpers.js';
import { readTopic } from './topic-reader.js';

const quiet = { info: () => undefined, warn: (m: string) => console.warn(m), error: (m: string) => console.error(m) };
const GROUPS = 16;
const N = 4;

/**
 * Moves the log start offset of `topic`/`partition` to `offset` with Kafka's
 * own DeleteRecordsCommand, from the jars scripts/local-kafka.sh installs (as
 * bench/log-sizes.ts runs LogDirsCommand): our KafkaAdmin has no
 * deleteRecords, and kafkajs stays behind streams/kafka/.
 */
function deleteRecordsBefore(bootstrap: string, topic: string, partition: number, offset: string): void {
  const dir = mkdtempSync(join(tmpdir(), 'rs-delete-records-'));
  try {
    const file = join(dir, 'offsets.json');
    // The offset goes in as written (a JSON number, never through a JS number).
    writeFileSync(file, `{"version":1,"partitions":[{"topic":${JSON.stringify(topic)},"partition":${partition},"offset":${BigInt(offset)}}]}`);
    const r = spawnSync(
      'java',
      ['-Xmx256m', '-cp', `${join(ROOT, '.local', 'kafka-libs')}/*`, 'org.apache.kafka.tools.DeleteRecordsCommand', '--bootstrap-server', bootstrap, '--offset-json-file', file],
      { encoding: 'utf8', timeout: 60_000 },
    );
    if (r.error) throw new Error(`DeleteRecordsCommand could not run: ${r.error.message}`);
    if (r.status !== 0 || /error/i.test(r.stdout)) throw new Error(`DeleteRecordsCommand failed (exit ${r.status}): ${(r.stdout + r.stderr).trim()}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

let env: TestEnv | undefined;
let pipeline: RunningPipeline | undefined;

afterEach(async () => {
  await pipeline?.stop();
  pipeline = undefined;
  await env?.close();
  env = undefined;
});

describe('retention of rollout.row-completed, separate stages, intermediate records by reference', () => {
  test('groups whose rows were deleted before postprocess read them dead-letter once as incomplete_group with their row indices; the others are packed once', async () => {
    env = await testEnv('retention', [
      [['accumulate', 'batch_end_grace_ms'], 300],
      [['runtime', 'metrics_port'], 0],
      [['runtime', 'fused'], false],
      [['runtime', 'intermediate_records'], 'reference'],
    ]);
    const names = topicNames(env.prefix);
    const events = [...generateEvents({ batches: 1, groupsPerBatch: GROUPS, generations: N, seed: 16, profile: 'small', runId: `${env.prefix}run` })];
    const want = await expectedRun(env.config, events);
    expect(want.packed.size).toBe(GROUPS);
    const producer = await connectRowProducer(env);
    await producer.send(events);
    await producer.disconnect();

    // Accumulate alone: every group closes into a reference record on group-complete.
    const opts = { config: env.config, configDir: process.cwd(), log: quiet };
    pipeline = await startPipeline({ ...opts, stages: ['accumulate'] });
    const groupCodec = new TopicCodec('groupComplete', subjectOf(names.groupComplete), env.registry);
    const closed = await readTopic(env.kafka, names.groupComplete, (rs) => rs.length >= GROUPS, { timeoutMs: 30_000, settleMs: 500 });
    await pipeline.stop();
    pipeline = undefined;
    const groups = await Promise.all(closed.map((r) => groupCodec.decode(r.value)));
    expect(groups.map((g) => g.group_id).sort()).toEqual([...want.packed.keys()].sort());
    for (const g of groups) expect(g.row_refs, `group-complete ${g.group_id} by reference`).toHaveLength(N);

    // Where to move a partition's log start: between the second and third row of one of its groups (`split`),
    // the candidate that leaves the most groups with a row gone and still one group on that partition whose
    // rows all remain (rows arrive shuffled, so groups on a partition interleave).
    type Group = (typeof groups)[number];
    const byOffset = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);
    const candidates = groups.map((split) => ({ split, partition: split.row_refs![0]!.partition, cut: split.row_refs!.map((r) => BigInt(r.offset)).sort(byOffset)[2]! }));
    const belowCut = (c: (typeof candidates)[number], g: Group) =>
      g.row_refs!.flatMap((r, i) => (r.partition === c.partition && BigInt(r.offset) < c.cut ? [g.group_index * N + i] : []));
    const onPartition = (c: (typeof candidates)[number]) => groups.filter((g) => g.row_refs!.some((r) => r.partition === c.partition));
    const goneCount = (c: (typeof candidates)[number]) => onPartition(c).filter((g) => belowCut(c, g).length > 0).length;
    const chosen = candidates
      .filter((c) => onPartition(c).some((g) => belowCut(c, g).length === 0))
      .sort((a, b) => goneCount(a) - goneCount(b))
      .at(-1);
    expect(chosen, 'a partition with a group to cut and a group to keep').toBeDefined();
    const { partition, cut, split } = chosen!;
    const missingOf = (g: Group) => belowCut(chosen!, g);
    const gone = new Map(groups.filter((g) => missingOf(g).length > 0).map((g) => [g.group_id, g]));
    const kept = groups.filter((g) => !gone.has(g.group_id)).map((g) => g.group_id);
    expect(split.row_refs!.every((r) => r.partition === partition), 'a group lies on one partition').toBe(true);
    expect(missingOf(split).length, 'a group with some of its rows gone').toBe(2);

    deleteRecordsBefore(env.config.kafka.brokers.join(','), names.rowCompleted, partition, String(cut));
    const low = (await KafkajsAdmin.over(env.admin).topicOffsets(names.rowCompleted)).find((o) => o.partition === partition)!.low;
    expect(low).toBe(String(cut));
    console.log(`${names.rowCompleted}[${partition}] starts at ${cut} now; gone: ${[...gone.values()].map((g) => `${g.group_id} (rows ${missingOf(g).join(',')})`).join(', ')}; kept: ${kept.length}`);

    pipeline = await startPipeline({ ...opts, stages: ['postprocess', 'pack'] });
    const dlCodec = new TopicCodec('deadLetter', subjectOf(names.deadLetter), env.registry);
    const penalizedCodec = new TopicCodec('penalized', subjectOf(names.penalized), env.registry);
    const [dead, packed, penalized] = await Promise.all([
      readTopic(env.kafka, names.deadLetter, (rs) => rs.length >= gone.size, { timeoutMs: 40_000, settleMs: 2_500 }),
      readTopic(env.kafka, names.packed, (rs) => rs.length >= kept.length, { timeoutMs: 40_000, settleMs: 2_500 }),
      readTopic(env.kafka, names.penalized, (rs) => rs.length >= kept.length, { timeoutMs: 40_000, settleMs: 2_500 }),
    ]);

    // Exactly one incomplete_group dead letter per gone group, naming its rows and the missing ones.
    const letters = await Promise.all(dead.map((r) => dlCodec.decode(r.value)));
    expect(letters.map((d) => d.group_id).sort(), 'one dead letter per gone group').toEqual([...gone.keys()].sort());
    for (const d of letters) {
      const g = gone.get(d.group_id ?? '')!;
      expect(d).toMatchObject({
        reason: 'incomplete_group',
        stage: 'postprocess',
        batch_id: g.batch_id,
        row_indices: Array.from({ length: N }, (_, i) => g.group_index * N + i),
        missing_row_indices: missingOf(g),
      });
      expect(d.message).toContain(`rows ${missingOf(g).join(', ')} of group ${g.group_id} cannot be read back`);
      const at = new RegExp(`${names.rowCompleted.replace(/\./g, '\\.')}\\[${partition}\\]@\\d+ is gone \\(retention deleted it`);
      expect(d.message).toMatch(at);
      // The record it carries is the group-complete reference record postprocess could not resolve.
      expect(d.records.map((r) => r.topic)).toEqual([names.groupComplete]);
    }

    // The others are packed exactly once, byte-equal to the offline runner; the gone ones reach neither penalized nor packed.
    expect(packed.map((r) => r.key).sort(), 'each kept group packed once').toEqual([...kept].sort());
    for (const r of packed) expect(r.value.subarray(HEADER_BYTES).equals(want.packed.get(r.key)!), `packed bytes of ${r.key}`).toBe(true);
    expect(penalized.map((r) => r.key).sort()).toEqual([...kept].sort());
    for (const r of penalized) expect((await penalizedCodec.decode(r.value)).row_refs).toHaveLength(N);
  }, 60_000);
});

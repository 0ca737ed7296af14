/**
 * `./rollout-stream produce` against the real broker and registry: a
 * JSON-lines file of rows, and one of NeMo-Gym results, lands record by
 * record on the murmur2 partition of its group id, each batch's BatchEnd
 * follows its rows on every partition, and a malformed line is reported
 * with its line number while nothing of it reaches the topic. And
 * `loadgen --format gym-result` loads the ingest path: through the running
 * pipeline, every injected fault has exactly its expected outcome.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, closeSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseLoadgenArgs } from '../../cli/loadgen.js';
import { asGymResultEvents, collectExpectations, FAULT_KINDS, generateEvents, gymResultFromRow } from '../../loadgen/index.js';
import type { RolloutRow } from '../../processors/types.js';
import { formatJsonLine } from '../../json-form/form.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { partitionForKey } from '../../streams/topics/partitioner.js';
import type { RowCompletedEvent } from '../../streams/codecs/record-mapping.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { testEnv, type TestEnv } from './helpers.js';
import { launcher, ROOT } from './launcher.js';
import { opsEnv } from './ops-fixture.js';
import { readTopic } from './topic-reader.js';

let env: TestEnv;
let codec: TopicCodec<'rowCompleted'>;
const dir = mkdtempSync(join(tmpdir(), 'rs-produce-'));

beforeAll(async () => {
  env = await testEnv('produce');
  codec = new TopicCodec('rowCompleted', subjectOf(topicNames(env.prefix).rowCompleted), env.registry);
});

afterAll(async () => {
  await env?.close();
});

/** Runs `./rollout-stream produce <args>` with `lines` as a file on stdin. */
function produce(name: string, lines: string[], args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const file = join(dir, `${name}.jsonl`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  const fd = openSync(file, 'r');
  return new Promise((resolve, reject) => {
    const child = spawn(join(ROOT, 'rollout-stream'), ['produce', '--prefix', env.prefix, ...args], { cwd: ROOT, env: process.env, stdio: [fd, 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      closeSync(fd);
      resolve({ code, stdout, stderr });
    });
  });
}

/** One small batch of rows with group ids unique to this test; each test its own batch number (BatchEnds are keyed by batch id). */
function batchRows(runId: string, batch: number): RolloutRow[] {
  const events = generateEvents({ batches: 1, firstBatch: batch, groupsPerBatch: 6, generations: 3, seed: 4, profile: 'small', runId: `${env.prefix}${runId}` });
  return [...events].flatMap((e) => (e.kind === 'row' ? [e.row] : []));
}

interface Landed {
  event: RowCompletedEvent;
  key: string;
  partition: number;
  offset: bigint;
}

/** Every record of the row topic whose key is one of `keys` (group ids or a batch id). */
async function landed(keys: Set<string>, expected: number): Promise<Landed[]> {
  const topic = topicNames(env.prefix).rowCompleted;
  const records = await readTopic(env.kafka, topic, (rs) => rs.filter((r) => keys.has(r.key)).length >= expected, { settleMs: 1500 });
  const mine = records.filter((r) => keys.has(r.key));
  return Promise.all(mine.map(async (r) => ({ event: await codec.decode(r.value), key: r.key, partition: r.partition, offset: BigInt(r.offset) })));
}

/** Records of the rows/results on their murmur2 partitions, and one BatchEnd per partition after the last of them there. */
function expectPlacement(got: Landed[], batchId: string, numRows: number): void {
  const partitions = env.config.topics.partitions;
  const data = got.filter((r) => r.event.kind !== 'batch_end');
  for (const r of data) expect(r.partition, r.key).toBe(partitionForKey(r.key, partitions));
  const ends = got.filter((r) => r.event.kind === 'batch_end');
  expect(ends.map((r) => r.partition).sort()).toEqual(Array.from({ length: partitions }, (_, p) => p));
  for (const end of ends) {
    expect(end.key).toBe(batchId);
    expect(end.event).toEqual({ kind: 'batch_end', end: { batch_id: batchId, num_rows: numRows } });
    const before = data.filter((r) => r.partition === end.partition);
    for (const r of before) expect(r.offset < end.offset, `${r.key} after the BatchEnd on partition ${end.partition}`).toBe(true);
  }
}

describe('the produce command', () => {
  test('a file of rows lands on the murmur2 partitions, BatchEnds follow on every partition, a malformed line is rejected by number', async () => {
    const rows = batchRows('rows', 1);
    const [refused, ...sent] = rows;
    const bad = JSON.parse(formatJsonLine({ kind: 'row', record: refused! }));
    delete bad.weight_version;
    const lines = sent.map((r) => formatJsonLine({ kind: 'row', record: r }));
    lines.splice(4, 0, JSON.stringify(bad)); // line 5
    lines.splice(9, 0, '{"group_id": "oops"'); // line 10
    const run = await produce('rows', lines, ['--format', 'row', '--batch-end']);

    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/line 5: invalid_row: .*missing required field weight_version/);
    expect(run.stderr).toMatch(/line 10: malformed_line: not valid JSON/);
    expect(run.stderr).toMatch(new RegExp(`rows\\s+${sent.length}\\n`));
    expect(run.stderr).toMatch(/lines\s+19 read, 17 accepted, 2 rejected/);

    const batchId = sent[0]!.batch_id;
    const keys = new Set([...rows.map((r) => r.group_id), batchId]);
    const got = await landed(keys, sent.length + env.config.topics.partitions);
    expect(got).toHaveLength(sent.length + env.config.topics.partitions);
    const gotRows = got.flatMap((r) => (r.event.kind === 'row' ? [r.event.row] : []));
    const id = (r: RolloutRow) => `${r.group_id}/${r.row_index}`;
    expect(gotRows.map(id).sort()).toEqual(sent.map(id).sort());
    // Nothing of the refused line reached the topic.
    expect(gotRows.map(id)).not.toContain(id(refused!));
    for (const r of gotRows) expect(r).toEqual(sent.find((s) => id(s) === id(r)));
    expectPlacement(got, batchId, sent.length);
  });

  test('a file of GymResults lands as GymResults on the murmur2 partitions; a row line under --format gym-result is rejected', async () => {
    const rows = batchRows('gym', 2);
    const results = rows.map(gymResultFromRow);
    const lines = results.map((g) => formatJsonLine({ kind: 'gym_result', record: g }));
    const [extra] = batchRows('gym-extra', 9);
    lines.splice(2, 0, formatJsonLine({ kind: 'row', record: extra! })); // line 3
    const broken = JSON.parse(lines[7]!);
    broken.gym_result.response.output = { not: 'a list' };
    const brokenId = `${broken.group_id}/${broken.row_index}`;
    lines[7] = JSON.stringify(broken); // line 8
    const batchId = results[0]!.batch_id;
    lines.push(formatJsonLine({ kind: 'batch_end', end: { batch_id: batchId, num_rows: results.length } }));
    const run = await produce('gym', lines, ['--format', 'gym-result']);

    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('line 3: wrong_format: a row line, but --format gym-result');
    expect(run.stderr).toMatch(/line 8: invalid_gym_result: .*gym_result\.response\.output/);
    expect(run.stderr).toMatch(new RegExp(`gym results ${results.length - 1}\\n`));

    const keys = new Set([...results.map((g) => g.group_id), extra!.group_id, batchId]);
    const got = await landed(keys, results.length - 1 + env.config.topics.partitions);
    expect(got).toHaveLength(results.length - 1 + env.config.topics.partitions);
    expect(got.some((r) => r.event.kind === 'row')).toBe(false);
    const sent = got.flatMap((r) => (r.event.kind === 'gym_result' ? [r.event.result] : []));
    const id = (g: { group_id: string; row_index: number }) => `${g.group_id}/${g.row_index}`;
    expect(sent.map(id).sort()).toEqual(results.map(id).filter((x) => x !== brokenId).sort());
    for (const g of sent) expect(g.gym_result).toEqual(results.find((x) => id(x) === id(g))!.gym_result);
    expectPlacement(got, batchId, results.length);
  });

  test('a clean file exits 0 and says which partitions received rows', async () => {
    const rows = batchRows('clean', 3);
    const run = await produce('clean', rows.map((r) => formatJsonLine({ kind: 'row', record: r })), ['--batch-end']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('');
    const used = [...new Set(rows.map((r) => partitionForKey(r.group_id, env.config.topics.partitions)))].sort((a, b) => a - b);
    expect(run.stderr).toContain(`partitions  ${used.join(', ')} of ${env.config.topics.partitions} received rows`);
    expect(run.stderr).toMatch(/batch ends\s+1 \(1 from --batch-end\)/);
    const got = await landed(new Set([...rows.map((r) => r.group_id), rows[0]!.batch_id]), rows.length + env.config.topics.partitions);
    expectPlacement(got, rows[0]!.batch_id, rows.length);
  });

  test('a prefix without topics stops before reading input, naming the fix', async () => {
    const run = await produce('missing', ['{}'], ['--prefix', `${env.prefix}none.`]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/topic_missing.*topics create/);
  });
});

describe('loadgen --format gym-result', () => {
  test('GymResults with every fault kind through the running pipeline yield exactly the expected dead letters, and every other group is packed', async () => {
    const ops = await opsEnv('produce-gym-loadgen');
    try {
      // Seed 12 injects every fault kind into 2 batches of 6 groups (as in ops-loadgen.test.ts for rows).
      const args = [
        'loadgen',
        '--format', 'gym-result',
        '--profile', 'small',
        '--batches', '2',
        '--groups', '6',
        '--generations', '4',
        '--seed', '12',
        '--faults', 'dup=0.05,conflict=0.05,out_of_range=0.05,nan=0.05,missing=0.04,garbage=0.04,mixed_agents=0.15,task_mismatch=0.15',
        '--run-id', `${ops.prefix}lg`,
        '--prefix', ops.prefix,
        '--quiet',
      ];
      const run = await launcher(args);
      expect(run.code, run.stderr).toBe(0);
      const events = [...asGymResultEvents(generateEvents(parseLoadgenArgs(args.slice(1)).options))];
      const expected = collectExpectations(events);
      const injected = new Set(events.flatMap((e) => (e.kind === 'batch_end' ? (e.expect ?? []) : e.expect ? [e.expect] : [])).map((x) => x.fault));
      expect([...injected].sort()).toEqual([...FAULT_KINDS].sort());
      expect(run.stdout).toMatch(new RegExp(`gym results ${events.filter((e) => e.kind === 'gym_result').length}\\n`));

      const { packed, dead } = await ops.settle(expected.completeGroups.size, expected.deadLetters.length);
      expect(packed.map((r) => r.key).sort()).toEqual([...expected.completeGroups.keys()].sort());
      const got = dead.map((d) => `${d.record.reason}:${d.record.group_id}`).sort();
      expect(got).toEqual(expected.deadLetters.map((e) => `${e.reason}:${e.group_id}`).sort());
    } finally {
      await ops.stop();
    }
  });
});

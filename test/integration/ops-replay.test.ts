import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { captureIo } from '../../cli/io.js';
import { runOffline } from '../../cli/offline.js';
import { parseReplayArgs, runReplay } from '../../cli/replay.js';
import { loadConfig } from '../../config/load.js';
import { generateEvents, UNWANTED_TOKEN_ID, type LoadgenEvent, type LoadgenOptions } from '../../loadgen/index.js';
import type { RolloutRow } from '../../processors/types.js';
import { formatJsonLine, parseJsonLine } from '../../json-form/form.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { subjectOf } from '../../streams/topics/names.js';
import { opsEnv, type OpsEnv } from './ops-fixture.js';
import { readTopic } from './topic-reader.js';

let env: OpsEnv;
let batch1: LoadgenEvent[];
let batch2: LoadgenEvent[];
/** Between the two batches: batch 1 fully packed before, batch 2 produced after. */
let betweenMs: number;

const options = (firstBatch: number): LoadgenOptions => ({
  batches: 1,
  groupsPerBatch: 4,
  generations: 4,
  seed: 21,
  profile: 'small',
  runId: `${env.prefix}r`,
  firstBatch,
  // Enough stray <|endoftext|> tokens that penalizing them changes some rewards.
  shape: { flags: { strayTokenRate: 0.3 } },
});

async function replay(argv: string[], config = env.config) {
  const io = captureIo();
  const summary = await runReplay(parseReplayArgs(['--quiet', ...argv]), config, process.cwd(), io);
  return { summary, lines: io.lines(), stdout: io.stdout() };
}

const rowsOf = (events: LoadgenEvent[]): RolloutRow[] => events.flatMap((e) => (e.kind === 'row' ? [e.row] : []));
const sorted = (xs: string[]) => [...xs].sort();

beforeAll(async () => {
  env = await opsEnv('ops-replay');
  batch1 = [...generateEvents(options(1))];
  batch2 = [...generateEvents(options(2))];
  await env.produce(batch1);
  await env.settle(4, 0);
  await new Promise((r) => setTimeout(r, 100));
  betweenMs = Date.now();
  await new Promise((r) => setTimeout(r, 100));
  await env.produce(batch2);
  await env.settle(8, 0);
});

afterAll(async () => {
  await env?.stop();
});

describe('replay', () => {
  test('replay prints every produced row and batch end as the JSON lines of SPEC §9', async () => {
    const { lines, summary } = await replay(['--topic', 'rollout.row-completed']);
    const partitions = env.config.topics.partitions;
    const want = [...batch1, ...batch2].flatMap((e) =>
      e.kind === 'row'
        ? [formatJsonLine({ kind: 'row', record: e.row })]
        : e.kind === 'batch_end'
          ? Array.from({ length: partitions }, () => formatJsonLine({ kind: 'batch_end', end: e.end }))
          : [],
    );
    expect(summary.complete).toBe(true);
    expect(sorted(lines)).toEqual(sorted(want));
  });

  test('replayed group-complete records equal the groups the offline accumulator builds from the same rows', async () => {
    const offline: string[] = [];
    const input = [...batch1, ...batch2].flatMap((e) =>
      e.kind === 'row' ? [formatJsonLine({ kind: 'row', record: e.row })] : e.kind === 'batch_end' ? [formatJsonLine({ kind: 'batch_end', end: e.end })] : [],
    );
    await runOffline('accumulate', env.config, input, (l) => void offline.push(l));
    const { lines } = await replay(['--topic', `${env.prefix}rollout.group-complete`]);
    expect(lines).toHaveLength(8);
    expect(sorted(lines)).toEqual(sorted(offline.filter((l) => l.startsWith('{"group"'))));
  });

  test('filters by group and by batch keep exactly the matching records on every topic', async () => {
    const group = rowsOf(batch2)[0]!.group_id;
    const packed = await replay(['--topic', 'rollout.packed', '--group', group]);
    expect(packed.lines).toHaveLength(1);
    const p = parseJsonLine(packed.lines[0]!);
    expect(p.kind === 'packed' && p.packed.group_id).toBe(group);

    const metrics = (await replay(['--topic', 'rollout.metrics', '--group', group])).lines.map(parseJsonLine);
    expect(metrics).toHaveLength(1);
    expect(metrics[0]!.kind === 'metrics' && metrics[0]!.metrics.group_id).toBe(group);

    const rows = (await replay(['--topic', 'rollout.row-completed', '--group', group])).lines;
    expect(sorted(rows)).toEqual(sorted(rowsOf(batch2).filter((r) => r.group_id === group).map((r) => formatJsonLine({ kind: 'row', record: r }))));

    const groups = (await replay(['--topic', 'rollout.group-complete', '--batch', 'b000002'])).lines.map(parseJsonLine);
    expect(groups).toHaveLength(4);
    expect(groups.every((g) => g.kind === 'group' && g.group.batch_id === 'b000002')).toBe(true);

    expect((await replay(['--topic', 'rollout.packed', '--batch', 'b000001', '--group', group])).lines).toHaveLength(0);
    expect((await replay(['--topic', 'rollout.packed', '--limit', '3'])).lines).toHaveLength(3);
  });

  test('from-time starts at the first record written at or after the time', async () => {
    const { lines } = await replay(['--topic', 'rollout.group-complete', '--from-time', new Date(betweenMs).toISOString()]);
    const groups = lines.map(parseJsonLine);
    expect(groups).toHaveLength(4);
    expect(new Set(groups.map((g) => (g.kind === 'group' ? g.group.batch_id : '')))).toEqual(new Set(['b000002']));
    const later = await replay(['--topic', 'rollout.group-complete', '--from-time', String(Date.now() + 60_000)]);
    expect(later.lines).toHaveLength(0);
    expect(later.summary.complete).toBe(true);
  });

  test('re-publishing to another prefix copies the exact bytes, keys and partitions', async () => {
    const copyPrefix = `${env.prefix}copy.`;
    const { summary } = await replay(['--topic', 'rollout.packed', '--to-prefix', copyPrefix]);
    expect(summary.matched).toBe(8);
    const source = await readTopic(env.kafka, env.names.packed, (rs) => rs.length >= 8, { settleMs: 200 });
    const copy = await readTopic(env.kafka, `${copyPrefix}rollout.packed`, (rs) => rs.length >= 8, { settleMs: 300 });
    const index = (rs: typeof source) => new Map(rs.map((r) => [r.key, { value: r.value.toString('base64'), partition: r.partition }]));
    expect(copy).toHaveLength(8);
    expect(index(copy)).toEqual(index(source));
  });

  test('re-running postprocess with unwanted tokens penalized zeroes exactly the rewards of rows that contain one', async () => {
    const { config } = loadConfig({
      file: undefined,
      overrides: [
        [['topics', 'prefix'], env.prefix],
        [['postprocess', 'reward_penalties'], { penalize_unwanted_tokens: true, token_ids: { unwanted: [UNWANTED_TOKEN_ID] } }],
      ],
    });
    const sandbox = `${env.prefix}sandbox.`;
    const { summary, stdout } = await replay(['--topic', 'rollout.group-complete', '--rerun-postprocess', '--sandbox-prefix', sandbox], config);
    const report = summary.rerun!;
    expect(report.groups).toBe(8);
    expect(report.penalized).toBe(8);
    expect(report.deadLetters).toEqual([]);

    const rows = new Map([...rowsOf(batch1), ...rowsOf(batch2)].map((r) => [`${r.group_id}#${r.row_index}`, r]));
    const hasUnwanted = (r: RolloutRow) => r.message_log.some((m) => m.role === 'assistant' && m.token_ids.includes(UNWANTED_TOKEN_ID));
    expect(report.rewards).toHaveLength(32);
    let zeroed = 0;
    for (const x of report.rewards) {
      const row = rows.get(`${x.group_id}#${x.row_index}`)!;
      expect(x.before, `${x.group_id}#${x.row_index} before`).toBe(row.full_result.reward);
      if (hasUnwanted(row)) {
        expect(x.after, `${x.group_id}#${x.row_index} is penalized`).toBe(0);
        if (x.before !== 0) zeroed++;
      } else {
        expect(x.after, `${x.group_id}#${x.row_index} is unchanged`).toBe(x.before);
      }
    }
    expect(zeroed).toBeGreaterThan(0);
    expect(stdout).toContain(`${zeroed} of 32 rewards changed`);
    expect(report.metrics.map((m) => m.name)).toContain('unwanted_token_rate');

    // The sandbox holds the new penalized records; production is untouched.
    const codec = new TopicCodec('penalized', subjectOf(`${sandbox}rollout.penalized`), env.registry);
    const written = await readTopic(env.kafka, `${sandbox}rollout.penalized`, (rs) => rs.length >= 8, { settleMs: 300 });
    expect(written).toHaveLength(8);
    for (const r of written) {
      const g = await codec.decode(r.value);
      for (const row of g.rows) expect(row.total_reward).toBe(report.rewards.find((x) => x.group_id === g.group_id && x.row_index === row.row_index)!.after);
    }
    expect(await readTopic(env.kafka, env.names.penalized, (rs) => rs.length >= 8, { settleMs: 300 })).toHaveLength(8);
  });
});

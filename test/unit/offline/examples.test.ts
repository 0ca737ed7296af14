/**
 * The worked examples of docs/formats.md are the fixtures of this test: the
 * offline runner must turn docs/examples/rows.jsonl into exactly the
 * expected output files, so the docs cannot drift from the code. After an
 * intended change of output, regenerate them with
 * `UPDATE_EXAMPLES=1 npx vitest run --project unit test/unit/offline` and
 * review the diff.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { runOffline, type OfflineStage } from '../../../cli/offline.js';
import { configSchema } from '../../../config/schema.js';
import { parse as parseYaml } from 'yaml';

const dir = new URL('../../../docs/examples/', import.meta.url);
const read = (name: string) => readFileSync(new URL(name, dir), 'utf8');
const lines = (text: string) => text.split('\n').filter((l) => l !== '');
const config = configSchema.parse(parseYaml(read('config.yaml')));
const update = process.env.UPDATE_EXAMPLES === '1';

async function run(stage: OfflineStage, input: string[]): Promise<string[]> {
  const out: string[] = [];
  await runOffline(stage, config, input, (l) => void out.push(l));
  return out;
}

async function expectExample(stage: OfflineStage, input: string[], expectedFile: string): Promise<string[]> {
  const actual = await run(stage, input);
  if (update) writeFileSync(new URL(expectedFile, dir), actual.map((l) => l + '\n').join(''));
  expect(actual).toEqual(lines(read(expectedFile)));
  return actual;
}

const withKey = (key: string) => (l: string) => Object.keys(JSON.parse(l))[0] === key;

describe('offline runner on the examples of docs/formats.md', () => {
  test('offline accumulate turns rows.jsonl into accumulate.out.jsonl', async () => {
    await expectExample('accumulate', lines(read('rows.jsonl')), 'accumulate.out.jsonl');
  });

  test('offline postprocess turns the group lines of accumulate.out.jsonl into postprocess.out.jsonl', async () => {
    await expectExample('postprocess', lines(read('accumulate.out.jsonl')).filter(withKey('group')), 'postprocess.out.jsonl');
  });

  test('offline pack turns the penalized lines of postprocess.out.jsonl into pack.out.jsonl', async () => {
    await expectExample('pack', lines(read('postprocess.out.jsonl')).filter(withKey('penalized')), 'pack.out.jsonl');
  });

  test('offline all turns rows.jsonl into all.out.jsonl', async () => {
    await expectExample('all', lines(read('rows.jsonl')), 'all.out.jsonl');
  });

  test('the example shows every accumulate outcome: order restored, replay dropped, range error, incomplete group', () => {
    const out = lines(read('accumulate.out.jsonl')).map((l) => JSON.parse(l));
    const groups = out.filter((o) => o.group).map((o) => o.group);
    expect(groups.map((g) => [g.group_id, g.rows.map((r: { row_index: number }) => r.row_index)])).toEqual([
      ['p40', [0, 1]],
      ['p41', [2, 3]],
    ]);
    const dead = out.filter((o) => o.dead_letter).map((o) => o.dead_letter);
    expect(dead.map((d) => [d.reason, d.group_id, d.row_indices, d.missing_row_indices])).toEqual([
      ['row_index_out_of_range', 'p41', [7], []],
      ['incomplete_group', 'p42', [4], [5]],
    ]);
  });

  test('the all example writes packed, metrics and dead_letter lines only, with the batch metrics last', () => {
    const out = lines(read('all.out.jsonl')).map((l) => JSON.parse(l));
    expect(new Set(out.map((o) => Object.keys(o).join(',')))).toEqual(new Set(['packed', 'metrics', 'dead_letter']));
    const last = out.at(-1).metrics;
    expect(last.scope).toBe('batch');
    expect(last.group_id).toBeUndefined();
    // Final rewards: p40 [1, 0] (verifier), p41 [1, 0] (row 3's empty answer is penalized to 0).
    expect(last.values['total_reward/mean']).toBe(0.5);
    expect(out.filter((o) => o.metrics?.scope === 'group').map((o) => o.metrics.group_id)).toEqual(['p40', 'p41']);
  });
});

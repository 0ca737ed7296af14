import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { runOffline, type OfflineStage } from '../../../cli/offline.js';
import { configSchema, type Config } from '../../../config/schema.js';
import { ConfigError } from '../../../errors/index.js';
import { formatJsonLine, rowToJson } from '../../../json-form/form.js';
import { makeGroup, makeRow } from '../accumulate/fixtures.js';

const defaults = configSchema.parse({});
const rowLine = (spec: Parameters<typeof makeRow>[0]) => JSON.stringify(rowToJson(makeRow(spec)));

async function run(stage: OfflineStage, input: string[], config: Config = defaults) {
  const out: Array<Record<string, any>> = [];
  const counts = await runOffline(stage, config, input, (l) => void out.push(JSON.parse(l)));
  return { out, counts };
}

describe('offline runner (SPEC §9)', () => {
  test('every output line has exactly one record key', async () => {
    const rows = makeGroup({ num_generations: 2 }).map((r) => JSON.stringify(rowToJson(r)));
    for (const stage of ['accumulate', 'all'] as const) {
      const { out } = await run(stage, [...rows, 'not json']);
      for (const o of out) expect(Object.keys(o)).toHaveLength(1);
    }
  });

  test('end of input acts as BatchEnd for every open batch', async () => {
    const { out } = await run('accumulate', [
      rowLine({ batch_id: 'a', group_id: 'x', num_generations: 3, position: 2 }),
      rowLine({ batch_id: 'b', group_id: 'y', num_generations: 2, position: 0 }),
    ]);
    expect(out).toEqual([
      { dead_letter: expect.objectContaining({ reason: 'incomplete_group', group_id: 'x', row_indices: [2], missing_row_indices: [0, 1] }) },
      { dead_letter: expect.objectContaining({ reason: 'incomplete_group', group_id: 'y', row_indices: [0], missing_row_indices: [1] }) },
    ]);
  });

  test('a line that is not JSON becomes an undecodable dead letter and the run goes on', async () => {
    const { out, counts } = await run('accumulate', ['{"row_index": ', rowLine({ num_generations: 1 })]);
    expect(out[0]).toEqual({
      dead_letter: { reason: 'undecodable', message: expect.stringContaining('line 1'), group_id: null, row_indices: [], missing_row_indices: [] },
    });
    expect(out[1]?.group?.group_id).toBe('g0');
    expect(counts.dead_letters).toEqual({ undecodable: 1 });
  });

  test('a line of another stage is an undecodable dead letter', async () => {
    const { out } = await run('pack', [rowLine({ num_generations: 1 })]);
    expect(out).toEqual([{ dead_letter: expect.objectContaining({ reason: 'undecodable', message: expect.stringContaining('expects penalized') }) }]);
  });

  test('offline postprocess rejects a group line holding an invalid row', async () => {
    const rows = makeGroup({ num_generations: 2 });
    const group = { group_id: 'g0', batch_id: 'b0', group_index: 0, num_generations: 2, prompt_idx: 100, task_index: null, rows };
    const json = JSON.parse(formatJsonLine({ kind: 'group', group }));
    json.group.rows[1].row_index = 1.5;
    const { out } = await run('postprocess', [JSON.stringify(json)]);
    expect(out).toEqual([{ dead_letter: expect.objectContaining({ reason: 'row_index_type', group_id: 'g0', row_indices: [0] }) }]);
  });

  test('offline all writes packed and group metrics per group and one batch metrics line per batch', async () => {
    const input = [
      ...makeGroup({ batch_id: 'b1', group_index: 0, num_generations: 2 }),
      ...makeGroup({ batch_id: 'b1', group_index: 1, num_generations: 2, group_id: 'h1' }),
    ].map((r) => JSON.stringify(rowToJson(r)));
    const { out } = await run('all', input);
    expect(out.map((o) => Object.keys(o)[0])).toEqual(['packed', 'metrics', 'packed', 'metrics', 'metrics']);
    expect(out.map((o) => o.metrics?.scope ?? null)).toEqual([null, 'group', null, 'group', 'batch']);
    // fixtures give reward position/2: each group has rewards [0, 0.5].
    expect(out[1]?.metrics.values['total_reward/mean']).toBe(0.25);
    expect(out[4]?.metrics).toMatchObject({ scope: 'batch', batch_id: 'b1' });
    expect(out[4]?.metrics.values['total_reward/max']).toBe(0.5);
    expect(out[4]?.metrics.values['total_reward/mean']).toBe(0.25);
    expect(out[0]?.packed.sample_ids).toEqual(['g0_g0', 'g0_g1']);
  });

  test('a postprocess config error is raised before any input is read', async () => {
    const bad = configSchema.parse({ postprocess: { reward_penalties: { penalize_unwanted_tokens: true } } });
    let read = false;
    const input = (async function* () {
      read = true;
      yield '';
    })();
    await expect(runOffline('all', bad, input, () => {})).rejects.toThrow(ConfigError);
    await expect(runOffline('all', bad, [], () => {})).rejects.toThrow(/postprocess\.reward_penalties\.token_ids\.unwanted/);
    expect(read).toBe(false);
  });

  test('the command exits 2 naming the key of an invalid config without waiting for stdin', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'offline-'));
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'postprocess:\n  mask_env_flagged_samples: 0\n');
    const script = fileURLToPath(new URL('../../../cli/offline.ts', import.meta.url));
    // stdin is left open and never ended: a process that waited for input would not exit.
    const child = spawn(process.execPath, ['--import', 'tsx', script, 'all', '--config', file], { stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', (b) => (stderr += b));
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve(null);
      }, 20_000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toContain('postprocess.mask_env_flagged_samples');
  });
});

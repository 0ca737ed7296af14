/**
 * GymResult lines in the offline runner (SPEC §2.1, §9): `offline ingest`
 * converts them into row lines, `accumulate` and `all` accept them mixed with
 * rows, and a line re-sent with another `produced_at` is a replay (§3 rule 3).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { runOffline, type OfflineCounts, type OfflineStage } from '../../../cli/offline.js';
import { configSchema } from '../../../config/schema.js';

const config = configSchema.parse({});
const gymLines = readFileSync(new URL('../../../docs/examples/gym-result.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l !== '');

async function run(stage: OfflineStage, input: string[]): Promise<{ out: string[]; counts: OfflineCounts }> {
  const out: string[] = [];
  const counts = await runOffline(stage, config, input, (l) => void out.push(l));
  return { out, counts };
}

const withField = (line: string, edit: (o: Record<string, any>) => void) => {
  const o = JSON.parse(line) as Record<string, any>;
  edit(o);
  return JSON.stringify(o);
};

describe('GymResult lines offline', () => {
  test('ingest writes one row line per result; accumulate and all give the same output from those rows as from the results', async () => {
    const ingested = await run('ingest', gymLines);
    expect(ingested.counts.ingested).toBe(gymLines.length);
    expect(ingested.out).toHaveLength(gymLines.length);
    for (const l of ingested.out) expect(Object.keys(JSON.parse(l))).toContain('message_log');
    for (const stage of ['accumulate', 'all'] as const) {
      const fromRows = await run(stage, ingested.out);
      const fromResults = await run(stage, gymLines);
      expect(fromResults.out.length).toBeGreaterThan(0);
      expect(fromResults.out).toEqual(fromRows.out);
    }
  });

  test('a row line and a GymResult line of the same group are accumulated together', async () => {
    const [firstRow] = (await run('ingest', gymLines.slice(0, 1))).out;
    const mixed = await run('accumulate', [firstRow!, gymLines[1]!]);
    const all = await run('accumulate', gymLines);
    expect(mixed.out).toEqual(all.out);
    expect(mixed.counts.groups).toBe(1);
  });

  test('ingest passes BatchEnd lines through for the accumulate run that reads its output', async () => {
    const end = JSON.stringify({ batch_end: { batch_id: 'step-2', num_rows: 2 } });
    const { out } = await run('ingest', [...gymLines, end]);
    expect(out.at(-1)).toBe(end);
  });

  test('a result re-sent with another produced_at is a replay; with other content it is duplicate_row_index', async () => {
    const resent = withField(gymLines[0]!, (o) => (o.produced_at = '2026-01-05T11:30:00.000Z'));
    const changed = withField(gymLines[0]!, (o) => (o.gym_result.reward = 0.25));
    const replay = await run('accumulate', [gymLines[0]!, resent, gymLines[1]!]);
    expect(replay.counts.replays).toBe(1);
    expect(replay.counts.dead_letters).toEqual({});
    const conflict = await run('accumulate', [gymLines[0]!, changed, gymLines[1]!]);
    expect(conflict.counts.replays).toBe(0);
    expect(conflict.counts.dead_letters).toEqual({ duplicate_row_index: 1 });
  });

  test('an unconvertible result is a row-level dead letter in ingest and in accumulate (its group stays open, then incomplete)', async () => {
    // Row 0 is multi-turn: its second trainable item must extend the tokens of the first.
    const broken = withField(gymLines[0]!, (o) => {
      const items = (o.gym_result.response.output as Array<Record<string, unknown>>).filter((i) => Array.isArray(i.prompt_token_ids));
      expect(items.length).toBeGreaterThan(1);
      (items[1]!.prompt_token_ids as number[])[0] = 999_999;
    });
    const ingest = await run('ingest', [broken]);
    expect(ingest.out).toHaveLength(1);
    expect(JSON.parse(ingest.out[0]!).dead_letter).toMatchObject({ reason: 'non_contiguous_tokens', row_indices: [0] });
    const acc = await run('accumulate', [broken, gymLines[1]!]);
    expect(acc.counts.dead_letters).toEqual({ non_contiguous_tokens: 1, incomplete_group: 1 });
  });
});

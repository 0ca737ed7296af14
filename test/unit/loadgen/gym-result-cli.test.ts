/** `loadgen --format gym-result` from the command's side: flags, the dry run's JSON lines, the summary. */
import { describe, expect, test } from 'vitest';
import { UsageError } from '../../../tools/command.js';
import { captureIo } from '../../../cli/io.js';
import { formatLoadgenSummary, parseLoadgenArgs, runLoadgen } from '../../../cli/loadgen.js';
import { loadConfig } from '../../../config/load.js';
import { generateEvents, gymResultFromRow } from '../../../loadgen/index.js';
import { formatJsonLine, parseJsonLine } from '../../../json-form/form.js';

describe('loadgen --format gym-result', () => {
  test('the format defaults to rows and only row or gym-result are accepted', () => {
    expect(parseLoadgenArgs(['--dry-run']).format).toBe('row');
    expect(parseLoadgenArgs(['--format', 'gym-result', '--dry-run']).format).toBe('gym-result');
    expect(() => parseLoadgenArgs(['--format', 'gym'])).toThrow(UsageError);
    expect(() => parseLoadgenArgs(['--format', 'gym'])).toThrow(/--format must be row or gym-result/);
  });

  test('a dry run writes every row as its GymResult line, same batch ends, garbage counted but not written', async () => {
    const args = parseLoadgenArgs(['--profile', 'small', '--batches', '2', '--groups', '3', '--faults', 'garbage=0.2,nan=0.1,dup=0.1', '--seed', '4', '--dry-run', '--quiet', '--format', 'gym-result']);
    const io = captureIo();
    const { config } = loadConfig({ file: undefined });
    const summary = await runLoadgen(args, config, io);
    const events = [...generateEvents(args.options)];
    const want = events
      .filter((e) => e.kind !== 'garbage')
      .map((e) => (e.kind === 'row' ? formatJsonLine({ kind: 'gym_result', record: gymResultFromRow(e.row) }) : formatJsonLine({ kind: 'batch_end', end: e.end })));
    expect(io.lines()).toEqual(want);
    expect(io.lines().map((l) => parseJsonLine(l).kind)).toEqual(events.filter((e) => e.kind !== 'garbage').map((e) => (e.kind === 'row' ? 'gym_result' : 'batch_end')));
    expect(summary.rows).toBe(events.filter((e) => e.kind === 'row').length);
    expect(summary.garbage).toBe(events.filter((e) => e.kind === 'garbage').length);
    expect(summary.garbage).toBeGreaterThan(0);
    expect(summary.faults.nan).toBeGreaterThan(0);
    const text = formatLoadgenSummary(summary);
    expect(text).toContain(`gym results ${summary.rows}`);
    expect(text).toContain('as NeMo-Gym results');
    expect(text).toMatch(/results\/s/);
  });
});

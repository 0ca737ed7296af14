/**
 * `./rollout-stream produce` on JSON lines, with the real publisher over an
 * in-memory transport: what is published where, what is rejected with
 * which line number, and the BatchEnds `--batch-end` adds.
 */
import { describe, expect, test } from 'vitest';
import { formatProduceSummary, parseProduceArgs, runProduce, type ProduceArgs } from '../../../cli/produce.js';
import { captureIo } from '../../../cli/io.js';
import { UsageError } from '../../../tools/command.js';
import { generateEvents, gymResultFromRow } from '../../../loadgen/index.js';
import type { RolloutRow } from '../../../processors/types.js';
import { formatJsonLine } from '../../../json-form/form.js';
import { partitionForKey } from '../../../streams/topics/partitioner.js';
import { RolloutPublisher } from '../../../streams/publish/publisher.js';
import { codec, MemoryTransport } from './memory-transport.js';

const PARTITIONS = 4;

function rowsOf(batches = 2): RolloutRow[] {
  const events = generateEvents({ batches, groupsPerBatch: 3, generations: 2, seed: 11, profile: 'small' });
  return [...events].flatMap((e) => (e.kind === 'row' ? [e.row] : []));
}

const rowLine = (r: RolloutRow) => formatJsonLine({ kind: 'row', record: r });
const gymLine = (r: RolloutRow) => formatJsonLine({ kind: 'gym_result', record: gymResultFromRow(r) });
const endLine = (batch: string, n: number) => formatJsonLine({ kind: 'batch_end', end: { batch_id: batch, num_rows: n } });

async function* feed(lines: string[]): AsyncGenerator<string> {
  yield* lines;
}

async function produce(lines: string[], flags: string[] = [], tty = false) {
  const args: ProduceArgs = parseProduceArgs(flags);
  const transport = new MemoryTransport(PARTITIONS);
  const publisher = new RolloutPublisher({ transport, encode: (e) => codec.encodeBody(e), lingerMs: 10_000 });
  const io = { ...captureIo(), errIsTty: tty };
  const summary = await runProduce(args, feed(lines), publisher, io, 'rollout.row-completed');
  await publisher.close();
  return { summary, transport, io, got: transport.decoded() };
}

describe('produce', () => {
  test('publishes row lines on their murmur2 partitions and batch_end lines to every partition after the rows', async () => {
    const rows = rowsOf(1);
    const { summary, got } = await produce([...rows.map(rowLine), endLine('b000001', rows.length)]);
    expect(summary.rejected).toEqual([]);
    const published = got.filter((r) => r.kind === 'row');
    expect(published.map((r) => r.kind === 'row' && r.row)).toEqual(rows);
    for (const r of published) expect(r.partition).toBe(partitionForKey(r.key, PARTITIONS));
    const ends = got.slice(rows.length);
    expect(ends.map((r) => [r.kind, r.partition])).toEqual([0, 1, 2, 3].map((p) => ['batch_end', p]));
    expect(summary.stats).toMatchObject({ rows: rows.length, results: 0, batchEnds: 1, records: rows.length + PARTITIONS });
  });

  test('publishes GymResult lines as GymResults', async () => {
    const rows = rowsOf(1);
    const { summary, got } = await produce(rows.map(gymLine), ['--format', 'gym-result']);
    expect(summary.rejected).toEqual([]);
    // Token ids and logprobs come back as the typed arrays the loadgen result holds (binary columns).
    expect(got.map((r) => r.kind === 'gym_result' && r.result)).toEqual(rows.map(gymResultFromRow).map((g) => expect.objectContaining({ group_id: g.group_id, gym_result: g.gym_result })));
    for (const r of got) expect(r.partition).toBe(partitionForKey(r.key, PARTITIONS));
    expect(summary.stats.results).toBe(rows.length);
  });

  test('rejects bad lines with their line number and reason, sends nothing of them, and still publishes the others', async () => {
    const rows = rowsOf(1);
    const noBatch = JSON.parse(rowLine(rows[1]!));
    delete noBatch.batch_id;
    const outOfRange = { ...JSON.parse(rowLine(rows[2]!)), row_index: 500 };
    const lines = [
      rowLine(rows[0]!), // 1
      '', // 2: blank, skipped
      '{"batch_id": "b", ', // 3
      JSON.stringify(noBatch), // 4
      JSON.stringify(outOfRange), // 5
      '{"metrics": {"scope": "batch", "batch_id": "b", "values": {}}}', // 6
      '[1, 2]', // 7
      rowLine(rows[3]!), // 8
      '{"batch_end": {"batch_id": "", "num_rows": 1}}', // 9
    ];
    const { summary, got } = await produce(lines);
    expect(summary.rejected.map((r) => [r.line, r.reason])).toEqual([
      [3, 'malformed_line'],
      [4, 'invalid_row'],
      [5, 'row_index_out_of_range'],
      [6, 'not_a_record'],
      [7, 'malformed_line'],
      [9, 'invalid_batch_end'],
    ]);
    expect(summary.rejected[1]!.message).toMatch(/batch_id/);
    expect(summary.rejected[2]!.message).toMatch(/row_index 500/);
    expect(got.map((r) => r.kind === 'row' && r.row.row_index)).toEqual([rows[0]!.row_index, rows[3]!.row_index]);
    expect(summary.lines).toBe(8);
    const text = formatProduceSummary(summary);
    expect(text).toMatch(/lines\s+8 read, 2 accepted, 6 rejected/);
    expect(text).toContain(`line 4: invalid_row: row refused (invalid_row): missing required field batch_id`);
    expect(text).toContain('line 3: malformed_line');
  });

  test('--format accepts only its kind of record line', async () => {
    const rows = rowsOf(1);
    const onlyRows = await produce([rowLine(rows[0]!), gymLine(rows[1]!)], ['--format', 'row']);
    expect(onlyRows.summary.rejected).toEqual([{ line: 2, reason: 'wrong_format', message: 'a GymResult line, but --format row' }]);
    expect(onlyRows.got.map((r) => r.kind)).toEqual(['row']);
    const onlyGym = await produce([rowLine(rows[0]!), gymLine(rows[1]!)], ['--format', 'gym-result']);
    expect(onlyGym.summary.rejected.map((r) => [r.line, r.reason])).toEqual([[1, 'wrong_format']]);
    expect(onlyGym.got.map((r) => r.kind)).toEqual(['gym_result']);
    const both = await produce([rowLine(rows[0]!), gymLine(rows[1]!)]);
    expect(both.got.map((r) => r.kind)).toEqual(['row', 'gym_result']);
  });

  test('--batch-end closes every batch at the end of input with the records it published', async () => {
    const rows = rowsOf(2);
    const b1 = rows.filter((r) => r.batch_id === 'b000001');
    const b2 = rows.filter((r) => r.batch_id === 'b000002');
    const broken = { ...JSON.parse(rowLine(b2[0]!)), num_generations: 0 };
    // Interleaved batches; one bad b2 line does not count.
    const lines = [...b1.slice(0, 2).map(rowLine), JSON.stringify(broken), ...b2.slice(1).map(rowLine), ...b1.slice(2).map(rowLine)];
    const { summary, got } = await produce(lines, ['--batch-end']);
    expect(summary.rejected.map((r) => r.reason)).toEqual(['invalid_row']);
    const ends = got.filter((r) => r.kind === 'batch_end');
    expect(ends.map((r) => r.kind === 'batch_end' && [r.end.batch_id, r.end.num_rows, r.partition])).toEqual([
      ...[0, 1, 2, 3].map((p) => ['b000001', b1.length, p]),
      ...[0, 1, 2, 3].map((p) => ['b000002', b2.length - 1, p]),
    ]);
    // After every row.
    expect(got.slice(0, rows.length - 1).every((r) => r.kind === 'row')).toBe(true);
    expect(summary.autoBatchEnds).toBe(2);
    expect(formatProduceSummary(summary)).toMatch(/batch ends\s+2 \(2 from --batch-end\), each to all 4 partitions/);
  });

  test('--batch-end adds nothing for a batch whose last row is already followed by a batch_end line', async () => {
    const rows = rowsOf(2);
    const b1 = rows.filter((r) => r.batch_id === 'b000001');
    const b2 = rows.filter((r) => r.batch_id === 'b000002');
    // b1 closed explicitly; b2 has a batch_end line too early, then more rows.
    const lines = [...b1.map(rowLine), endLine('b000001', b1.length), rowLine(b2[0]!), endLine('b000002', 1), ...b2.slice(1).map(rowLine)];
    const { got } = await produce(lines, ['--batch-end']);
    const ends = got.filter((r) => r.kind === 'batch_end').map((r) => r.kind === 'batch_end' && `${r.end.batch_id}:${r.end.num_rows}`);
    expect(ends).toEqual([...Array(4).fill(`b000001:${b1.length}`), ...Array(4).fill('b000002:1'), ...Array(4).fill(`b000002:${b2.length}`)]);
    expect(got[got.length - 1]!.kind).toBe('batch_end');
  });

  test('without --batch-end no BatchEnd is written that the input does not contain', async () => {
    const { got } = await produce(rowsOf(1).map(rowLine));
    expect(got.filter((r) => r.kind === 'batch_end')).toEqual([]);
  });

  test('--stamp-identity numbers each batch\'s record lines as groups of N consecutive rows', async () => {
    const rows = rowsOf(1).slice(0, 5);
    const lines = rows.map((r) => {
      const o = JSON.parse(gymLine(r));
      delete o.group_index;
      delete o.row_index;
      delete o.num_generations;
      return JSON.stringify(o);
    });
    const { summary, got } = await produce(lines, ['--stamp-identity', '2']);
    expect(summary.rejected).toEqual([]);
    expect(got.map((r) => r.kind === 'gym_result' && [r.result.group_index, r.result.row_index, r.result.num_generations])).toEqual([
      [0, 0, 2],
      [0, 1, 2],
      [1, 2, 2],
      [1, 3, 2],
      [2, 4, 2],
    ]);
  });

  test('progress is drawn on a terminal only, on stderr', async () => {
    const rows = rowsOf(1);
    const piped = await produce(rows.map(rowLine));
    expect(piped.io.stderr()).toBe('');
    const tty = await produce(rows.map(rowLine), [], true);
    expect(tty.io.stderr()).toMatch(/produce: .*records/);
    expect(tty.io.stdout()).toBe('');
  });

  test('flags are checked before anything is read', () => {
    expect(() => parseProduceArgs(['--format', 'csv'])).toThrow(UsageError);
    expect(() => parseProduceArgs(['--stamp-identity', '0'])).toThrow(/stamp-identity/);
    expect(() => parseProduceArgs(['--bogus'])).toThrow(UsageError);
    expect(parseProduceArgs([])).toMatchObject({ format: null, batchEnd: false, stampN: null });
  });
});

/**
 * The TypeScript publisher of SPEC §2.2 against an in-memory transport: where
 * each record goes, BatchEnd ordering, validation before anything is sent,
 * buffering and failure handling.
 */
import { describe, expect, test } from 'vitest';
import { generateEvents, gymResultFromRow, parseFaultSpec } from '../../../loadgen/index.js';
import type { GymResult, JsonObject, RolloutRow } from '../../../processors/types.js';
import { partitionForKey } from '../../../streams/topics/partitioner.js';
import {
  batchIdentity,
  PublishValidationError,
  RolloutPublisher,
  stampBatchIdentity,
  type RolloutPublisherOptions,
} from '../../../streams/publish/publisher.js';
import { codec, MemoryTransport } from './memory-transport.js';

function publisher(partitions = 4, o: Partial<RolloutPublisherOptions> = {}): { p: RolloutPublisher; t: MemoryTransport } {
  const t = new MemoryTransport(partitions);
  return { p: new RolloutPublisher({ transport: t, encode: (e) => codec.encodeBody(e), lingerMs: 10_000, ...o }), t };
}

function sampleRows(n = 24, faults = ''): RolloutRow[] {
  const events = generateEvents({ batches: 1, groupsPerBatch: 6, generations: 4, seed: 7, profile: 'small', faults: parseFaultSpec(faults) });
  return [...events].flatMap((e) => (e.kind === 'row' ? [e.row] : [])).slice(0, n);
}

async function refusal(p: Promise<unknown>): Promise<PublishValidationError> {
  const e = await p.then(
    () => null,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(PublishValidationError);
  return e as PublishValidationError;
}

describe('RolloutPublisher', () => {
  test('keys every row by its group id on the partition the Java client would pick', async () => {
    const { p, t } = publisher(5);
    const rows = sampleRows();
    for (const row of rows) {
      const receipt = await p.publishRow(row);
      expect(receipt.partition).toBe(partitionForKey(row.group_id, 5));
    }
    await p.flush();
    const got = t.decoded();
    expect(got).toHaveLength(rows.length);
    got.forEach((r, i) => {
      expect(r.key).toBe(rows[i]!.group_id);
      expect(r.partition).toBe(partitionForKey(rows[i]!.group_id, 5));
      expect(r.kind === 'row' && r.row).toEqual(rows[i]);
    });
    expect(p.stats().partitionsUsed).toEqual([...new Set(rows.map((r) => partitionForKey(r.group_id, 5)))].sort());
  });

  test('endBatch sends the batch rows first, then one BatchEnd to every partition', async () => {
    const { p, t } = publisher(3);
    const rows = sampleRows(10);
    for (const row of rows) await p.publishRow(row);
    expect(t.records).toHaveLength(0); // still buffered: nothing forces a send yet
    await p.endBatch('b000001', 10);
    const got = t.decoded();
    expect(got.slice(0, 10).map((r) => r.kind)).toEqual(Array(10).fill('row'));
    const ends = got.slice(10);
    expect(ends.map((r) => [r.kind, r.partition, r.key])).toEqual([0, 1, 2].map((q) => ['batch_end', q, 'b000001']));
    expect(ends.every((r) => r.kind === 'batch_end' && r.end.num_rows === 10 && r.end.batch_id === 'b000001')).toBe(true);
    // The rows went out in a request of their own, acknowledged before the markers were sent.
    expect(t.sends.map((s) => s.length)).toEqual([10, 3]);
    expect(p.stats()).toMatchObject({ rows: 10, batchEnds: 1, records: 13 });
  });

  test('a row validateRow rejects is refused naming the field, and nothing of it is sent', async () => {
    const { p, t } = publisher();
    const good = sampleRows(2);
    const cases: Array<[(r: Record<string, unknown>) => void, string, RegExp]> = [
      [(r) => delete r.batch_id, 'invalid_row', /batch_id/],
      [(r) => (r.row_index = 99), 'row_index_out_of_range', /row_index 99/],
      [(r) => (r.row_index = '1'), 'row_index_type', /row_index/],
      [(r) => ((r.message_log as Array<Record<string, unknown>>)[1]!.generation_logprobs = new Float32Array(1)), 'invalid_row', /message_log\[1\] generation_logprobs/],
      [(r) => (r.agent_ref = { id: 3 }), 'invalid_row', /agent_ref\.name/],
    ];
    for (const [mutate, reason, field] of cases) {
      const bad = structuredClone(good[0]!) as unknown as Record<string, unknown>;
      mutate(bad);
      const e = await refusal(p.publishRow(bad as unknown as RolloutRow));
      expect(e.reason).toBe(reason);
      expect(e.message).toMatch(field);
      expect(e.code).toBe('publish_invalid');
      expect(e.group_id).toBe(good[0]!.group_id);
    }
    await p.publishRow(good[1]!);
    await p.flush();
    expect(t.records).toHaveLength(1);
    expect(p.stats()).toMatchObject({ rows: 1, records: 1 });
  });

  test('a row with a NaN logprob is sent: the pipeline dead-letters it as nan_logprobs', async () => {
    const { p, t } = publisher();
    const row = sampleRows(1)[0]!;
    row.message_log[1]!.generation_logprobs![0] = Number.NaN;
    await p.publishRow(row);
    await p.flush();
    const [got] = t.decoded();
    expect(got!.kind === 'row' && Number.isNaN(got!.row.message_log[1]!.generation_logprobs![0])).toBe(true);
  });

  test('publishResult sends token ids and logprobs as binary columns (typed arrays or lists, NaN kept), other typed arrays as lists and NaN as "NaN", leaving the caller object alone', async () => {
    const { p, t } = publisher(4);
    const g = gymResultFromRow(sampleRows(1)[0]!);
    const item = ((g.gym_result.response as JsonObject).output as JsonObject[]).find((i) => i.generation_token_ids)!;
    const tokens = Array.from(item.generation_token_ids as unknown as Int32Array);
    const mine = structuredClone(g) as unknown as Record<string, unknown>;
    const myItem = (((mine.gym_result as JsonObject).response as JsonObject).output as JsonObject[]).find((i) => i.generation_token_ids)!;
    const lp = new Float32Array(tokens.length).fill(-0.5);
    lp[1] = Number.NaN;
    (myItem as Record<string, unknown>).generation_token_ids = Int32Array.from(tokens);
    (myItem as Record<string, unknown>).generation_log_probs = lp;
    const receipt = await p.publishResult(mine as unknown as GymResult);
    expect(receipt.partition).toBe(partitionForKey(g.group_id, 4));
    await p.flush();
    const [got] = t.decoded();
    expect(got!.kind).toBe('gym_result');
    const sent = ((got as { result: GymResult }).result.gym_result.response as JsonObject).output as JsonObject[];
    const sentItem = sent.find((i) => i.generation_token_ids)!;
    expect(sentItem.generation_token_ids).toEqual(Int32Array.from(tokens));
    expect(sentItem.generation_log_probs).toEqual(Float64Array.from([-0.5, Number.NaN, ...Array(tokens.length - 2).fill(-0.5)]));
    expect(myItem.generation_log_probs).toBe(lp);
    expect(p.stats()).toMatchObject({ results: 1, rows: 0 });
    // Plain numbers too, anywhere in the two objects.
    const plain = structuredClone(g) as unknown as Record<string, unknown>;
    const plainItem = (((plain.gym_result as JsonObject).response as JsonObject).output as JsonObject[]).find((i) => i.generation_token_ids)!;
    (plainItem as Record<string, unknown>).generation_log_probs = tokens.map((_, i) => (i === 0 ? Number.NaN : -1));
    (plain.gym_result as Record<string, unknown>).reward = -Infinity;
    // Not int32 ids: stays in the JSON text, as a list.
    (plainItem as Record<string, unknown>).prompt_token_ids = Float32Array.from([0.5, 1]);
    await p.publishResult(plain as unknown as GymResult);
    await p.flush();
    const second = (t.decoded()[1] as { result: GymResult }).result.gym_result;
    expect(second.reward).toBe('-Infinity');
    const secondItem = ((second.response as JsonObject).output as JsonObject[]).find((i) => i.generation_token_ids)!;
    expect(Number.isNaN((secondItem.generation_log_probs as unknown as Float64Array)[0])).toBe(true);
    expect(secondItem.prompt_token_ids).toEqual([0.5, 1]);
    expect(Number.isNaN(((plainItem.generation_log_probs as number[])[0]))).toBe(true);
  });

  test('a structurally broken GymResult is refused naming the field, and nothing is sent', async () => {
    const { p, t } = publisher();
    const g = gymResultFromRow(sampleRows(1)[0]!);
    const cases: Array<[(r: Record<string, unknown>) => void, RegExp]> = [
      [(r) => (((r.gym_result as JsonObject).response as JsonObject).output = 'x'), /gym_result\.response\.output/],
      [(r) => delete r.gym_row, /gym_row/],
      [(r) => (r.row_index = 1000), /row_index/],
      [(r) => delete r.weight_version, /weight_version/],
    ];
    for (const [mutate, field] of cases) {
      const bad = structuredClone(g) as unknown as Record<string, unknown>;
      mutate(bad);
      const e = await refusal(p.publishResult(bad as unknown as GymResult));
      expect([e.reason, e.record]).toEqual(['invalid_gym_result', 'gym_result']);
      expect(e.message).toMatch(field);
    }
    await p.flush();
    expect(t.records).toHaveLength(0);
  });

  test('a record over the size limit and a value Avro cannot hold are refused before sending', async () => {
    const { p, t } = publisher(2, { maxRecordBytes: 200 });
    const big = await refusal(p.publishRow(sampleRows(1)[0]!));
    expect(big.reason).toBe('record_too_large');
    expect(big.message).toMatch(/exceed the ceiling of 200/);
    const { p: p2 } = publisher();
    const row = sampleRows(1)[0]!;
    row.produced_at = 1.5;
    const odd = await refusal(p2.publishRow(row));
    expect(odd.reason).toBe('not_encodable');
    expect(odd.message).toMatch(/produced_at/);
    await p.flush();
    expect(t.records).toHaveLength(0);
  });

  test('a BatchEnd with a bad batch id or row count is refused', async () => {
    const { p, t } = publisher();
    expect((await refusal(p.endBatch('', 3))).message).toMatch(/batch_id/);
    expect((await refusal(p.endBatch('b1', -1))).message).toMatch(/num_rows/);
    expect((await refusal(p.endBatch('b1', Number.NaN))).message).toMatch(/num_rows/);
    expect(t.records).toHaveLength(0);
  });

  test('a buffered record goes out after lingerMs without a flush; a full buffer is sent before publish returns', async () => {
    const { p, t } = publisher(4, { lingerMs: 5 });
    await p.publishRow(sampleRows(1)[0]!);
    expect(t.records).toHaveLength(0);
    await new Promise((r) => setTimeout(r, 50));
    expect(t.records).toHaveLength(1);
    const { p: p2, t: t2 } = publisher(4, { flushRecords: 3 });
    const rows = sampleRows(3);
    for (const r of rows) await p2.publishRow(r);
    expect(t2.sends.map((s) => s.length)).toEqual([3]);
  });

  test('a failed send breaks the publisher: flush throws it, every later call refuses', async () => {
    const { p, t } = publisher();
    await p.publishRow(sampleRows(1)[0]!);
    t.fail = new Error('broker gone');
    await expect(p.flush()).rejects.toThrow('broker gone');
    await expect(p.publishRow(sampleRows(1)[0]!)).rejects.toMatchObject({ code: 'publish_failed' });
    await expect(p.endBatch('b', 1)).rejects.toMatchObject({ code: 'publish_failed' });
    await p.close();
    expect(t.closed).toBe(true);
  });

  test('close sends what is buffered, disconnects, and the publisher refuses calls afterwards', async () => {
    const { p, t } = publisher();
    await p.publishRow(sampleRows(1)[0]!);
    await p.close();
    expect(t.records).toHaveLength(1);
    expect(t.closed).toBe(true);
    await p.close();
    await expect(p.publishRow(sampleRows(1)[0]!)).rejects.toMatchObject({ code: 'publisher_closed' });
  });
});

describe('batch identity stamping', () => {
  test('the i-th task row of a batch of groups of N is row i of group i // N', () => {
    expect([0, 1, 2, 3, 4].map((i) => batchIdentity(i, 2))).toEqual([
      { group_index: 0, row_index: 0, num_generations: 2 },
      { group_index: 0, row_index: 1, num_generations: 2 },
      { group_index: 1, row_index: 2, num_generations: 2 },
      { group_index: 1, row_index: 3, num_generations: 2 },
      { group_index: 2, row_index: 4, num_generations: 2 },
    ]);
    const input = [{ a: 1 }, { a: 2 }, { a: 3 }];
    expect(stampBatchIdentity(input, 3).map((r) => [r.a, r.group_index, r.row_index])).toEqual([[1, 0, 0], [2, 0, 1], [3, 0, 2]]);
    expect(input[0]).toEqual({ a: 1 });
    expect(() => batchIdentity(0, 0)).toThrow(/num_generations/);
    expect(() => batchIdentity(-1, 2)).toThrow(/position/);
  });
});

/**
 * SPEC §3 rule 3: a row re-sent with identical content is a replay even when
 * its `produced_at` differs (a publisher re-sending a batch after a crash
 * stamps new times). `replayIdentity` is the bytes the accumulator hashes.
 */
import { describe, expect, test } from 'vitest';
import type { GymResult, RolloutRow } from '../../../processors/types.js';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import { HEADER_BYTES, replayIdentity } from '../../../streams/codecs/wire-format.js';
import { makeRow } from '../accumulate/fixtures.js';

const codec = new AvroBodyCodec('rowCompleted');
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function rowValue(row: RolloutRow, schemaId = 7): { value: Buffer; identity: Uint8Array } {
  const value = codec.encodeFramed({ kind: 'row', row }, schemaId);
  return { value, identity: replayIdentity(value, row.produced_at) };
}

const gym: GymResult = {
  batch_id: 'b0',
  group_id: 'g0',
  group_index: 0,
  row_index: 1,
  num_generations: 2,
  prompt_idx: 3,
  weight_version: 4,
  gym_row: { responses_create_params: { input: 'hi' }, agent_ref: { name: 'a' } },
  gym_result: { reward: 1, response: { output: [] } },
};

describe('replayIdentity', () => {
  test.each([null, 0, 1, -1, 63, 64, 1_733_000_000_000, -1_733_000_000_000, 2 ** 50])(
    'a row with produced_at %s has the identity of the same row without it',
    (at) => {
      const base = makeRow({ position: 1 });
      const a = rowValue({ ...base, produced_at: at });
      const b = rowValue({ ...base, produced_at: null });
      expect(hex(a.identity)).toBe(hex(b.identity));
      // The identity is the body up to produced_at: everything else is in it.
      expect(a.identity.length).toBe(b.value.length - HEADER_BYTES - 1);
    },
  );

  test('the schema id is not part of the identity (old and new writer ids of one schema)', () => {
    const row = makeRow({ position: 0 });
    expect(hex(rowValue(row, 1).identity)).toBe(hex(rowValue(row, 99).identity));
  });

  test('any other difference changes the identity', () => {
    const row = makeRow({ position: 0 });
    const changed = { ...row, weight_version: row.weight_version + 1 };
    expect(hex(rowValue(row).identity)).not.toBe(hex(rowValue(changed).identity));
  });

  test('GymResults: produced_at ignored, content compared', () => {
    const at = (produced_at: number | null, reward = 1) => {
      const value = codec.encodeFramed({ kind: 'gym_result', result: { ...gym, produced_at, gym_result: { ...gym.gym_result, reward } } }, 3);
      return hex(replayIdentity(value, produced_at));
    };
    expect(at(1_733_000_000_123)).toBe(at(null));
    expect(at(5)).toBe(at(1_733_000_000_123));
    expect(at(5, 0)).not.toBe(at(5, 1));
  });

  test('a tail that is not the expected produced_at encoding keeps the whole body', () => {
    const { value } = rowValue({ ...makeRow({ position: 0 }), produced_at: 10 });
    expect(replayIdentity(value, 11).length).toBe(value.length - HEADER_BYTES);
  });
});

import { describe, expect, test } from 'vitest';
import { generateEvents } from '../../../loadgen/index.js';
import type { PromptGroup, RolloutRow } from '../../../processors/types.js';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import { assembleGroupValue } from '../../../streams/codecs/group-assembly.js';
import { HEADER_BYTES, writeHeader } from '../../../streams/codecs/wire-format.js';

const rowCodec = new AvroBodyCodec('rowCompleted');
const groupCodec = new AvroBodyCodec('groupComplete');

function framed(id: number, body: Buffer): Buffer {
  const out = Buffer.alloc(HEADER_BYTES + body.length);
  writeHeader(out, id);
  body.copy(out, HEADER_BYTES);
  return out;
}

function sampleGroup(n: number): { group: PromptGroup; payloads: Buffer[] } {
  const rows = [...generateEvents({ batches: 1, groupsPerBatch: 1, generations: n, seed: 5, profile: 'default' })]
    .flatMap((e) => (e.kind === 'row' ? [e.row] : []))
    .sort((a, b) => a.row_index - b.row_index) as RolloutRow[];
  const r0 = rows[0]!;
  const group: PromptGroup = {
    group_id: r0.group_id,
    batch_id: r0.batch_id,
    group_index: r0.group_index,
    num_generations: n,
    prompt_idx: r0.prompt_idx,
    task_index: r0.task_index ?? null,
    rows,
  };
  return { group, payloads: rows.map((row) => framed(7, rowCodec.encodeBody({ kind: 'row', row }))) };
}

describe('assembling a group from its rows original bytes', () => {
  test.each([1, 3, 70])('with %i rows the bytes equal re-encoding the decoded group', (n) => {
    const { group, payloads } = sampleGroup(n);
    const assembled = assembleGroupValue(group, payloads, 7, groupCodec, 9)!;
    expect(assembled.readInt32BE(1)).toBe(9);
    expect(assembled.subarray(HEADER_BYTES).equals(groupCodec.encodeBody(group))).toBe(true);
    expect(groupCodec.decodeBody(assembled, HEADER_BYTES)).toEqual(group);
  });

  test('a row written with another schema id makes the caller re-encode', () => {
    const { group, payloads } = sampleGroup(2);
    payloads[1]!.writeInt32BE(8, 1);
    expect(assembleGroupValue(group, payloads, 7, groupCodec, 9)).toBeNull();
  });
});

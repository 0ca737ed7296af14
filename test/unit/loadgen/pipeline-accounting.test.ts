/**
 * The load generator's expectations checked against the real accumulator
 * (processors/group-accumulator.ts) fed through the real Avro body codec
 * (streams/codecs/codec.ts): every generated row must encode, and every injected
 * fault must yield exactly its announced dead letter, nothing else.
 */
import { describe, expect, test } from 'vitest';
import { accumulateConfigSchema } from '../../../config/schema.js';
import { collectExpectations, generateEvents, parseFaultSpec, type LoadgenOptions } from '../../../loadgen/index.js';
import { accumulateBatchEnd, accumulateRow, createAccumulatorState } from '../../../processors/group-accumulator.js';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import { expectedKey, realKey } from './dead-letter-keys.js';


describe('loadgen against the real accumulator', () => {
  test.each([
    ['small', {}],
    ['default', { generatedTokens: { median: 60, max: 400 }, routes: { layers: 2, topk: 2, numExperts: 8 }, media: { groupRate: 0.3 } }],
  ] as const)('every %s-profile fault yields exactly its expected dead letter and the other groups are emitted', (profile, shape) => {
    const opts: LoadgenOptions = {
      batches: profile === 'small' ? 12 : 2,
      groupsPerBatch: 16,
      generations: 8,
      seed: 21,
      profile,
      shape,
      faults: parseFaultSpec('dup=0.04,conflict=0.04,out_of_range=0.04,nan=0.04,missing=0.04,garbage=0.04,mixed_agents=0.12,task_mismatch=0.12'),
    };
    const events = [...generateEvents(opts)];
    const codec = new AvroBodyCodec('rowCompleted');
    const config = accumulateConfigSchema.parse({ batch_end_grace_ms: 0 });
    const state = createAccumulatorState();
    const deadLetters: string[] = [];
    const emitted: string[] = [];
    let replays = 0;
    let undecodable = 0;
    events.forEach((ev, now) => {
      if (ev.kind === 'garbage') {
        expect(() => codec.decodeBody(Buffer.from(ev.bytes))).toThrow();
        undecodable++;
        return;
      }
      let result;
      if (ev.kind === 'row') {
        const payload = codec.encodeBody({ kind: 'row', row: ev.row });
        const decoded = codec.decodeBody(payload);
        expect(decoded.kind).toBe('row');
        result = accumulateRow(state, { record: decoded.kind === 'row' ? decoded.row : null, payload }, config, now);
      } else {
        result = accumulateBatchEnd(state, ev.end, config, now);
      }
      replays += result.replays;
      deadLetters.push(...result.deadLetters.map(realKey));
      emitted.push(...result.groups.map((g) => g.group.group_id));
    });
    const expected = collectExpectations(events);
    const rowLevel = expected.deadLetters.filter((e) => e.reason !== 'undecodable');
    expect(deadLetters.sort()).toEqual(rowLevel.map(expectedKey).sort());
    expect(undecodable).toBe(expected.deadLetters.length - rowLevel.length);
    expect(replays).toBe(expected.silentlyDropped.length);
    expect(emitted.sort()).toEqual([...expected.completeGroups.keys()].sort());
  });
});

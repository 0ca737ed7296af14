/**
 * What the fused chain's typed hand-off saves: the time postprocess and pack
 * would spend decoding the group-complete and penalized records the node
 * before them just encoded (in fused mode they get the encoder's object).
 *
 *   npx tsx bench/fused-decode.ts [--groups 16] [--generations 16] [--profile published-max] [--reps 5]
 *
 * Records come from the processors on load-generator rows (no broker);
 * best of `reps` passes over all records; prints ms per record and per group.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/load.js';
import { generateEvents, type ProfileName } from '../loadgen/index.js';
import { accumulateRow, createAccumulatorState } from '../processors/group-accumulator.js';
import { postprocessGroup } from '../processors/postprocess.js';
import { resolvePostprocessConfig } from '../processors/postprocess-config.js';
import type { PenalizedGroup, PromptGroup } from '../processors/types.js';
import { AvroBodyCodec } from '../streams/codecs/codec.js';

const { values } = parseArgs({
  options: { groups: { type: 'string', default: '16' }, generations: { type: 'string', default: '16' }, profile: { type: 'string', default: 'published-max' }, reps: { type: 'string', default: '5' } },
});
const { config } = loadConfig({ file: undefined, env: {} });
const events = [
  ...generateEvents({ batches: 1, groupsPerBatch: Number(values.groups), generations: Number(values.generations), seed: 3, profile: values.profile as ProfileName, runId: 'bench' }),
];
function decodeMs(kind: 'groupComplete' | 'penalized', objects: unknown[]): { perRecordMs: number; mb: number } {
  const codec = new AvroBodyCodec(kind);
  const bodies = objects.map((o) => codec.encodeBody(o as never));
  let best = Infinity;
  for (let rep = 0; rep < Number(values.reps); rep++) {
    const t0 = performance.now();
    for (const b of bodies) codec.decodeBody(b);
    best = Math.min(best, performance.now() - t0);
  }
  return { perRecordMs: best / bodies.length, mb: bodies.reduce((n, b) => n + b.length, 0) / 1e6 / bodies.length };
}

// The processors the stages run, chained as the offline runner chains them.
const state = createAccumulatorState();
const groups: PromptGroup[] = [];
const rowCodec = new AvroBodyCodec('rowCompleted');
for (const e of events) {
  if (e.kind !== 'row') continue;
  const payload = rowCodec.encodeBody({ kind: 'row', row: e.row });
  groups.push(...accumulateRow(state, { record: e.row, payload }, config.accumulate, 0).groups.map((x) => x.group));
}
const resolved = resolvePostprocessConfig(config.postprocess, { configDir: process.cwd() });
const penalized: PenalizedGroup[] = groups.flatMap((g) => {
  const r = postprocessGroup(g, resolved);
  return r.ok ? [r.penalized] : [];
});
const g = decodeMs('groupComplete', groups);
const p = decodeMs('penalized', penalized);
console.log(`group-complete  ${groups.length} records of ${g.mb.toFixed(2)} MB: decode ${g.perRecordMs.toFixed(3)} ms each`);
console.log(`penalized       ${penalized.length} records of ${p.mb.toFixed(2)} MB: decode ${p.perRecordMs.toFixed(3)} ms each`);
console.log(`decode saved per group in fused mode: ${(g.perRecordMs + p.perRecordMs).toFixed(3)} ms`);

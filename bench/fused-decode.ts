/**
 * What the fused chain's typed hand-off saves: the time postprocess and pack
 * would spend decoding the group-complete and penalized records the node
 * before them just encoded (in fused mode they get the encoder's object).
 *
 *   npx tsx bench/fused-decode.ts [--groups 16] [--generations 16] [--profile published-max] [--reps 5]
 *
 * Records come from the offline runner on load-generator rows (no broker);
 * best of `reps` passes over all records; prints ms per record and per group.
 */
import { parseArgs } from 'node:util';
import { runOffline } from '../cli/offline.js';
import { loadConfig } from '../config/load.js';
import { formatJsonLine, parseJsonLine } from '../json-form/form.js';
import { generateEvents, type ProfileName } from '../loadgen/index.js';
import { AvroBodyCodec } from '../streams/codecs/codec.js';

const { values } = parseArgs({
  options: { groups: { type: 'string', default: '16' }, generations: { type: 'string', default: '16' }, profile: { type: 'string', default: 'published-max' }, reps: { type: 'string', default: '5' } },
});
const { config } = loadConfig({ file: undefined, env: {} });
const events = [
  ...generateEvents({ batches: 1, groupsPerBatch: Number(values.groups), generations: Number(values.generations), seed: 3, profile: values.profile as ProfileName, runId: 'bench' }),
];
const rows = events.flatMap((e) => (e.kind === 'row' ? [formatJsonLine({ kind: 'row', record: e.row })] : e.kind === 'batch_end' ? [formatJsonLine({ kind: 'batch_end', end: e.end })] : []));

async function stageLines(stage: 'accumulate' | 'postprocess', input: string[]): Promise<string[]> {
  const out: string[] = [];
  await runOffline(stage, config, input, (l) => void out.push(l));
  return out;
}

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

const groupLines = await stageLines('accumulate', rows);
const groups = groupLines.map(parseJsonLine).flatMap((l) => (l.kind === 'group' ? [l.group] : []));
const penalized = (await stageLines('postprocess', groupLines)).map(parseJsonLine).flatMap((l) => (l.kind === 'penalized' ? [l.group] : []));
const g = decodeMs('groupComplete', groups);
const p = decodeMs('penalized', penalized);
console.log(`group-complete  ${groups.length} records of ${g.mb.toFixed(2)} MB: decode ${g.perRecordMs.toFixed(3)} ms each`);
console.log(`penalized       ${penalized.length} records of ${p.mb.toFixed(2)} MB: decode ${p.perRecordMs.toFixed(3)} ms each`);
console.log(`decode saved per group in fused mode: ${(g.perRecordMs + p.perRecordMs).toFixed(3)} ms`);

/**
 * `bench pack`: packing throughput against a plain memcpy of the same number
 * of bytes, measured in the same process, and peak memory against the packed
 * output size.
 *
 *   npx tsx bench/pack.ts [--groups G] [--seed S] [--rows N] [--min-tokens A]
 *     [--max-tokens B] [--routes none|L,K] [--violation-fields] [--reps R]
 *     [--backend typed|tfjs|both]
 *
 * Each group is synthesized outside the timed region; then, R times and
 * interleaved, it is packed into fresh memory, packed into a recycled slab
 * (`SlabPool`, the stage's steady state), and its packed byte count is
 * copied with `Uint8Array.set` into a buffer allocated and touched
 * beforehand: the copy the packer could at best approach. Best time of each
 * kept. The fresh pack time includes faulting in its output pages, which the
 * memcpy baseline does not. With `--backend both` each pack is timed with
 * both backends (`pack.backend`), interleaved too; the last line is always
 * the default backend's (typed) when it was measured.
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import { type PackConfig, configSchema } from '../config/schema.js';
import { packGroup } from '../processors/pack.js';
import { SlabPool } from '../processors/slab.js';
import { selectTfjsBackend } from '../processors/tfjs-pack.js';
import type { PackedGroup } from '../processors/types.js';
import { synthesizeGroup, type SynthOptions } from './synthetic-groups.js';

const MB = 1024 * 1024;

type Backend = PackConfig['backend'];

/** Per backend: summed best times and worst memory ratios over the groups. */
interface Tally {
  packMs: number;
  pooledMs: number;
  worstRss: number;
  worstBuffers: number;
  worstSlab: number;
}

/** Bytes of the packed values plus each distinct offsets buffer once (they are shared). */
export function packedBytes(p: PackedGroup): number {
  const offsets = new Set<BigInt64Array>();
  let bytes = 0;
  for (const f of p.fields) {
    bytes += f.values.byteLength;
    if (f.offsets !== null) offsets.add(f.offsets);
  }
  for (const o of offsets) bytes += o.byteLength;
  return bytes;
}

function exposeGc(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

const USAGE = `usage: ./rollout-stream bench pack [--groups G] [--seed S] [--rows N] [--min-tokens A]
  [--max-tokens B] [--routes none|L,K] [--violation-fields] [--slabs pool|fresh] [--reps R]
  [--backend typed|tfjs|both]

Packs synthetic groups (built before the clock) into fresh memory and into a
recycled slab, against a plain memcpy of the packed byte count, best of R.
Last line: "ratio pack/memcpy: <n>". Defaults: 8 groups of 16 rows,
4096-32768 tokens/row, no routes, 7 reps, backend typed.

Example: ./rollout-stream bench pack --groups 4 --routes 48,8`;

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      groups: { type: 'string', default: '8' },
      seed: { type: 'string', default: '1' },
      rows: { type: 'string', default: '16' },
      'min-tokens': { type: 'string', default: '4096' },
      'max-tokens': { type: 'string', default: '32768' },
      routes: { type: 'string', default: 'none' },
      'violation-fields': { type: 'boolean', default: false },
      slabs: { type: 'string', default: 'pool' },
      reps: { type: 'string', default: '7' },
      backend: { type: 'string', default: 'typed' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return null;
  const int = (name: keyof typeof values) => {
    const v = Number(values[name]);
    if (!Number.isInteger(v) || v < 0) throw new Error(`--${name} must be a non-negative integer`);
    return v;
  };
  let routes: [number, number] | null = null;
  if (values.routes !== 'none') {
    const m = /^(\d+),(\d+)$/.exec(values.routes);
    if (m === null) throw new Error('--routes must be none or L,K (layers,topk)');
    routes = [Number(m[1]), Number(m[2])];
  }
  const synth: SynthOptions = { rows: int('rows'), minTokens: int('min-tokens'), maxTokens: int('max-tokens'), routes };
  if (values.slabs !== 'pool' && values.slabs !== 'fresh') throw new Error('--slabs must be pool or fresh');
  const backends: Backend[] = values.backend === 'both' ? ['typed', 'tfjs'] : values.backend === 'typed' || values.backend === 'tfjs' ? [values.backend] : [];
  if (backends.length === 0) throw new Error('--backend must be typed, tfjs or both');
  return { backends, slabs: values.slabs, groups: int('groups'), seed: int('seed'), reps: Math.max(1, int('reps')), violation: values['violation-fields'], synth };
}

/** Best wall time in ms of `reps` runs of `fn`; the last result is returned with it. */
function best<T>(reps: number, fn: () => T): { ms: number; result: T } {
  let ms = Infinity;
  let result!: T;
  for (let i = 0; i < reps; i++) {
    const t0 = process.hrtime.bigint();
    result = fn();
    ms = Math.min(ms, Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return { ms, result };
}

const gbs = (bytes: number, ms: number) => (bytes / (ms / 1000) / 1e9).toFixed(2);

/** Runs the benchmark and prints its report; returns the exit code (0 when the run completed). */
export async function main(argv: string[]): Promise<number> {
  const opts = parse(argv);
  if (opts === null) {
    console.log(USAGE);
    return 0;
  }
  const gc = exposeGc();
  const base = configSchema.parse({ pack: { include_message_violation_fields: opts.violation } }).pack;
  const cfgs = new Map<Backend, PackConfig>(opts.backends.map((b) => [b, { ...base, backend: b }]));
  const { rows, minTokens, maxTokens, routes } = opts.synth;
  console.log(
    `pack bench: ${opts.groups} groups × ${rows} rows, ${minTokens}–${maxTokens} tokens/row, ` +
      `routes ${routes === null ? 'none' : `${routes[0]}×${routes[1]}`}, violation fields ${opts.violation ? 'on' : 'off'}, ` +
      `seed ${opts.seed}, best of ${opts.reps}, backend ${opts.backends.join(' + ')}`,
  );
  if (cfgs.has('tfjs')) console.log(`tfjs runs on its ${await selectTfjsBackend()} backend`);

  // Let the JIT settle on one group first so the first measured group is not
  // timing the interpreter.
  const warm = synthesizeGroup(opts.seed, -1, opts.synth);
  for (const cfg of cfgs.values()) for (let i = 0; i < 5; i++) packGroup(warm, cfg);

  const tallies = new Map<Backend, Tally>(opts.backends.map((b) => [b, { packMs: 0, pooledMs: 0, worstRss: 0, worstBuffers: 0, worstSlab: 0 }]));
  let totalBytes = 0;
  let copyMs = 0;
  for (let g = 0; g < opts.groups; g++) {
    const group = synthesizeGroup(opts.seed, g, opts.synth);
    const first = cfgs.values().next().value!;
    // Size the output once (the same for every backend).
    const packed = packGroup(group, first);
    const bytes = packedBytes(packed);
    const tokens = Number(packed.fields[0]!.offsets![rows]!);
    const runs = [...cfgs].map(([backend, cfg]) => {
      // Memory of a single fresh pack.
      gc();
      const before = process.memoryUsage();
      const kept = packGroup(group, cfg);
      const after = process.memoryUsage();
      const t = tallies.get(backend)!;
      t.worstRss = Math.max(t.worstRss, (after.rss - before.rss) / bytes);
      t.worstBuffers = Math.max(t.worstBuffers, (after.arrayBuffers - before.arrayBuffers) / bytes);
      void kept;
      const pool = new SlabPool();
      pool.release(packGroup(group, cfg, pool.source));
      return { backend, cfg, pool, t, pack: Infinity, pooled: Infinity };
    });
    const src = new Uint8Array(bytes).fill(7);
    const dst = new Uint8Array(bytes).fill(1);
    // Interleaved so that load from other processes hits all alike.
    let copy = Infinity;
    for (let r = 0; r < opts.reps; r++) {
      for (const run of runs) {
        run.pack = Math.min(run.pack, best(1, () => packGroup(group, run.cfg)).ms);
        run.pooled = Math.min(run.pooled, best(1, () => run.pool.release(packGroup(group, run.cfg, run.pool.source))).ms);
      }
      copy = Math.min(copy, best(1, () => dst.set(src)).ms);
    }
    const parts = runs.map((run) => {
      run.t.worstSlab = Math.max(run.t.worstSlab, run.pool.retainedBytes / bytes);
      run.t.packMs += run.pack;
      run.t.pooledMs += run.pooled;
      const label = runs.length > 1 ? `${run.backend} ` : '';
      return `${label}pack ${run.pack.toFixed(2)} ms (${gbs(bytes, run.pack)} GB/s), ${label}pooled ${run.pooled.toFixed(2)} ms (${gbs(bytes, run.pooled)} GB/s)`;
    });
    console.log(`group ${g}: ${tokens} tokens, packed ${(bytes / MB).toFixed(1)} MiB, ${parts.join(', ')}, memcpy ${copy.toFixed(2)} ms (${gbs(bytes, copy)} GB/s)`);
    totalBytes += bytes;
    copyMs += copy;
    gc();
  }
  console.log(`memcpy:             ${gbs(totalBytes, copyMs)} GB/s over ${(totalBytes / MB).toFixed(1)} MiB`);
  // The default backend last, so its lines end the report.
  const order = [...tallies].sort(([a], [b]) => (a === 'typed' ? 1 : 0) - (b === 'typed' ? 1 : 0));
  for (const [backend, t] of order) {
    const tag = tallies.size > 1 ? ` [${backend}]` : '';
    console.log(`pack (fresh slab)${tag}:  ${gbs(totalBytes, t.packMs)} GB/s`);
    console.log(`pack (pooled slab)${tag}: ${gbs(totalBytes, t.pooledMs)} GB/s`);
    console.log(`ratio fresh/memcpy${tag}: ${(copyMs / t.packMs).toFixed(3)}`);
    console.log(`ratio pooled/memcpy${tag}: ${(copyMs / t.pooledMs).toFixed(3)}`);
    console.log(
      `peak memory per group${tag} (delta while packing / packed output): rss ${t.worstRss.toFixed(2)}×, arrayBuffers ${t.worstBuffers.toFixed(2)}× (fresh slab); ` +
        `pooled slab held ${t.worstSlab.toFixed(2)}×`,
    );
  }
  if (tallies.size > 1) {
    const typed = tallies.get('typed')!;
    const tfjs = tallies.get('tfjs')!;
    console.log(`ratio tfjs/typed (pooled): ${(typed.pooledMs / tfjs.pooledMs).toFixed(3)}`);
  }
  // The headline is the default backend (typed) when measured, in the mode
  // the stage runs in (--slabs, pooled by default).
  const head = order[order.length - 1]![1];
  console.log(`ratio pack/memcpy: ${(copyMs / (opts.slabs === 'pool' ? head.pooledMs : head.packMs)).toFixed(3)}`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}

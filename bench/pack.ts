/**
 * `bench pack`: the pack stage's work per group — penalized group to framed
 * Kafka value — against a plain memcpy of the value's bytes, measured in the
 * same process, and peak memory against the value size.
 *
 *   npx tsx bench/pack.ts [--groups G] [--seed S] [--rows N] [--min-tokens A]
 *     [--max-tokens B] [--routes none|L,K] [--media] [--violation-fields]
 *     [--wire trainer|narrow] [--slabs pool|fresh] [--reps R]
 *     [--backend typed|tfjs|both]
 *
 * Each group is synthesized outside the timed region; then, R times and
 * interleaved, it goes to its framed value two ways: `copy`, the stage before
 * issue 16 (pack into a recycled slab, then `encodeFramed` copies every tensor
 * into a fresh `Buffer.allocUnsafe`), and `in place`, the stage now
 * (`packFramed`: the packer writes every column straight into its place in
 * the value, a buffer from the stage's pool given back after the run, as the
 * producer's acknowledgement does); and its value's byte count is copied with
 * `Uint8Array.set` into a buffer allocated and touched beforehand: the copy
 * the stage could at best approach. Best time of each kept. With
 * `--slabs fresh` both ways take fresh memory (no pool). With `--backend
 * both` each is timed with both backends, interleaved too. The last line is
 * the default backend's (typed) in-place ratio.
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import { type PackConfig, configSchema } from '../config/schema.js';
import { packGroup } from '../processors/pack.js';
import { SlabPool } from '../processors/slab.js';
import { selectTfjsBackend } from '../processors/tfjs-pack.js';
import type { PenalizedGroup } from '../processors/types.js';
import { AvroBodyCodec } from '../streams/codecs/codec.js';
import type { ValuePool } from '../streams/codecs/framed-pack-target.js';
import type { PackedWire } from '../streams/codecs/packed-mapping.js';
import { synthesizeGroup, type SynthOptions } from './synthetic-groups.js';

const MB = 1024 * 1024;
const SCHEMA_ID = 1;

type Backend = PackConfig['backend'];

/** Per backend: summed best times and worst memory ratios over the groups. */
interface Tally {
  copyWayMs: number;
  inPlaceMs: number;
  packOnlyMs: number;
  worstRss: number;
  worstBuffers: number;
  worstPool: number;
}

/** Fresh memory every time, as a pool that keeps nothing. */
const freshValues: ValuePool = { source: (bytes) => new ArrayBuffer(bytes), give: () => false };

function exposeGc(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

const USAGE = `usage: ./rollout-stream bench pack [--groups G] [--seed S] [--rows N] [--min-tokens A]
  [--max-tokens B] [--routes none|L,K] [--media] [--violation-fields] [--wire trainer|narrow]
  [--slabs pool|fresh] [--reps R] [--backend typed|tfjs|both]

Turns synthetic groups (built before the clock) into framed Kafka values, the
old way (pack into a slab, then copy into the value) and in place (pack into
the value), against a plain memcpy of the value's bytes, best of R.
Last line: "ratio pack/memcpy: <n>" (in place). Defaults: 8 groups of 16 rows,
4096-32768 tokens/row, no routes, trainer wire, pooled memory, 7 reps, backend typed.

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
      media: { type: 'boolean', default: false },
      'violation-fields': { type: 'boolean', default: false },
      wire: { type: 'string', default: 'trainer' },
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
  const synth: SynthOptions = { rows: int('rows'), minTokens: int('min-tokens'), maxTokens: int('max-tokens'), routes, media: values.media };
  if (values.wire !== 'trainer' && values.wire !== 'narrow') throw new Error('--wire must be trainer or narrow');
  const wire: PackedWire = values.wire;
  if (values.slabs !== 'pool' && values.slabs !== 'fresh') throw new Error('--slabs must be pool or fresh');
  const backends: Backend[] = values.backend === 'both' ? ['typed', 'tfjs'] : values.backend === 'typed' || values.backend === 'tfjs' ? [values.backend] : [];
  if (backends.length === 0) throw new Error('--backend must be typed, tfjs or both');
  return { backends, wire, slabs: values.slabs, groups: int('groups'), seed: int('seed'), reps: Math.max(1, int('reps')), violation: values['violation-fields'], synth };
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

/** The two ways from a group to its framed value, with the memory each uses (`pool`: recycled, as in the stage; else fresh). */
function ways(codec: AvroBodyCodec<'packed'>, cfg: PackConfig, pooled: boolean) {
  const slabs = new SlabPool();
  const packSlabs = new SlabPool();
  const values = pooled ? new SlabPool() : null;
  const valuePool: ValuePool = values ?? freshValues;
  return {
    slabs,
    values,
    /** Before issue 16: pack into a (recycled) slab, encode copies into fresh memory. */
    copyWay(group: PenalizedGroup): Buffer {
      const packed = packGroup(group, cfg, pooled ? slabs.source : undefined);
      const value = codec.encodeFramed(packed, SCHEMA_ID);
      if (pooled) slabs.release(packed);
      return value;
    },
    /** Now: pack straight into the value; its buffer goes back as the producer's acknowledgement gives it back. */
    inPlace(group: PenalizedGroup): Buffer {
      const value = codec.packFramed((memory) => packGroup(group, cfg, memory), SCHEMA_ID, valuePool);
      valuePool.give(value.buffer as ArrayBuffer);
      return value;
    },
    /** Packing alone into a recycled slab (no value): what the packer itself costs. */
    packOnly(group: PenalizedGroup): void {
      packSlabs.release(packGroup(group, cfg, packSlabs.source));
    },
  };
}

/** Runs the benchmark and prints its report; returns the exit code (0 when the run completed). */
export async function main(argv: string[]): Promise<number> {
  const opts = parse(argv);
  if (opts === null) {
    console.log(USAGE);
    return 0;
  }
  const gc = exposeGc();
  const base = configSchema.parse({ pack: { include_message_violation_fields: opts.violation, wire_dtypes: opts.wire } }).pack;
  const cfgs = new Map<Backend, PackConfig>(opts.backends.map((b) => [b, { ...base, backend: b }]));
  const codec = new AvroBodyCodec('packed', { packedWire: opts.wire });
  const pooled = opts.slabs === 'pool';
  const { rows, minTokens, maxTokens, routes } = opts.synth;
  console.log(
    `pack bench: ${opts.groups} groups × ${rows} rows, ${minTokens}–${maxTokens} tokens/row, ` +
      `routes ${routes === null ? 'none' : `${routes[0]}×${routes[1]}`}, media ${opts.synth.media ? 'on' : 'off'}, violation fields ${opts.violation ? 'on' : 'off'}, ` +
      `${opts.wire} wire, ${pooled ? 'pooled' : 'fresh'} memory, seed ${opts.seed}, best of ${opts.reps}, backend ${opts.backends.join(' + ')}`,
  );
  if (cfgs.has('tfjs')) console.log(`tfjs runs on its ${await selectTfjsBackend()} backend`);

  // Let the JIT settle on one group first so the first measured group is not
  // timing the interpreter.
  const warm = synthesizeGroup(opts.seed, -1, opts.synth);
  for (const cfg of cfgs.values()) {
    const w = ways(codec, cfg, pooled);
    for (let i = 0; i < 5; i++) {
      w.copyWay(warm);
      w.inPlace(warm);
    }
  }

  const tallies = new Map<Backend, Tally>(opts.backends.map((b) => [b, { copyWayMs: 0, inPlaceMs: 0, packOnlyMs: 0, worstRss: 0, worstBuffers: 0, worstPool: 0 }]));
  let totalBytes = 0;
  let copyMs = 0;
  for (let g = 0; g < opts.groups; g++) {
    const group = synthesizeGroup(opts.seed, g, opts.synth);
    const first = cfgs.values().next().value!;
    // The value once, to size the baseline (the same for every backend and both ways).
    const reference = codec.encodeFramed(packGroup(group, first), SCHEMA_ID);
    const bytes = reference.length;
    const tokens = group.rows.reduce((n, r) => n + r.message_log.reduce((k, m) => k + m.token_ids.length, 0), 0);
    const runs = [...cfgs].map(([backend, cfg]) => {
      const w = ways(codec, cfg, pooled);
      const t = tallies.get(backend)!;
      // Memory of one in-place value into fresh memory, kept alive.
      gc();
      const before = process.memoryUsage();
      const kept = codec.packFramed((memory) => packGroup(group, cfg, memory), SCHEMA_ID, freshValues);
      const after = process.memoryUsage();
      t.worstRss = Math.max(t.worstRss, (after.rss - before.rss) / bytes);
      t.worstBuffers = Math.max(t.worstBuffers, (after.arrayBuffers - before.arrayBuffers) / bytes);
      if (!kept.equals(reference)) throw new Error(`group ${g}: the in-place value differs from the copy encoder's (${backend})`);
      // Prime the pools so the timed runs see the steady state.
      w.copyWay(group);
      if (!w.inPlace(group).equals(reference)) throw new Error(`group ${g}: the pooled in-place value differs (${backend})`);
      w.packOnly(group);
      return { backend, w, t, copyWay: Infinity, inPlace: Infinity, packOnly: Infinity };
    });
    const src = new Uint8Array(bytes).fill(7);
    const dst = new Uint8Array(bytes).fill(1);
    // Interleaved so that load from other processes hits all alike.
    let copy = Infinity;
    for (let r = 0; r < opts.reps; r++) {
      for (const run of runs) {
        // The order rotates each rep, so no way always runs in the cache the one before left.
        const timed = [
          () => (run.copyWay = Math.min(run.copyWay, best(1, () => run.w.copyWay(group)).ms)),
          () => (run.inPlace = Math.min(run.inPlace, best(1, () => run.w.inPlace(group)).ms)),
          () => (run.packOnly = Math.min(run.packOnly, best(1, () => run.w.packOnly(group)).ms)),
        ];
        for (let i = 0; i < timed.length; i++) timed[(i + r) % timed.length]!();
      }
      copy = Math.min(copy, best(1, () => dst.set(src)).ms);
    }
    const parts = runs.map((run) => {
      run.t.worstPool = Math.max(run.t.worstPool, (run.w.values?.retainedBytes ?? 0) / bytes);
      run.t.copyWayMs += run.copyWay;
      run.t.inPlaceMs += run.inPlace;
      run.t.packOnlyMs += run.packOnly;
      const label = runs.length > 1 ? `${run.backend} ` : '';
      return (
        `${label}copy way ${run.copyWay.toFixed(2)} ms (${gbs(bytes, run.copyWay)} GB/s), ${label}in place ${run.inPlace.toFixed(2)} ms (${gbs(bytes, run.inPlace)} GB/s), ` +
        `${label}pack only ${run.packOnly.toFixed(2)} ms`
      );
    });
    console.log(`group ${g}: ${tokens} tokens, value ${(bytes / MB).toFixed(1)} MiB, ${parts.join(', ')}, memcpy ${copy.toFixed(2)} ms (${gbs(bytes, copy)} GB/s)`);
    totalBytes += bytes;
    copyMs += copy;
    runs.length = 0;
    gc();
  }
  console.log(`memcpy:                       ${gbs(totalBytes, copyMs)} GB/s over ${(totalBytes / MB).toFixed(1)} MiB`);
  // The default backend last, so its lines end the report.
  const order = [...tallies].sort(([a], [b]) => (a === 'typed' ? 1 : 0) - (b === 'typed' ? 1 : 0));
  for (const [backend, t] of order) {
    const tag = tallies.size > 1 ? ` [${backend}]` : '';
    console.log(`group → value, copy way${tag}:  ${gbs(totalBytes, t.copyWayMs)} GB/s   (pack into a slab, encode copies)`);
    console.log(`group → value, in place${tag}:  ${gbs(totalBytes, t.inPlaceMs)} GB/s   (pack into the value)`);
    console.log(`pack only, pooled slab${tag}:   ${gbs(totalBytes, t.packOnlyMs)} GB/s`);
    console.log(`ratio copy-way/memcpy${tag}: ${(copyMs / t.copyWayMs).toFixed(3)}`);
    console.log(`ratio in-place/copy-way${tag}: ${(t.copyWayMs / t.inPlaceMs).toFixed(3)} (speed-up)`);
    console.log(
      `peak memory per group${tag} (delta while packing in place into fresh memory / value size): rss ${t.worstRss.toFixed(2)}×, arrayBuffers ${t.worstBuffers.toFixed(2)}×; ` +
        `value pool held ${t.worstPool.toFixed(2)}×`,
    );
  }
  if (tallies.size > 1) {
    const typed = tallies.get('typed')!;
    const tfjs = tallies.get('tfjs')!;
    console.log(`ratio tfjs/typed (in place): ${(typed.inPlaceMs / tfjs.inPlaceMs).toFixed(3)}`);
  }
  const head = order[order.length - 1]![1];
  console.log(`ratio pack/memcpy: ${(copyMs / head.inPlaceMs).toFixed(3)}`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}

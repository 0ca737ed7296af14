/**
 * int32 → int64 sign extension of many runs at once (`input_ids`: every
 * message's token ids, back to back), with a WebAssembly SIMD kernel.
 *
 * The widening is the one copy of packing no builtin does; in JavaScript it
 * costs ~1 ns per token (`writeInt32AsInt64`), several times a memcpy of the
 * same bytes, and on text groups it was most of the pack time. The kernel
 * (`i64x2.extend_low/high_i32x4_s`, four tokens per step) runs over its own
 * scratch memory, so each chunk is gathered in (`TypedArray.set`), widened,
 * and copied out (`set` again): three memcpy-speed passes, ~3× faster than
 * the JS loop on this machine (bench/README.md, pack). A WebAssembly memory
 * cannot be an arbitrary ArrayBuffer, hence the copies: the output stays
 * wherever the caller's view is (a slab, or the framed Kafka value).
 *
 * Buffers made by `widenableBuffer` (what `SlabPool` hands out: the pack
 * stage's framed values) *are* WebAssembly memories, each with a two-memory
 * kernel bound to it (WebAssembly multi-memory): the ids are gathered into a
 * scratch memory of their own and widened straight into their place in the
 * value, with no copy-out. A memory of fixed size is never grown, so its
 * buffer is never detached under a value the producer still holds.
 *
 * Falls back to the JS loop where WebAssembly SIMD is unavailable and for
 * short inputs. Pure: no state but the reused scratch memories (384 KiB and
 * a page; 128 KiB) and the kernels bound to widenable buffers.
 */
import { int64Words, writeInt32AsInt64 } from './typed-arrays.js';

/** Tokens widened per kernel call; the scratch holds a chunk's int32 input and int64 output (384 KiB: stays in L2). */
const CHUNK = 1 << 15;
/** Below this many tokens the JS loop wins (no gather/copy-out). */
const MIN_KERNEL = 256;

const leb = (n: number): number[] => {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
};
const section = (id: number, bytes: number[]) => [id, ...leb(bytes.length), ...bytes];
const name = (s: string) => [...leb(s.length), ...Array.from(s, (c) => c.charCodeAt(0))];

/**
 * `widen(src, dst, n)`: for i in [0, n) step 4, the four int32 at src+4i
 * sign-extended to four int64 at dst+8i (n rounded up to 4). `load` is the
 * memarg of the source load: memory 0 (`[0x00, 0x00]`, align and offset) or,
 * with multi-memory, memory 1 (`[0x40, 0x01, 0x00]`); stores go to memory 0.
 */
const widenBody = (load: number[]) => [
  0x02, 0x01, 0x7f, 0x01, 0x7b, // locals: $end i32, $v v128
  0x20, 0x00, 0x20, 0x02, 0x41, 0x02, 0x74, 0x6a, 0x21, 0x03, // $end = src + (n << 2)
  0x02, 0x40, 0x03, 0x40, // block, loop
  0x20, 0x00, 0x20, 0x03, 0x4f, 0x0d, 0x01, // br_if out when src >= $end
  0x20, 0x00, 0xfd, 0x00, ...load, 0x21, 0x04, // $v = v128.load(src)
  0x20, 0x01, 0x20, 0x04, 0xfd, 0xc7, 0x01, 0xfd, 0x0b, 0x00, 0x00, // v128.store(dst, i64x2.extend_low_i32x4_s($v))
  0x20, 0x01, 0x20, 0x04, 0xfd, 0xc8, 0x01, 0xfd, 0x0b, 0x00, 0x10, // v128.store offset=16 (dst, i64x2.extend_high_i32x4_s($v))
  0x20, 0x00, 0x41, 0x10, 0x6a, 0x21, 0x00, // src += 16
  0x20, 0x01, 0x41, 0x20, 0x6a, 0x21, 0x01, // dst += 32
  0x0c, 0x00, 0x0b, 0x0b, // br loop; end; end
  0x0b,
];

/** A module exporting `widen` over the memories it imports as `env.<name>`, in order (memory 0, 1, …). */
const kernelBytes = (memories: string[], load: number[]) => {
  const body = widenBody(load);
  const imports = memories.flatMap((m) => [...name('env'), ...name(m), 0x02, 0x00, 0x00]);
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [0x01, 0x60, 0x03, 0x7f, 0x7f, 0x7f, 0x00]), // type: (i32, i32, i32) -> ()
    ...section(2, [memories.length, ...imports]),
    ...section(3, [0x01, 0x00]),
    ...section(7, [0x01, ...name('widen'), 0x00, 0x00]),
    ...section(10, [0x01, ...leb(body.length), ...body]),
  ]);
};

/** Scratch in, scratch out: one memory (env.mem). */
const MODULE = kernelBytes(['mem'], [0x00, 0x00]);
/** Scratch (env.scratch, memory 1) in, the output buffer's own memory (env.out, memory 0) out: WebAssembly multi-memory. */
const MODULE_TO = kernelBytes(['out', 'scratch'], [0x40, 0x01, 0x00]);

/** The part of the WebAssembly API used here (the project's TypeScript lib has no WebAssembly declarations). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Memory: new (descriptor: { initial: number; maximum?: number }) => WasmMemory;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
}
const wasm = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;

type Widen = (src: number, dst: number, n: number) => void;

interface Kernel {
  memory: WasmMemory;
  widen: Widen;
}

let compiled: object | null | undefined;

/** The compiled kernel module; null without WebAssembly SIMD. */
function kernelModule(): object | null {
  if (compiled === undefined) compiled = wasm !== undefined && wasm.validate(MODULE) ? new wasm.Module(MODULE) : null;
  return compiled;
}

let kernel: Kernel | null | undefined;

/** The kernel with a scratch memory of at least `chunk` tokens in and out; null without WebAssembly SIMD. */
function kernelFor(chunk: number): Kernel | null {
  if (kernel === undefined) {
    kernel = null;
    const module = kernelModule();
    if (module !== null) {
      const memory = new wasm!.Memory({ initial: 1 });
      kernel = { memory, widen: new wasm!.Instance(module, { env: { mem: memory } }).exports['widen'] as Widen };
    }
  }
  if (kernel === null) return null;
  const bytes = chunk * 12 + 64;
  const have = kernel.memory.buffer.byteLength;
  if (have < bytes) kernel.memory.grow(Math.ceil((bytes - have) / 65536));
  return kernel;
}

/** Whether the SIMD kernel is in use (tests; a JS loop does the work otherwise). */
export function int64WidenKernelAvailable(): boolean {
  return kernelFor(4) !== null;
}

/**
 * Writes `runs` back to back, sign-extended, into `out` from element `at`:
 * the same elements as `writeInt32AsInt64` run by run. `out` must have room
 * for them all. `chunk` (tokens per kernel call, a multiple of 4) and
 * `minKernel` (fewer tokens take the JS loop) are for tests.
 */
export function widenRunsToInt64(out: BigInt64Array, at: number, runs: readonly Int32Array[], chunk = CHUNK, minKernel = MIN_KERNEL): void {
  let total = 0;
  for (const r of runs) total += r.length;
  const words = int64Words(out);
  const bound = total < minKernel ? undefined : widenable.get(out.buffer as ArrayBuffer);
  if (bound !== undefined) {
    widenInPlace(bound, direct!, words, at, runs, Math.min(chunk, DIRECT_CHUNK));
    return;
  }
  const k = total < minKernel ? null : kernelFor(chunk);
  if (k === null) {
    for (const r of runs) {
      writeInt32AsInt64(words, at, r);
      at += r.length;
    }
    return;
  }
  // Views taken after any grow (growing replaces the memory's buffer).
  const buffer = k.memory.buffer;
  const src = new Int32Array(buffer, 0, chunk);
  const dstByte = chunk * 4;
  const dst = new Int32Array(buffer, dstByte, chunk * 2);
  gatherChunks(runs, src, chunk, (filled) => {
    k.widen(0, dstByte, Math.ceil(filled / 4) * 4);
    words.set(dst.subarray(0, filled * 2), at * 2);
    at += filled;
  });
}

/** Copies `runs` back to back into `src` a chunk at a time, calling `flush(n)` for each chunk gathered (n > 0 tokens). */
function gatherChunks(runs: readonly Int32Array[], src: Int32Array, chunk: number, flush: (n: number) => void): void {
  let filled = 0;
  for (const r of runs) {
    let from = 0;
    while (from < r.length) {
      const take = Math.min(r.length - from, chunk - filled);
      src.set(take === r.length ? r : r.subarray(from, from + take), filled);
      filled += take;
      from += take;
      if (filled === chunk) {
        flush(filled);
        filled = 0;
      }
    }
  }
  if (filled > 0) flush(filled);
}

/** Tokens gathered per kernel call for a widenable buffer (128 KiB of int32 scratch: stays in L2). */
const DIRECT_CHUNK = 1 << 15;
const PAGE = 65536;
/** A WebAssembly memory (32-bit) holds at most 65536 pages; leave one spare. */
const MAX_PAGES = 65535;

interface Direct {
  module: object;
  /** The gather scratch, a memory of its own (never grown) shared by every bound kernel. */
  scratch: WasmMemory;
  src: Int32Array;
}

let direct: Direct | null | undefined;

/** The two-memory kernel and its scratch; null without WebAssembly SIMD and multi-memory. */
function directKernel(): Direct | null {
  if (direct === undefined) {
    direct = null;
    if (wasm !== undefined && wasm.validate(MODULE_TO)) {
      const scratch = new wasm.Memory({ initial: (DIRECT_CHUNK * 4) / PAGE, maximum: (DIRECT_CHUNK * 4) / PAGE });
      direct = { module: new wasm.Module(MODULE_TO), scratch, src: new Int32Array(scratch.buffer, 0, DIRECT_CHUNK) };
    }
  }
  return direct;
}

/** The kernel bound to each widenable buffer's memory. */
const widenable = new WeakMap<ArrayBuffer, Widen>();

/**
 * A zeroed buffer of `bytes` rounded up to 64 KiB whose int64 views this
 * module widens into without a copy-out: a fixed-size WebAssembly memory with
 * the kernel bound to it (reading the shared gather scratch, writing this
 * memory). Never grown, so never detached; unlike other ArrayBuffers it
 * cannot be transferred. A plain `ArrayBuffer` of `bytes` below 64 KiB,
 * above 4 GiB, or where WebAssembly SIMD or multi-memory is unavailable.
 */
export function widenableBuffer(bytes: number): ArrayBuffer {
  const d = bytes < PAGE ? null : directKernel();
  const pages = Math.ceil(bytes / PAGE);
  if (d === null || pages > MAX_PAGES) return new ArrayBuffer(bytes);
  const memory = new wasm!.Memory({ initial: pages, maximum: pages });
  const buffer = memory.buffer;
  widenable.set(buffer, new wasm!.Instance(d.module, { env: { out: memory, scratch: d.scratch } }).exports['widen'] as Widen);
  return buffer;
}

/** Whether `buffer` came from `widenableBuffer` with the kernel bound to it. */
export function isWidenable(buffer: ArrayBufferLike): boolean {
  return widenable.has(buffer as ArrayBuffer);
}

/** `widenRunsToInt64` into a widenable buffer: gather a chunk into the scratch, widen it into `out`'s place (a tail of < 4 tokens in JS). */
function widenInPlace(widen: Widen, d: Direct, words: Int32Array, at: number, runs: readonly Int32Array[], chunk: number): void {
  gatherChunks(runs, d.src, chunk, (filled) => {
    const whole = filled & ~3;
    if (whole > 0) widen(0, words.byteOffset + at * 8, whole);
    if (whole < filled) writeInt32AsInt64(words, at + whole, d.src.subarray(whole, filled));
    at += filled;
  });
}

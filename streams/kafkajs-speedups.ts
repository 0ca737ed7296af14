/**
 * Two CPU savings in kafkajs's produce path, measured with `bench e2e
 * --cpu-prof` (bench/README.md, "e2e"). Import this module before anything
 * loads kafkajs (streams/kafka-client.ts and cli/main.ts do).
 *
 * 1. A native CRC-32C for kafkajs's record batches.
 *
 * kafkajs computes every produced record batch's CRC-32C byte by byte in
 * JavaScript (~0.4 GB/s here); a CPU profile of the stages at full load put
 * it at 14% of all busy time, the largest single cost (bench/README.md,
 * "e2e"). `@node-rs/crc32` computes the same checksum natively (~3.5 GB/s
 * for 45 kB batches). kafkajs loads its CRC module with `require` when its
 * record-batch encoder is first loaded, so this module puts the native
 * function into the CommonJS cache under that module's path before anything
 * loads kafkajs: import it first (streams/kafka-client.ts and cli/main.ts do).
 *
 * Without the native package (a platform it has no binary for), or when
 * kafkajs was loaded before this ran, kafkajs keeps its own implementation;
 * `kafkaCrcImplementation` says which one is in use.
 */
import { createRequire, Module } from 'node:module';

const require = createRequire(import.meta.url);

type Crc = (buffer: Buffer) => number;

function install(): 'native' | 'kafkajs' {
  let native: ((input: Buffer, initial?: number) => number) | undefined;
  try {
    native = (require('@node-rs/crc32') as { crc32c: (input: Buffer, initial?: number) => number }).crc32c;
  } catch {
    return 'kafkajs';
  }
  const crcPath = require.resolve('kafkajs/src/protocol/recordBatch/crc32C/index.js');
  const encoderPath = require.resolve('kafkajs/src/protocol/recordBatch/v0/index.js');
  // The encoder captured kafkajs's function already: too late to swap it.
  if (require.cache[encoderPath]) return 'kafkajs';
  const fn: Crc = (buffer) => native(buffer) >>> 0;
  const mod = new Module(crcPath);
  mod.filename = crcPath;
  mod.loaded = true;
  mod.exports = fn;
  require.cache[crcPath] = mod;
  return 'native';
}

/** Which CRC-32C kafkajs uses in this process. */
export const kafkaCrcImplementation = install();

/*
 * 2. kafkajs's Encoder grows its buffer with Buffer.alloc (zero-filled) by
 *    powers of two, and a produce request copies each record into a batch,
 *    the batch into the request and the request into its frame; zero-filling
 *    and re-growing were 5% of the stages' busy time at full load. Growth
 *    here uses Buffer.allocUnsafe (every byte below `offset` is written before
 *    it is read: the `buffer` getter slices at `offset`), and an encoder
 *    array reserves its total size once instead of growing per element.
 */
interface EncoderLike {
  buf: Buffer;
  offset: number;
  ensureAvailable(length: number): void;
  writeEncoderArray(value: EncoderLike[]): unknown;
}

function patchEncoder(): boolean {
  const Encoder = require('kafkajs/src/protocol/encoder.js') as { prototype: EncoderLike; nextPowerOfTwo(n: number): number };
  if (typeof Encoder.nextPowerOfTwo !== 'function' || typeof Encoder.prototype.ensureAvailable !== 'function') return false;
  Encoder.prototype.ensureAvailable = function ensureAvailable(this: EncoderLike, length: number) {
    if (this.offset + length > this.buf.length) {
      const grown = Buffer.allocUnsafe(Encoder.nextPowerOfTwo(this.offset + length));
      this.buf.copy(grown, 0, 0, this.offset);
      this.buf = grown;
    }
  };
  const original = Encoder.prototype.writeEncoderArray;
  Encoder.prototype.writeEncoderArray = function writeEncoderArray(this: EncoderLike, value: EncoderLike[]) {
    if (Array.isArray(value) && value.every((v) => v != null && Buffer.isBuffer(v.buf))) {
      let total = 0;
      for (const v of value) total += v.offset;
      this.ensureAvailable(total);
    }
    return original.call(this, value);
  };
  return true;
}

/** Whether kafkajs's Encoder runs with the growth above. */
export const kafkaEncoderPatched = patchEncoder();

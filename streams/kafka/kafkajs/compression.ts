/**
 * Record-batch compression for kafkajs. kafkajs ships gzip only; this module
 * plugs snappy, lz4 and zstd into its codec table (`CompressionCodecs`) with
 * prebuilt native libraries from npm, and maps the config names of
 * `kafka.compression` to the `CompressionTypes` a producer passes per send.
 *
 * Consumers need the codecs registered whatever the producer chose: a batch
 * written by a rollout worker or a Java tool with lz4 is only readable here
 * after `registerCompressionCodecs()`. `createKafka` calls it, so every
 * client of `streams/` has them. The Python trainer (librdkafka) reads all
 * five natively.
 *
 * Wire formats (what the Kafka protocol expects inside a record batch):
 * - lz4: the LZ4 frame format (magic 04 22 4D 18), independent blocks, no
 *   checksums. lz4_flex picks the block size from the input (64 KiB up to
 *   4 MiB); Java's `KafkaLZ4BlockInputStream` and librdkafka read them all
 *   (checked through the broker, which decompresses to validate).
 * - zstd: one standard zstd frame, level 3 (the Java client's and
 *   librdkafka's default level).
 * - snappy: written as one raw snappy block (what librdkafka writes); read as
 *   raw or in the xerial framing the Java client writes
 *   (`82 'SNAPPY' 00`, two int32 versions, then [int32 length][raw block]…).
 */
import './speedups.js'; // before kafkajs loads: its patches and the send-retry fix (send-retry.ts)
import { compress as zstdCompress, decompress as zstdDecompress } from '@mongodb-js/zstd';
import kafkajs, { type CompressionTypes as CompressionType } from 'kafkajs';
import { compressFrame as lz4CompressFrame, decompressFrame as lz4DecompressFrame } from 'lz4-napi';
import { compress as snappyCompress, uncompress as snappyUncompress } from 'snappy';
import { RolloutStreamError } from '../../../errors/index.js';

// kafkajs's index builds these from member expressions, which Node's CJS
// named-export detection cannot see: take them off the default export.
const { CompressionCodecs, CompressionTypes } = kafkajs;

import { COMPRESSION_NAMES, type CompressionName } from '../types.js';
export { COMPRESSION_NAMES, type CompressionName } from '../types.js';

/** zstd level: 3 is the Java client's and librdkafka's default. */
export const ZSTD_LEVEL = 3;

/** What kafkajs calls a codec: `compress` gets its Encoder (`.buffer` holds the records). */
export interface BufferCodec {
  compress(input: Buffer): Promise<Buffer>;
  decompress(input: Buffer): Promise<Buffer>;
}

const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
const XERIAL_HEADER_BYTES = 16;

/** The raw snappy blocks of a xerial-framed buffer, or null when `input` is a raw block. */
function xerialBlocks(input: Buffer): Buffer[] | null {
  if (input.length < XERIAL_HEADER_BYTES || !input.subarray(0, XERIAL_MAGIC.length).equals(XERIAL_MAGIC)) return null;
  const blocks: Buffer[] = [];
  let at = XERIAL_HEADER_BYTES;
  while (at < input.length) {
    if (at + 4 > input.length) throw new CompressionError('snappy', 'xerial block length is truncated');
    const length = input.readInt32BE(at);
    at += 4;
    if (length < 0 || at + length > input.length) throw new CompressionError('snappy', `xerial block of ${length} bytes overruns the buffer`);
    blocks.push(input.subarray(at, at + length));
    at += length;
  }
  return blocks;
}

async function snappyDecompress(input: Buffer): Promise<Buffer> {
  const blocks = xerialBlocks(input);
  if (blocks === null) return (await snappyUncompress(input, { asBuffer: true })) as Buffer;
  const parts = await Promise.all(blocks.map((b) => snappyUncompress(b, { asBuffer: true }) as Promise<Buffer>));
  return Buffer.concat(parts);
}

/** The codecs this module adds, on plain buffers (gzip is kafkajs's own). */
export const ADDED_CODECS: Record<'snappy' | 'lz4' | 'zstd', BufferCodec> = {
  snappy: { compress: (b) => snappyCompress(b), decompress: snappyDecompress },
  lz4: { compress: (b) => lz4CompressFrame(b), decompress: (b) => lz4DecompressFrame(b) },
  zstd: { compress: (b) => zstdCompress(b, ZSTD_LEVEL), decompress: (b) => zstdDecompress(b) },
};

/** A compressed batch that does not decode (code `compression_corrupt`), or a name we do not know. */
export class CompressionError extends RolloutStreamError {
  constructor(
    readonly codec: string,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super('compression_corrupt', `${codec}: ${message}`, options);
  }
}

const TYPES: Record<CompressionName, CompressionType> = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
};

/**
 * The kafkajs `CompressionTypes` value for a `kafka.compression` name, to
 * pass as `compression` on `send`/`sendBatch` (kafkajs takes it per call,
 * not per producer). Throws `CompressionError` for an unknown name (the
 * config schema rejects those before they get here).
 */
export function compressionType(name: CompressionName): CompressionType {
  const type = TYPES[name];
  if (type === undefined) throw new CompressionError(String(name), `unknown compression; known: ${COMPRESSION_NAMES.join(', ')}`);
  return type;
}

let registered = false;

/**
 * Installs snappy, lz4 and zstd into kafkajs's process-wide codec table, so
 * producers may send with them and consumers read batches written with
 * them. Idempotent; gzip stays kafkajs's own.
 */
export function registerCompressionCodecs(): void {
  if (registered) return;
  const asKafkaCodec = (name: string, codec: BufferCodec) => () => ({
    compress: (encoder: { buffer: Buffer }) => codec.compress(encoder.buffer),
    decompress: (buffer: Buffer) =>
      codec.decompress(buffer).catch((e: unknown) => {
        throw e instanceof CompressionError ? e : new CompressionError(name, `batch does not decompress: ${String(e)}`, { cause: e });
      }),
  });
  CompressionCodecs[CompressionTypes.Snappy] = asKafkaCodec('snappy', ADDED_CODECS.snappy);
  CompressionCodecs[CompressionTypes.LZ4] = asKafkaCodec('lz4', ADDED_CODECS.lz4);
  CompressionCodecs[CompressionTypes.ZSTD] = asKafkaCodec('zstd', ADDED_CODECS.zstd);
  registered = true;
}

/**
 * The codec kafkajs runs for `name` (after registration), on plain buffers:
 * what the benchmark and the tests call, so they measure and check exactly
 * the code a producer and a consumer execute. Null for `none`.
 */
export function kafkaCodec(name: CompressionName): BufferCodec | null {
  if (name === 'none') return null;
  registerCompressionCodecs();
  const codec = (CompressionCodecs[compressionType(name) as Exclude<CompressionType, CompressionType.None>] as () => {
    compress(encoder: { buffer: Buffer }): Promise<Buffer>;
    decompress(buffer: Buffer): Promise<Buffer>;
  })();
  return { compress: (b) => codec.compress({ buffer: b }), decompress: (b) => codec.decompress(b) };
}

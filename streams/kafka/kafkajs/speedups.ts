/**
 * CPU savings in kafkajs's produce path, measured with `bench e2e
 * --cpu-prof` (bench/README.md, "e2e"). Import this module before anything
 * loads kafkajs (every module of this adapter that loads kafkajs does, and
 * cli/main.ts; test/unit/streams/kafkajs-client-patched.test.ts checks).
 * `ROLLOUT_STREAM_KAFKAJS_PATCHES=0` leaves kafkajs as it is (to rule the
 * patches out when debugging, or to measure them: bench/produce-cpu.ts).
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
 * loads kafkajs: import it first (streams/kafka/kafkajs/client.ts and cli/main.ts do).
 *
 * Without the native package (a platform it has no binary for), or when
 * kafkajs was loaded before this ran, kafkajs keeps its own implementation;
 * `kafkaCrcImplementation` says which one is in use.
 */
import { createHash } from 'node:crypto';
import { createRequire, Module } from 'node:module';
// Not a speed-up: a send's retry awaits all its requests (issue 14). Here so it is installed wherever these are.
export { kafkaSendRetryPatched } from './send-retry.js';

const require = createRequire(import.meta.url);

type Crc = (buffer: Buffer) => number;
type NativeCrc = (input: Buffer, initial?: number) => number;

function loadNative(): NativeCrc | undefined {
  try {
    return (require('@node-rs/crc32') as { crc32c: NativeCrc }).crc32c;
  } catch {
    return undefined;
  }
}

/** Whether the patches below are installed at all (`ROLLOUT_STREAM_KAFKAJS_PATCHES=0`: none). */
export const kafkaPatchesEnabled = process.env.ROLLOUT_STREAM_KAFKAJS_PATCHES !== '0';

const native = kafkaPatchesEnabled ? loadNative() : undefined;

function install(): 'native' | 'kafkajs' {
  if (!native) return 'kafkajs';
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
 *    powers of two; growth here uses Buffer.allocUnsafe (every byte below
 *    `offset` is written before it is read: the `buffer` getter slices at
 *    `offset`). Zero-filling and re-growing were 5% of the stages' busy time.
 *
 * 3. kafkajs builds a produce request by copying: each value into its
 *    record, the record into the batch body, the body into the batch, the
 *    batch into its length-prefixed bytes, those into the partition's and
 *    topic's data, the request and its frame: about seven copies of every
 *    byte, 15% of the fused stage's busy time plus the garbage (bench/README,
 *    "Fused stages"). Here an encoder keeps large pieces (a value, a nested
 *    encoder's content) by reference in a list of chunks ahead of its own
 *    buffer, and joins them only when its bytes are asked for (`buffer`):
 *    the batch body once for its CRC, the batch once for its length prefix,
 *    and the whole request once for the socket. Encoders only ever append, so
 *    a referenced piece never changes; the bytes produced are identical
 *    (test/unit/streams/kafkajs-speedups.test.ts compares them).
 */
interface EncoderLike {
  buf: Buffer;
  offset: number;
  /** Sealed content ahead of `buf` (rope), and its total length. */
  chunks?: Buffer[];
  chunkBytes?: number;
  readonly buffer: Buffer;
  size(): number;
  ensureAvailable(length: number): void;
  writeBufferInternal(buffer: Buffer): void;
  writeEncoder(value: EncoderLike): EncoderLike;
  writeEncoderArray(value: EncoderLike[]): EncoderLike;
}

/** Pieces at least this large are referenced instead of copied. */
const REFERENCE_MIN_BYTES = 16 * 1024;

/** Seals what `enc` wrote so far and appends `piece` by reference. */
function appendReference(enc: EncoderLike, piece: Buffer): void {
  if (!enc.chunks) {
    enc.chunks = [];
    enc.chunkBytes = 0;
  }
  if (enc.offset > 0) {
    enc.chunks.push(enc.buf.subarray(0, enc.offset));
    enc.chunkBytes! += enc.offset;
    // Keep writing into the rest of the same allocation.
    enc.buf = enc.buf.subarray(enc.offset);
    enc.offset = 0;
  }
  enc.chunks.push(piece);
  enc.chunkBytes! += piece.length;
}

function isEncoder(v: unknown): v is EncoderLike {
  return v != null && Buffer.isBuffer((v as EncoderLike).buf);
}

function patchEncoder(): boolean {
  if (!kafkaPatchesEnabled) return false;
  const Encoder = require('kafkajs/src/protocol/encoder.js') as { prototype: EncoderLike; nextPowerOfTwo(n: number): number };
  const proto = Encoder.prototype;
  const getter = Object.getOwnPropertyDescriptor(proto, 'buffer')?.get;
  if (
    typeof Encoder.nextPowerOfTwo !== 'function' ||
    typeof proto.ensureAvailable !== 'function' ||
    typeof proto.writeBufferInternal !== 'function' ||
    typeof proto.size !== 'function' ||
    typeof getter !== 'function'
  ) {
    return false;
  }
  proto.ensureAvailable = function ensureAvailable(this: EncoderLike, length: number) {
    if (this.offset + length > this.buf.length) {
      const grown = Buffer.allocUnsafe(Encoder.nextPowerOfTwo(this.offset + length));
      this.buf.copy(grown, 0, 0, this.offset);
      this.buf = grown;
    }
  };
  proto.writeBufferInternal = function writeBufferInternal(this: EncoderLike, buffer: Buffer) {
    if (buffer.length >= REFERENCE_MIN_BYTES) {
      appendReference(this, buffer);
      return;
    }
    this.ensureAvailable(buffer.length);
    buffer.copy(this.buf, this.offset, 0);
    this.offset += buffer.length;
  };
  proto.size = function size(this: EncoderLike) {
    return (this.chunkBytes ?? 0) + this.offset;
  };
  Object.defineProperty(proto, 'buffer', {
    configurable: true,
    get(this: EncoderLike): Buffer {
      if (!this.chunks || this.chunks.length === 0) return this.buf.subarray(0, this.offset);
      const total = this.chunkBytes! + this.offset;
      const joined = Buffer.concat([...this.chunks, this.buf.subarray(0, this.offset)], total);
      // From now on one contiguous buffer: asking again costs nothing.
      this.chunks = undefined;
      this.chunkBytes = 0;
      this.buf = joined;
      this.offset = total;
      return joined;
    },
  });
  proto.writeEncoder = function writeEncoder(this: EncoderLike, value: EncoderLike) {
    if (!isEncoder(value)) throw new Error('value should be an instance of Encoder');
    if (value.size() < REFERENCE_MIN_BYTES) {
      this.writeBufferInternal(value.buffer);
      return this;
    }
    for (const piece of value.chunks ?? []) appendReference(this, piece);
    if (value.offset > 0) appendReference(this, value.buf.subarray(0, value.offset));
    return this;
  };
  proto.writeEncoderArray = function writeEncoderArray(this: EncoderLike, value: EncoderLike[]) {
    if (!Array.isArray(value) || !value.every(isEncoder)) throw new Error('all values should be an instance of Encoder[]');
    let small = 0;
    for (const v of value) if (v.size() < REFERENCE_MIN_BYTES) small += v.size();
    this.ensureAvailable(small);
    for (const v of value) this.writeEncoder(v);
    return this;
  };
  return true;
}

/** Whether kafkajs's Encoder runs with the growth and referencing above. */
export const kafkaEncoderPatched = patchEncoder();

/*
 * 4. kafkajs's RecordBatch joins its body to checksum it and joins the batch
 *    to prefix its length: two more copies of every produced byte. Without
 *    compression, the batch here is checksummed piece by piece (CRC-32C
 *    continues from one piece to the next) and framed by its size, so the
 *    only copy left is the one into the socket. Compressed batches keep
 *    kafkajs's encoder (the codec reads the records joined anyway). Needs
 *    the native CRC and the referencing Encoder; installed before kafkajs's
 *    produce request captures RecordBatch, like the CRC.
 */
interface RecordBatchOptions {
  compression?: number;
  firstOffset?: unknown;
  firstTimestamp?: number;
  maxTimestamp?: number;
  partitionLeaderEpoch?: number;
  lastOffsetDelta?: number;
  transactional?: boolean;
  producerId?: unknown;
  producerEpoch?: number;
  firstSequence?: number;
  records?: EncoderLike[];
}

interface KafkaEncoder extends EncoderLike {
  writeInt8(v: number): KafkaEncoder;
  writeInt16(v: number): KafkaEncoder;
  writeInt32(v: number): KafkaEncoder;
  writeUInt32(v: number): KafkaEncoder;
  writeInt64(v: unknown): KafkaEncoder;
  writeArray(array: unknown[], type?: string): KafkaEncoder;
}

/** CRC-32C of an encoder's bytes without joining them. */
function encoderCrc(enc: EncoderLike, crc: NativeCrc): number {
  let c = 0;
  for (const piece of enc.chunks ?? []) c = crc(piece, c);
  return crc(enc.buf.subarray(0, enc.offset), c) >>> 0;
}

function patchRecordBatch(): boolean {
  if (!native || !kafkaEncoderPatched || kafkaCrcImplementation !== 'native') return false;
  const producePath = require.resolve('kafkajs/src/protocol/requests/produce/v3/request.js');
  if (require.cache[producePath]) return false; // it captured kafkajs's RecordBatch already
  const v0 = require('kafkajs/src/protocol/recordBatch/v0/index.js') as {
    RecordBatch: (o: RecordBatchOptions) => Promise<EncoderLike>;
    MAGIC_BYTE: number;
  };
  const Encoder = require('kafkajs/src/protocol/encoder.js') as new () => KafkaEncoder;
  const Long = require('kafkajs/src/utils/long.js') as { fromInt(n: number): unknown; fromValue(n: number): unknown };
  const original = v0.RecordBatch;
  const crc = native;
  const NONE = 0;
  const TRANSACTIONAL_MASK = 16;
  v0.RecordBatch = async (opts: RecordBatchOptions) => {
    if ((opts.compression ?? NONE) !== NONE) return original(opts);
    const now = Date.now();
    const records = opts.records ?? [];
    const body = new Encoder()
      .writeInt16(opts.transactional ? TRANSACTIONAL_MASK : 0)
      .writeInt32(opts.lastOffsetDelta ?? 0)
      .writeInt64(opts.firstTimestamp ?? now)
      .writeInt64(opts.maxTimestamp ?? now)
      .writeInt64(opts.producerId ?? Long.fromValue(-1))
      .writeInt16(opts.producerEpoch ?? 0)
      .writeInt32(opts.firstSequence ?? 0);
    if (records.every((r) => typeof r === typeof records[0])) body.writeArray(records, typeof records[0]);
    else body.writeArray(records);
    const batch = new Encoder()
      .writeInt32(opts.partitionLeaderEpoch ?? 0)
      .writeInt8(v0.MAGIC_BYTE)
      .writeUInt32(encoderCrc(body, crc));
    batch.writeEncoder(body);
    const out = new Encoder().writeInt64(opts.firstOffset ?? Long.fromInt(0)).writeInt32(batch.size());
    out.writeEncoder(batch);
    return out;
  };
  return true;
}

/** Whether uncompressed record batches are checksummed and framed without joining (item 4). */
export const kafkaRecordBatchPatched = patchRecordBatch();

/**
 * 5. No negative timer in kafkajs's request queue (not a speed-up: a
 * correctness patch for Node 24).
 *
 * `RequestQueue.scheduleCheckPendingRequests` arms its throttle check with
 * `setTimeout(…, throttledUntil - Date.now())`, which is negative whenever the
 * queue is not throttled and nothing is pending (tulios/kafkajs#1751).
 * Node 20 silently treated that as 1 ms; Node 24 still does, but prints a
 * `TimeoutNegativeWarning` on stderr once per process. The patched method
 * arms the same timer with the delay clamped to the 1 ms Node uses anyway,
 * so timing is unchanged and nothing is printed. The original's source is
 * fingerprinted: a kafkajs release that changes the method leaves it
 * unpatched (and the test of this patch fails), rather than patching code
 * this was not written against.
 */
interface RequestQueueLike {
  throttledUntil: number;
  pending: unknown[];
  throttleCheckTimeoutId: ReturnType<typeof setTimeout> | null;
  checkPendingRequests(): void;
}

/** SHA-256 of kafkajs 2.2.4's `scheduleCheckPendingRequests` source, the method replaced below. */
export const REQUEST_QUEUE_SCHEDULE_FINGERPRINT = '04347ea969c6f2e3754427c0cbaee0bd4ce947fbd82f7b6e027506a06dfc581a';

function patchRequestQueue(): boolean {
  if (!kafkaPatchesEnabled) return false;
  const RequestQueue = require('kafkajs/src/network/requestQueue/index.js') as { prototype: RequestQueueLike & { scheduleCheckPendingRequests(): void } };
  const original = RequestQueue.prototype.scheduleCheckPendingRequests;
  const fingerprint = createHash('sha256').update(original.toString()).digest('hex');
  if (fingerprint !== REQUEST_QUEUE_SCHEDULE_FINGERPRINT) return false;
  const CHECK_PENDING_REQUESTS_INTERVAL = 10; // kafkajs's constant of the same name
  RequestQueue.prototype.scheduleCheckPendingRequests = function (this: RequestQueueLike) {
    if (this.throttleCheckTimeoutId) return; // one check armed at a time, as before
    let delay = this.throttledUntil - Date.now();
    if (this.pending.length > 0 && delay <= 0) delay = CHECK_PENDING_REQUESTS_INTERVAL;
    this.throttleCheckTimeoutId = setTimeout(
      () => {
        this.throttleCheckTimeoutId = null;
        this.checkPendingRequests();
      },
      Math.max(1, delay),
    );
  };
  return true;
}

/** Whether kafkajs's request queue arms its throttle check without a negative delay (item 5). */
export const kafkaRequestQueuePatched = patchRequestQueue();

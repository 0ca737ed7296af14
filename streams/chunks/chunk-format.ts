/**
 * Chunk sets (docs/design-chunked-records.md §1): a value above its topic's
 * limit travels as `count` records with the same key on one partition, each
 * holding this 48-byte header and one slice of the whole value. Python's
 * twin is python/src/rollout_stream/chunks.py; both read the golden
 * fixtures in docs/examples/chunks/.
 */
import { crc32 } from '@node-rs/crc32';
import { UndecodableError } from '../codecs/wire-format.js';

/** Byte 0 of a chunk: 0x00 is Confluent, 0xC3 Avro single-object, '{' '[' JSON. */
export const CHUNK_MAGIC = 0xcb;
export const CHUNK_VERSION = 1;
/** The header a v1 writer writes; a v1 reader accepts any `header_len` >= this and skips the rest. */
export const CHUNK_HEADER_BYTES = 48;
export const SET_ID_BYTES = 16;
/** Every payload but the last is a multiple of this, so a payload lands on a 64-aligned offset of the value. */
export const CHUNK_ALIGN = 64;
/** `kafka.max_value_bytes`' default: the largest whole value (4 GiB). */
export const DEFAULT_MAX_VALUE_BYTES = 2 ** 32;

export interface ChunkHeader {
  setId: Buffer;
  index: number;
  count: number;
  totalSize: number;
  payloadAt: number;
  /** CRC-32 (IEEE, zlib's) of the whole value, unsigned. */
  crc: number;
  /** 48 for what we write; larger from a later v1 writer that appended fields. */
  headerLen: number;
}

export interface ParsedChunk extends ChunkHeader {
  /** The slice of the whole value this chunk carries: a view of the record value, no copy. */
  payload: Buffer;
}

/** Whether a record value is a chunk (byte 0 is 0xCB); a chunk that does not parse is still one. */
export function isChunk(value: Uint8Array | null): boolean {
  return value !== null && value.length > 0 && value[0] === CHUNK_MAGIC;
}

/**
 * The 48-byte v1 header. Byte grammar (big-endian, as the Confluent header):
 *
 *   chunk       := header payload
 *   header      := magic version header_len set_id index count total_size payload_at crc
 *   magic       := 0xCB                 (1 byte)
 *   version     := 0x01                 (1 byte; any other is undecodable)
 *   header_len  := uint16               (48; a v1 reader accepts >= 48 and skips the rest)
 *   set_id      := 16 bytes             (random per set)
 *   index       := uint32               (0 .. count-1)
 *   count       := uint32               (>= 2: a value that fits is never chunked)
 *   total_size  := uint64               (bytes of the whole value, <= kafka.max_value_bytes)
 *   payload_at  := uint64               (where this payload starts in the whole value)
 *   crc         := uint32               (CRC-32 IEEE of the whole value, the same in every chunk)
 *   payload     := bytes to the end of the record value
 *
 * Writer rules: payloads are contiguous (`payload_at` = the sum of the earlier
 * ones), each but the last a multiple of 64 bytes, the last ending at
 * `total_size`; their concatenation is the whole value byte for byte.
 * Throws RangeError on a header no v1 reader would accept.
 */
export function encodeChunkHeader(h: Omit<ChunkHeader, 'headerLen'>): Buffer {
  if (h.setId.length !== SET_ID_BYTES) throw new RangeError(`set id of ${h.setId.length} bytes, expected ${SET_ID_BYTES}`);
  if (!(h.count >= 2 && h.count <= 0xffffffff && h.index >= 0 && h.index < h.count)) throw new RangeError(`chunk ${h.index} of ${h.count}`);
  if (!(h.payloadAt >= 0 && h.payloadAt <= h.totalSize && Number.isSafeInteger(h.totalSize))) throw new RangeError(`payload at ${h.payloadAt} of ${h.totalSize}`);
  const out = Buffer.alloc(CHUNK_HEADER_BYTES);
  out[0] = CHUNK_MAGIC;
  out[1] = CHUNK_VERSION;
  out.writeUInt16BE(CHUNK_HEADER_BYTES, 2);
  h.setId.copy(out, 4);
  out.writeUInt32BE(h.index, 20);
  out.writeUInt32BE(h.count, 24);
  out.writeBigUInt64BE(BigInt(h.totalSize), 28);
  out.writeBigUInt64BE(BigInt(h.payloadAt), 36);
  out.writeUInt32BE(h.crc >>> 0, 44);
  return out;
}

/**
 * Parses one chunk's header, checking what one chunk can say about itself:
 * magic, version, header length, `index < count`, `count >= 2`, the total
 * against `maxValueBytes`, and that the payload stays inside the total.
 * What needs the other chunks (contiguity, equal totals, the CRC) is the
 * Reassembler's. Throws UndecodableError (code `undecodable`).
 */
export function parseChunk(value: Buffer, maxValueBytes = DEFAULT_MAX_VALUE_BYTES): ParsedChunk {
  const bad = (why: string) => new UndecodableError(`chunk of ${value.length} bytes: ${why}`);
  if (value.length < 4) throw bad('truncated header');
  if (value[0] !== CHUNK_MAGIC) throw bad(`unknown magic byte ${value[0]} (expected ${CHUNK_MAGIC})`);
  if (value[1] !== CHUNK_VERSION) throw bad(`unknown chunk version ${value[1]} (this reader knows ${CHUNK_VERSION})`);
  const headerLen = value.readUInt16BE(2);
  if (headerLen < CHUNK_HEADER_BYTES) throw bad(`header_len ${headerLen} below ${CHUNK_HEADER_BYTES}`);
  if (value.length < headerLen) throw bad(`truncated header (header_len ${headerLen})`);
  const index = value.readUInt32BE(20);
  const count = value.readUInt32BE(24);
  const total = value.readBigUInt64BE(28);
  const at = value.readBigUInt64BE(36);
  if (count < 2) throw bad(`count ${count} (a chunk set has at least 2 chunks)`);
  if (index >= count) throw bad(`index ${index} out of range for count ${count}`);
  if (total > BigInt(maxValueBytes)) throw bad(`total_size ${total} above the ceiling of ${maxValueBytes} bytes (kafka.max_value_bytes)`);
  const payload = value.subarray(headerLen);
  if (at + BigInt(payload.length) > total) throw bad(`payload of ${payload.length} bytes at ${at} runs past total_size ${total}`);
  return {
    setId: value.subarray(4, 20),
    index,
    count,
    totalSize: Number(total),
    payloadAt: Number(at),
    crc: value.readUInt32BE(44),
    headerLen,
    payload,
  };
}

/** CRC-32 (IEEE) of `data`, continuing from `crc` (0 to start). */
export function chunkCrc(data: Uint8Array, crc = 0): number {
  return crc32(Buffer.from(data.buffer, data.byteOffset, data.byteLength), crc) >>> 0;
}

/**
 * Cuts `value` into chunk record values of at most `payloadBytes` of payload
 * each (a positive multiple of 64). The writer side of the format, used by
 * tests now and by `planSends` later. Throws RangeError for a value that
 * would fit in one chunk (it is never chunked) or a bad payload size.
 */
export function splitIntoChunks(value: Uint8Array, payloadBytes: number, setId: Buffer): Buffer[] {
  if (!(Number.isSafeInteger(payloadBytes) && payloadBytes > 0 && payloadBytes % CHUNK_ALIGN === 0)) {
    throw new RangeError(`chunk payload of ${payloadBytes} bytes: must be a positive multiple of ${CHUNK_ALIGN}`);
  }
  const count = Math.ceil(value.length / payloadBytes);
  if (count < 2) throw new RangeError(`a value of ${value.length} bytes fits in one chunk of ${payloadBytes}: it is not chunked`);
  const crc = chunkCrc(value);
  const out: Buffer[] = [];
  for (let index = 0; index < count; index++) {
    const payloadAt = index * payloadBytes;
    const header = encodeChunkHeader({ setId, index, count, totalSize: value.length, payloadAt, crc });
    out.push(Buffer.concat([header, value.subarray(payloadAt, payloadAt + payloadBytes)]));
  }
  return out;
}

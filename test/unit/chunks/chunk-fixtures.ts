/**
 * Builders shared by the chunk tests: the deterministic values and set ids
 * of docs/examples/chunks/ (python/tests/chunk_cases.py builds the same),
 * and header patches that write what no writer would.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const CHUNKS_DIR = join(import.meta.dirname, '..', '..', '..', 'docs', 'examples', 'chunks');

export const readChunkDoc = <T>(name: string): T => JSON.parse(readFileSync(join(CHUNKS_DIR, name), 'utf8')) as T;

/** byte i = (13·seed + 7·i) mod 251. */
export function patternValue(size: number, seed: number): Buffer {
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i++) out[i] = (13 * seed + 7 * i) % 251;
  return out;
}

/** The name's UTF-8 bytes padded with zeros to 16. */
export function namedSetId(name: string): Buffer {
  const id = Buffer.alloc(16);
  id.write(name, 'utf8');
  return id;
}

export interface HeaderPatch {
  magic?: number;
  version?: number;
  header_len?: number;
  index?: number;
  count?: number;
  total_size?: number;
  payload_at?: number;
  crc?: number;
}

/** A copy of `chunk` with header fields overwritten in place, whatever they say. */
export function patchHeader(chunk: Buffer, p: HeaderPatch): Buffer {
  const out = Buffer.from(chunk);
  if (p.magic !== undefined) out[0] = p.magic;
  if (p.version !== undefined) out[1] = p.version;
  if (p.header_len !== undefined) out.writeUInt16BE(p.header_len, 2);
  if (p.index !== undefined) out.writeUInt32BE(p.index, 20);
  if (p.count !== undefined) out.writeUInt32BE(p.count, 24);
  if (p.total_size !== undefined) out.writeBigUInt64BE(BigInt(p.total_size), 28);
  if (p.payload_at !== undefined) out.writeBigUInt64BE(BigInt(p.payload_at), 36);
  if (p.crc !== undefined) out.writeUInt32BE(p.crc >>> 0, 44);
  return out;
}

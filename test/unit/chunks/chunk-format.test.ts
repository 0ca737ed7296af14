/**
 * The chunk header (streams/chunks/chunk-format.ts) against the golden
 * fixtures of docs/examples/chunks/fixtures.json, which
 * python/tests/test_chunks.py reads too, and old readers meeting a chunk.
 * The fixtures file must be exactly what this suite builds; regenerate after
 * an intended change with
 * `UPDATE_CHUNK_FIXTURES=1 npx vitest run --project unit test/unit/chunks/chunk-format.test.ts`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { DEAD_LETTER_REASONS, kindOfCode } from '../../../errors/index.js';
import { UndecodableError, readSchemaId } from '../../../streams/codecs/wire-format.js';
import {
  CHUNK_HEADER_BYTES,
  DEFAULT_MAX_VALUE_BYTES,
  encodeChunkHeader,
  isChunk,
  parseChunk,
  splitIntoChunks,
} from '../../../streams/chunks/chunk-format.js';
import { Reassembler } from '../../../streams/chunks/reassembler.js';
import { CHUNKS_DIR, patchHeader, patternValue, readChunkDoc, type HeaderPatch } from './chunk-fixtures.js';

interface Fixture {
  name: string;
  about: string;
  chunks: string[];
  /** Positive: the parsed headers and the whole value. */
  headers?: { set_id: string; index: number; count: number; total_size: number; payload_at: number; crc: number; header_len: number }[];
  value?: string;
  /** Negative: where it fails and a word both languages' messages contain. */
  error?: { at: 'parse'; index: number; match: string } | { at: 'reassemble'; detail: string };
}

const SET_ID = Buffer.from('000102030405060708090a0b0c0d0e0f', 'hex');
const VALUE = patternValue(300, 9);

function build(): Fixture[] {
  const good = splitIntoChunks(VALUE, 128, SET_ID);
  const hex = (bs: Buffer[]) => bs.map((b) => b.toString('hex'));
  const first = good[0]!;
  const parseFail = (name: string, about: string, chunk: Buffer, match: string): Fixture => ({ name, about, chunks: hex([chunk]), error: { at: 'parse', index: 0, match } });
  const header = (b: Buffer) => {
    const c = parseChunk(b);
    return { set_id: c.setId.toString('hex'), index: c.index, count: c.count, total_size: c.totalSize, payload_at: c.payloadAt, crc: c.crc, header_len: c.headerLen };
  };
  // A later v1 writer's longer header: 8 more bytes the reader skips.
  const longer = good.map((b) => Buffer.concat([patchHeader(b.subarray(0, CHUNK_HEADER_BYTES), { header_len: 56 }), Buffer.alloc(8, 0xee), b.subarray(CHUNK_HEADER_BYTES)]));
  const patchAll = (p: HeaderPatch) => good.map((b) => patchHeader(b, p));
  return [
    { name: 'three-chunk-set', about: 'a 300-byte value in payloads of 128, 128 and 44 bytes', chunks: hex(good), headers: good.map(header), value: VALUE.toString('hex') },
    { name: 'header-len-56', about: 'a v1 header 8 bytes longer than 48: the reader skips what it does not know', chunks: hex(longer), headers: longer.map(header), value: VALUE.toString('hex') },
    parseFail('wrong-magic', 'byte 0 is 0xCA, not 0xCB', patchHeader(first, { magic: 0xca }), 'magic'),
    parseFail('version-2', 'a version this reader does not know', patchHeader(first, { version: 2 }), 'version'),
    parseFail('header-len-40', 'header_len below 48', patchHeader(first, { header_len: 40 }), 'header_len'),
    parseFail('truncated-header', 'the value ends inside the 48-byte header', first.subarray(0, 30), 'truncated'),
    parseFail('truncated-before-header-len', 'three bytes: not even header_len', first.subarray(0, 3), 'truncated'),
    parseFail('count-1', 'a set of one chunk (a value that fits is never chunked)', patchHeader(first, { count: 1 }), 'count'),
    parseFail('index-out-of-range', 'index 3 of a count of 3', patchHeader(first, { index: 3 }), 'index'),
    parseFail('total-over-ceiling', 'total_size 4 GiB + 1, above kafka.max_value_bytes', patchHeader(first, { total_size: DEFAULT_MAX_VALUE_BYTES + 1 }), 'ceiling'),
    parseFail('payload-past-total', 'chunk 2 says its 44 bytes start at 290 of 300', patchHeader(good[2]!, { payload_at: 290 }), 'past'),
    { name: 'payload-at-gap', about: 'chunk 1 says it starts at 160, not 128: a gap of 32 bytes', chunks: hex([first, patchHeader(good[1]!, { payload_at: 160 }), good[2]!]), error: { at: 'reassemble', detail: 'inconsistent' } },
    { name: 'crc-mismatch', about: 'every chunk carries a CRC-32 that is not the value\'s', chunks: hex(patchAll({ crc: 0x12345678 })), error: { at: 'reassemble', detail: 'crc_mismatch' } },
  ];
}

const FIXTURES_FILE = join(CHUNKS_DIR, 'fixtures.json');
const built = build();
if (process.env.UPDATE_CHUNK_FIXTURES === '1') writeFileSync(FIXTURES_FILE, JSON.stringify({ fixtures: built }, null, 1) + '\n');
const { fixtures } = readChunkDoc<{ fixtures: Fixture[] }>('fixtures.json');

const record = (value: Buffer, offset: number) => ({ topic: 't', partition: 0, offset: String(offset), timestamp: 0, key: null, value, headers: {} });

function reassemble(chunks: Buffer[]) {
  const r = new Reassembler({ start: '0', trusted: true, maxHeldBytes: 1 << 20, chunkWaitMs: 1000 });
  chunks.forEach((c, i) => r.push(record(c, i), 0));
  return r.take();
}

describe('chunk format', () => {
  test('the fixtures file is exactly what this suite builds', () => {
    expect(fixtures).toEqual(built);
  });

  test.each(fixtures.filter((f) => f.headers).map((f) => [f.name, f] as const))('positive fixture %s parses to its headers and reassembles to its value', (_, f) => {
    const chunks = f.chunks.map((h) => Buffer.from(h, 'hex'));
    chunks.forEach((c, i) => {
      const want = f.headers![i]!;
      const got = parseChunk(c);
      expect({ set_id: got.setId.toString('hex'), index: got.index, count: got.count, total_size: got.totalSize, payload_at: got.payloadAt, crc: got.crc, header_len: got.headerLen }).toEqual(want);
      expect(isChunk(c)).toBe(true);
      if (want.header_len === CHUNK_HEADER_BYTES) {
        expect(encodeChunkHeader({ setId: got.setId, index: got.index, count: got.count, totalSize: got.totalSize, payloadAt: got.payloadAt, crc: got.crc })).toEqual(c.subarray(0, CHUNK_HEADER_BYTES));
      }
    });
    const [out, ...rest] = reassemble(chunks);
    expect(rest).toEqual([]);
    expect(out!.kind).toBe('record');
    expect(out!.value!.toString('hex')).toBe(f.value);
  });

  test.each(fixtures.filter((f) => f.error).map((f) => [f.name, f] as const))('negative fixture %s fails where it says', (_, f) => {
    const chunks = f.chunks.map((h) => Buffer.from(h, 'hex'));
    const e = f.error!;
    if (e.at === 'parse') {
      expect(() => parseChunk(chunks[e.index]!)).toThrow(UndecodableError);
      expect(() => parseChunk(chunks[e.index]!)).toThrow(e.match);
      // A value that does not start with 0xCB is no chunk: it goes on whole, to its own decoder.
      const out = reassemble(chunks);
      expect(out.map((o) => o.kind)).toEqual([isChunk(chunks[0]!) ? 'undecodable' : 'record']);
    } else {
      const out = reassemble(chunks);
      expect(out).toHaveLength(1);
      expect(out[0]!.kind === 'incomplete' && out[0]!.incomplete.detail).toBe(e.detail);
    }
  });

  test('the header is 48 bytes of magic 0xCB, version 1, header_len 48, big-endian fields', () => {
    const h = encodeChunkHeader({ setId: SET_ID, index: 1, count: 3, totalSize: 300, payloadAt: 128, crc: 0xdeadbeef });
    expect(h.toString('hex')).toBe('cb0100300001' + '02030405060708090a0b0c0d0e0f' + '00000001' + '00000003' + '000000000000012c' + '0000000000000080' + 'deadbeef');
  });

  test('splitting refuses a value that fits in one chunk and a payload size that is not a multiple of 64', () => {
    expect(() => splitIntoChunks(VALUE, 320, SET_ID)).toThrow(/not chunked/);
    expect(() => splitIntoChunks(VALUE, 100, SET_ID)).toThrow(/multiple of 64/);
  });
});

describe('old readers meet a chunk', () => {
  test('the Confluent wire-format check throws undecodable on the magic byte', () => {
    for (const h of fixtures[0]!.chunks) {
      const chunk = Buffer.from(h, 'hex');
      expect(() => readSchemaId(chunk)).toThrow(UndecodableError);
      expect(() => readSchemaId(chunk)).toThrow('unknown magic byte 203');
    }
  });
});

describe('the chunk error codes', () => {
  test('incomplete_record is a dead-letter reason, record_limit_changed takes the abort-and-rebuild path', () => {
    expect(DEAD_LETTER_REASONS).toContain('incomplete_record');
    expect(kindOfCode('incomplete_record')).toBe('poison');
    expect(kindOfCode('record_limit_changed')).toBe('task_migrated');
  });
});

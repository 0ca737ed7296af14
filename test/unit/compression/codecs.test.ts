import kafkajs from 'kafkajs';
import { describe, expect, test } from 'vitest';
import { kafkaConfigSchema } from '../../../config/schema.js';
import { generateEvents } from '../../../loadgen/index.js';
import { AvroBodyCodec } from '../../../streams/codecs/codec.js';
import {
  ADDED_CODECS,
  COMPRESSION_NAMES,
  CompressionError,
  compressionType,
  kafkaCodec,
  registerCompressionCodecs,
  type CompressionName,
} from '../../../streams/kafka/kafkajs/compression.js';

const { CompressionCodecs, CompressionTypes } = kafkajs;
const COMPRESSING = COMPRESSION_NAMES.filter((n): n is Exclude<CompressionName, 'none'> => n !== 'none');

/** One router-replay row (routes [48,8] int8) and one published-max row, Avro-encoded as on the wire. */
function realisticRows(): Buffer[] {
  const codec = new AvroBodyCodec('rowCompleted');
  return (['router-replay', 'published-max'] as const).map((profile) => {
    for (const e of generateEvents({ batches: 1, groupsPerBatch: 1, generations: 2, seed: 3, profile })) {
      if (e.kind === 'row') return codec.encodeBody({ kind: 'row', row: e.row });
    }
    throw new Error(`no row from ${profile}`);
  });
}

function pseudoRandom(bytes: number, seed: number): Buffer {
  const out = Buffer.alloc(bytes);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < bytes; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

const FIXTURE_TEXT = 'rollout-stream golden fixture: rollout-stream golden fixture: rollout-stream golden fixture.';

describe('compression codecs', () => {
  const inputs: Array<[string, Buffer]> = [
    ['empty', Buffer.alloc(0)],
    ['one byte', Buffer.from([7])],
    ['text', Buffer.from(FIXTURE_TEXT.repeat(300))],
    ['incompressible 300 KiB', pseudoRandom(300 * 1024, 11)],
    ['5 MiB of mixed runs and noise (several lz4 blocks)', Buffer.concat([Buffer.alloc(2 << 20, 1), pseudoRandom(1 << 20, 5), Buffer.alloc(2 << 20, 9)])],
  ];

  for (const name of COMPRESSING) {
    test(`${name} round-trips every input through the codec kafkajs runs`, async () => {
      const codec = kafkaCodec(name)!;
      for (const [label, input] of inputs) {
        const packed = await codec.compress(input);
        expect((await codec.decompress(packed)).equals(input), `${name}: ${label}`).toBe(true);
      }
    });

    test(`${name} round-trips realistic rollout rows and shrinks them`, async () => {
      const codec = kafkaCodec(name)!;
      for (const row of realisticRows()) {
        const packed = await codec.compress(row);
        expect(packed.length).toBeLessThan(row.length);
        expect((await codec.decompress(packed)).equals(row)).toBe(true);
      }
    });
  }

  test('registration puts our codecs into kafkajs and is idempotent', async () => {
    registerCompressionCodecs();
    registerCompressionCodecs();
    for (const type of [CompressionTypes.Snappy, CompressionTypes.LZ4, CompressionTypes.ZSTD] as const) {
      const codec = (CompressionCodecs[type] as () => { compress(e: { buffer: Buffer }): Promise<Buffer>; decompress(b: Buffer): Promise<Buffer> })();
      const input = Buffer.from(FIXTURE_TEXT);
      expect((await codec.decompress(await codec.compress({ buffer: input }))).equals(input)).toBe(true);
    }
  });

  test('compressionType maps every config name to the kafkajs attribute value', () => {
    expect(COMPRESSION_NAMES.map(compressionType)).toEqual([
      CompressionTypes.None,
      CompressionTypes.GZIP,
      CompressionTypes.Snappy,
      CompressionTypes.LZ4,
      CompressionTypes.ZSTD,
    ]);
    expect(COMPRESSION_NAMES.map(compressionType)).toEqual([0, 1, 2, 3, 4]);
    expect(() => compressionType('brotli' as CompressionName)).toThrow(CompressionError);
  });

  test('the config schema offers exactly the codecs this module registers, none by default', () => {
    expect(kafkaConfigSchema.shape.compression.unwrap().options).toEqual([...COMPRESSION_NAMES]);
    // bench/README.md "compression": on the measured machine no codec beat none end to end.
    expect(kafkaConfigSchema.parse({}).compression).toBe('none');
    expect(() => kafkaConfigSchema.parse({ compression: 'brotli' })).toThrow();
  });
});

describe('compression wire formats', () => {
  // Made with the reference CLIs (lz4 1.9.4 `-B4 --no-frame-crc`, the layout
  // Java's KafkaLZ4BlockOutputStream writes; zstd 1.5.4 `-3`) from FIXTURE_TEXT.
  const LZ4_REFERENCE =
    '04224d186040822a000000ff10726f6c6c6f75742d73747265616d20676f6c64656e20666978747572653a201f002550747572652e00000000';
  const ZSTD_REFERENCE =
    '28b52ffd245c4501000402726f6c6c6f75742d73747265616d20676f6c64656e20666978747572653a202e01004748ca095edce667';

  test('lz4 decodes a frame written by the reference implementation', async () => {
    expect((await kafkaCodec('lz4')!.decompress(Buffer.from(LZ4_REFERENCE, 'hex'))).toString()).toBe(FIXTURE_TEXT);
  });

  test('lz4 writes an LZ4 frame with independent blocks and a valid header', async () => {
    const frame = await kafkaCodec('lz4')!.compress(Buffer.from(FIXTURE_TEXT));
    expect(frame.subarray(0, 4).toString('hex')).toBe('04224d18');
    const flg = frame[4]!;
    expect(flg >> 6).toBe(0b01); // version 1
    expect((flg >> 5) & 1).toBe(1); // block independence: Kafka's reader refuses dependent blocks
    expect((flg >> 4) & 1).toBe(0); // no block checksums
  });

  test('zstd decodes a frame written by the reference implementation, and writes standard frames', async () => {
    const zstd = kafkaCodec('zstd')!;
    expect((await zstd.decompress(Buffer.from(ZSTD_REFERENCE, 'hex'))).toString()).toBe(FIXTURE_TEXT);
    expect((await zstd.compress(Buffer.from(FIXTURE_TEXT))).subarray(0, 4).toString('hex')).toBe('28b52ffd');
  });

  test('snappy reads the xerial framing Java producers write, one block or several', async () => {
    const a = Buffer.from(FIXTURE_TEXT.repeat(40));
    const b = pseudoRandom(10_000, 3);
    const blocks = [await ADDED_CODECS.snappy.compress(a), await ADDED_CODECS.snappy.compress(b)];
    const header = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00, 0, 0, 0, 1, 0, 0, 0, 1]);
    const lengthOf = (blk: Buffer) => {
      const out = Buffer.alloc(4);
      out.writeInt32BE(blk.length);
      return out;
    };
    const framed = Buffer.concat([header, ...blocks.flatMap((blk) => [lengthOf(blk), blk])]);
    expect((await kafkaCodec('snappy')!.decompress(framed)).equals(Buffer.concat([a, b]))).toBe(true);
  });

  test('corrupt input fails with a compression_corrupt error naming the codec', async () => {
    for (const name of ['snappy', 'lz4', 'zstd'] as const) {
      const packed = await kafkaCodec(name)!.compress(pseudoRandom(4096, 9));
      const broken = Buffer.concat([packed.subarray(0, 6), Buffer.alloc(64, 0xff)]);
      const err = await kafkaCodec(name)!.decompress(broken).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err, name).toBeInstanceOf(CompressionError);
      expect((err as CompressionError).code).toBe('compression_corrupt');
      expect((err as CompressionError).message).toContain(name);
    }
  });

  test('a truncated xerial block is reported, not read past the end', async () => {
    const header = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00, 0, 0, 0, 1, 0, 0, 0, 1]);
    const framed = Buffer.concat([header, Buffer.from([0, 0, 1, 0]), Buffer.alloc(10)]);
    await expect(kafkaCodec('snappy')!.decompress(framed)).rejects.toThrow(/overruns/);
  });
});

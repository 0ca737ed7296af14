import { createRequire } from 'node:module';
import { beforeAll, describe, expect, test } from 'vitest';

const require = createRequire(import.meta.url);

let implementation = '';
beforeAll(async () => {
  implementation = (await import('../../../streams/kafka/kafkajs/speedups.js')).kafkaCrcImplementation;
});

describe('native CRC-32C for kafkajs record batches', () => {
  test('replaces kafkajs\'s CRC module, and record batches kafkajs encodes carry the right CRC', async () => {
    expect(implementation).toBe('native');
    const installed = require('kafkajs/src/protocol/recordBatch/crc32C/index.js') as (b: Buffer) => number;
    const jsCrc = require('kafkajs/src/protocol/recordBatch/crc32C/crc32C.js') as (b: Buffer) => number;
    expect(installed).not.toBe(jsCrc);
    const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js') as { RecordBatch: (o: object) => Promise<{ buffer: Buffer }> };
    const batch = await RecordBatch({ records: [], firstTimestamp: 0, maxTimestamp: 0, lastOffsetDelta: 0 });
    // Layout: baseOffset(8) batchLength(4) leaderEpoch(4) magic(1) crc(4) body...
    const crc = batch.buffer.readUInt32BE(17);
    expect(batch.buffer.length).toBeGreaterThan(40);
    expect(crc).toBe(jsCrc(batch.buffer.subarray(21)) >>> 0);
  });

  test.each([0, 1, 3, 7, 8, 9, 63, 64, 65, 1000, 45_000, 1_234_567])('equals kafkajs\'s own implementation on %i random bytes', (n) => {
    const installed = require('kafkajs/src/protocol/recordBatch/crc32C/index.js') as (b: Buffer) => number;
    const jsCrc = require('kafkajs/src/protocol/recordBatch/crc32C/crc32C.js') as (b: Buffer) => number;
    const buf = Buffer.alloc(n);
    for (let i = 0; i < n; i++) buf[i] = (i * 2654435761) >>> 24;
    expect(installed(buf)).toBe(jsCrc(buf) >>> 0);
    expect(installed(buf.subarray(1))).toBe(jsCrc(buf.subarray(1)) >>> 0);
  });

  test('matches the standard CRC-32C check value', () => {
    const installed = require('kafkajs/src/protocol/recordBatch/crc32C/index.js') as (b: Buffer) => number;
    expect(installed(Buffer.from('123456789'))).toBe(0xe3069283);
  });
});

describe('kafkajs Encoder growth without zero-filling', () => {
  type Enc = { buffer: Buffer; writeInt32(v: number): Enc; writeInt8(v: number): Enc; writeBytes(b: Buffer): Enc; writeEncoder(e: Enc): Enc; writeEncoderArray(e: Enc[]): Enc };
  const Encoder = () => require('kafkajs/src/protocol/encoder.js') as new (size?: number) => Enc;

  test('is patched', async () => {
    expect((await import('../../../streams/kafka/kafkajs/speedups.js')).kafkaEncoderPatched).toBe(true);
  });

  test('nested encoders, arrays and growth past many powers of two give exactly the expected bytes, whatever garbage the pool held', () => {
    // Dirty the allocator's pool so unwritten bytes would show up as non-zero.
    for (let i = 0; i < 64; i++) Buffer.allocUnsafe(2048).fill(0xab);
    const E = Encoder();
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
    for (let round = 0; round < 50; round++) {
      const expected: Buffer[] = [];
      const outer = new E(1);
      const inners: Enc[] = [];
      const innerBytes: Buffer[] = [];
      for (let k = 0; k < 1 + Math.floor(rnd() * 5); k++) {
        const inner = new E(1);
        const parts: Buffer[] = [];
        for (let j = 0; j < 1 + Math.floor(rnd() * 6); j++) {
          const n = Math.floor(rnd() * 5000);
          const bytes = Buffer.alloc(n, Math.floor(rnd() * 256));
          inner.writeInt32(n).writeBytes(bytes).writeInt8(-3);
          const head = Buffer.alloc(8);
          head.writeInt32BE(n, 0);
          head.writeInt32BE(n, 4);
          parts.push(head, bytes, Buffer.from([0xfd]));
        }
        inners.push(inner);
        innerBytes.push(Buffer.concat(parts));
      }
      outer.writeInt32(round);
      const r = Buffer.alloc(4);
      r.writeInt32BE(round);
      expected.push(r);
      outer.writeEncoderArray(inners);
      expected.push(...innerBytes);
      outer.writeEncoder(inners[0]!);
      expected.push(innerBytes[0]!);
      expect(Buffer.compare(outer.buffer, Buffer.concat(expected))).toBe(0);
    }
  });

  test('values and nested encoders over the reference threshold (16 KiB) give exactly the expected bytes, at every nesting depth', () => {
    const E = Encoder();
    let seed = 11;
    const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
    const sizes = [0, 1, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 70_000];
    for (let round = 0; round < 30; round++) {
      // Level 1: "records" with a mix of small and large values.
      const records: Array<{ enc: Enc; bytes: Buffer }> = [];
      for (let k = 0; k < 1 + Math.floor(rnd() * 4); k++) {
        const n = round < sizes.length ? sizes[(round + k) % sizes.length]! : Math.floor(rnd() * 90_000);
        const value = Buffer.alloc(n, (round * 31 + k) & 0xff);
        const enc = new E().writeInt8(k).writeBytes(value).writeInt32(n);
        const head = Buffer.from([k, 0, 0, 0, 0]);
        head.writeInt32BE(n, 1);
        const tail = Buffer.alloc(4);
        tail.writeInt32BE(n);
        records.push({ enc, bytes: Buffer.concat([head, value, tail]) });
      }
      // Level 2: a "batch body" holding them; level 3: a "batch"; level 4: a "request" framing it.
      const body = new E().writeInt32(round).writeEncoderArray(records.map((r) => r.enc));
      const bodyBytes = Buffer.concat([Buffer.from([0, 0, 0, round]), ...records.map((r) => r.bytes)]);
      expect(Buffer.compare(body.buffer, bodyBytes)).toBe(0); // joined once, as for the CRC
      const batch = new E().writeInt8(2).writeEncoder(body);
      const request = new E().writeInt32(bodyBytes.length + 1).writeEncoder(batch).writeBytes(batch.buffer);
      const size = Buffer.alloc(4);
      size.writeInt32BE(bodyBytes.length + 1);
      const batchBytes = Buffer.concat([Buffer.from([2]), bodyBytes]);
      const expected = Buffer.concat([size, batchBytes, size, batchBytes]);
      expect((request as unknown as { size(): number }).size()).toBe(expected.length);
      expect(Buffer.compare(request.buffer, expected)).toBe(0);
      expect(Buffer.compare(request.buffer, expected)).toBe(0); // asking twice gives the same bytes
    }
  });

  test('a record batch with large values encodes with a valid CRC and decodes back to the same records', async () => {
    const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js') as { RecordBatch: (o: object) => Promise<{ buffer: Buffer }> };
    const Record = require('kafkajs/src/protocol/recordBatch/record/v0/index.js') as (o: object) => unknown;
    const decodeBatch = require('kafkajs/src/protocol/recordBatch/v0/decoder.js') as (d: unknown) => Promise<{ records: Array<{ key: Buffer; value: Buffer }> }>;
    const Decoder = require('kafkajs/src/protocol/decoder.js') as new (b: Buffer) => unknown;
    const jsCrc = require('kafkajs/src/protocol/recordBatch/crc32C/crc32C.js') as (b: Buffer) => number;
    const values = [20_000, 5, 700_000, 16 * 1024].map((n, i) => Buffer.alloc(n, 7 + i));
    const records = values.map((value, i) => Record({ offsetDelta: i, key: Buffer.from(`k${i}`), value }));
    const batch = (await RecordBatch({ records, firstTimestamp: 1, maxTimestamp: 2, lastOffsetDelta: values.length - 1 })).buffer;
    // Layout: baseOffset(8) batchLength(4) leaderEpoch(4) magic(1) crc(4) body...
    expect(batch.readUInt32BE(17)).toBe(jsCrc(batch.subarray(21)) >>> 0);
    const decoded = await decodeBatch(new Decoder(batch));
    expect(decoded.records.map((r) => r.key.toString())).toEqual(['k0', 'k1', 'k2', 'k3']);
    decoded.records.forEach((r, i) => expect(Buffer.compare(r.value, values[i]!)).toBe(0));
  });
});

describe('kafkajs record batches checksummed and framed without joining', () => {
  type Batch = (o: object) => Promise<{ buffer: Buffer; size(): number }>;
  /** kafkajs's own RecordBatch, loaded afresh from its source (the cached module holds the patched one). */
  function kafkajsRecordBatch(): Batch {
    const path = require.resolve('kafkajs/src/protocol/recordBatch/v0/index.js');
    const patched = require.cache[path];
    delete require.cache[path];
    try {
      return (require(path) as { RecordBatch: Batch }).RecordBatch;
    } finally {
      require.cache[path] = patched;
    }
  }

  test('is patched', async () => {
    expect((await import('../../../streams/kafka/kafkajs/speedups.js')).kafkaRecordBatchPatched).toBe(true);
  });

  test('gives exactly kafkajs\'s bytes for small, large and mixed records, with and without transactions', async () => {
    const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js') as { RecordBatch: Batch };
    const original = kafkajsRecordBatch();
    expect(RecordBatch).not.toBe(original);
    const Record = require('kafkajs/src/protocol/recordBatch/record/v0/index.js') as (o: object) => unknown;
    const Long = require('kafkajs/src/utils/long.js') as { fromValue(n: number): unknown };
    const cases = [[], [5], [20_000], [16 * 1024 - 1, 16 * 1024, 3], [700_000, 5, 45_000, 1]];
    for (const [i, sizes] of cases.entries()) {
      for (const transactional of [false, true]) {
        const records = () => sizes.map((n, k) => Record({ offsetDelta: k, key: Buffer.from(`k${k}`), value: Buffer.alloc(n, 3 + k + i) }));
        const opts = {
          firstTimestamp: 1_700_000_000_000 + i,
          maxTimestamp: 1_700_000_000_009 + i,
          lastOffsetDelta: Math.max(0, sizes.length - 1),
          producerId: Long.fromValue(4242),
          producerEpoch: 3,
          firstSequence: 17 * i,
          transactional,
        };
        const mine = await RecordBatch({ ...opts, records: records() });
        const theirs = (await original({ ...opts, records: records() })).buffer;
        expect(mine.size()).toBe(theirs.length);
        expect(Buffer.compare(mine.buffer, theirs), `case ${i} transactional ${transactional}`).toBe(0);
      }
    }
  });
});

describe('kafkajs request queue without negative timers (Node 24 TimeoutNegativeWarning)', () => {
  /** Warnings a fresh process prints when an idle kafkajs request queue arms its throttle check. */
  async function warningsOfIdleQueue(patches: '0' | '1'): Promise<{ patched: boolean; warnings: string[]; firedWithinMs: number }> {
    const { spawnSync } = await import('node:child_process');
    const { fileURLToPath } = await import('node:url');
    const module = fileURLToPath(new URL('../../../streams/kafka/kafkajs/speedups.ts', import.meta.url));
    const script = `const warnings = [];
      process.on('warning', (w) => warnings.push(w.name));
      const m = await import(${JSON.stringify(module)});
      const { createRequire } = await import('node:module');
      const RequestQueue = createRequire(${JSON.stringify(module)})('kafkajs/src/network/requestQueue/index.js');
      const quiet = { debug() {}, info() {}, warn() {}, error() {} };
      const q = new RequestQueue({ maxInFlightRequests: 1, requestTimeout: 1000, clientId: 't', broker: 'b', logger: quiet });
      const t0 = Date.now();
      const fired = new Promise((resolve) => { q.checkPendingRequests = () => resolve(Date.now() - t0); });
      q.scheduleCheckPendingRequests();
      const firedWithinMs = await fired;
      await new Promise((r) => setTimeout(r, 50));
      console.log(JSON.stringify({ patched: m.kafkaRequestQueuePatched, warnings, firedWithinMs }));`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      env: { ...process.env, ROLLOUT_STREAM_KAFKAJS_PATCHES: patches },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { patched: boolean; warnings: string[]; firedWithinMs: number };
  }

  test('is patched (fails when a kafkajs upgrade changes the method it replaces)', async () => {
    expect((await import('../../../streams/kafka/kafkajs/speedups.js')).kafkaRequestQueuePatched).toBe(true);
  });

  test('an idle queue arms its check without a warning and still runs it at once, as Node clamps it', async () => {
    const patched = await warningsOfIdleQueue('1');
    expect(patched.patched).toBe(true);
    expect(patched.warnings).not.toContain('TimeoutNegativeWarning');
    expect(patched.firedWithinMs).toBeLessThan(40);
    const unpatched = await warningsOfIdleQueue('0');
    expect(unpatched.patched).toBe(false);
    // Node 24 (what the launcher runs) warns for kafkajs's own negative delay; older Nodes clamp silently.
    if (Number(process.versions.node.split('.')[0]) >= 24) expect(unpatched.warnings).toContain('TimeoutNegativeWarning');
  });
});

describe('ROLLOUT_STREAM_KAFKAJS_PATCHES=0', () => {
  test('leaves kafkajs as published', async () => {
    const { spawnSync } = await import('node:child_process');
    const { fileURLToPath } = await import('node:url');
    const module = fileURLToPath(new URL('../../../streams/kafka/kafkajs/speedups.ts', import.meta.url));
    const script = `const m = await import(${JSON.stringify(module)});
      const { createRequire } = await import('node:module');
      const require = createRequire(${JSON.stringify(module)});
      const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js');
      const Encoder = require('kafkajs/src/protocol/encoder.js');
      const own = (fn) => fn.toString().includes('crc32C(batchBody.buffer)');
      console.log(JSON.stringify([m.kafkaPatchesEnabled, m.kafkaCrcImplementation, m.kafkaEncoderPatched, m.kafkaRecordBatchPatched,
        own(RecordBatch), Encoder.prototype.ensureAvailable.toString().includes('Buffer.alloc(')]));`;
    const run = (value: string) => {
      const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        env: { ...process.env, ROLLOUT_STREAM_KAFKAJS_PATCHES: value },
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout.trim()) as unknown[];
    };
    expect(run('0')).toEqual([false, 'kafkajs', false, false, true, true]);
    expect(run('1')).toEqual([true, 'native', true, true, false, false]);
  });
});

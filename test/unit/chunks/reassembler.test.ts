/**
 * The reassembly state machine (streams/chunks/reassembler.ts) on the shared
 * cases of docs/examples/chunks/cases.json, which python/tests/test_reassembler.py
 * runs too, and property tests: random values cut at random limits and
 * interleaved come out byte-equal, in first-chunk order, with exact `next`s.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { splitIntoChunks } from '../../../streams/chunks/chunk-format.js';
import { Reassembler, type Reassembled } from '../../../streams/chunks/reassembler.js';
import type { FetchedRecord } from '../../../streams/kafka/types.js';
import { namedSetId, patchHeader, patternValue, readChunkDoc, type HeaderPatch } from './chunk-fixtures.js';

interface Step {
  offset?: string;
  set?: string;
  index?: number;
  patch?: HeaderPatch;
  cut?: number;
  whole?: string;
  raw?: string;
  skip?: boolean;
  at_ms?: number;
  expire?: { now_ms: number; fetched_to: string; last_stable: string; high_watermark: string };
}
interface Case {
  name: string;
  start: string;
  trusted: boolean;
  log_start?: string;
  max_held_bytes?: number;
  chunk_wait_ms?: number;
  steps: Step[];
  asked?: number;
  restarted?: number;
  want: Record<string, unknown>[];
}
interface CaseFile {
  sets: Record<string, { size: number; payload: number; seed: number }>;
  cases: Case[];
}

const doc = readChunkDoc<CaseFile>('cases.json');
const values = new Map(Object.entries(doc.sets).map(([name, s]) => [name, patternValue(s.size, s.seed)]));
const chunksOf = new Map(Object.entries(doc.sets).map(([name, s]) => [name, splitIntoChunks(values.get(name)!, s.payload, namedSetId(name))]));
const setNames = new Map([...values.keys()].map((n) => [namedSetId(n).toString('hex'), n]));

const fetched = (offset: string, value: Buffer, timestamp: number): FetchedRecord => ({ topic: 't', partition: 0, offset, timestamp, key: Buffer.from('k'), value, headers: {} });

/** Runs a case; `eager` takes after every step, otherwise once at the end (the results must not differ). */
function run(c: Case, eager: boolean): { out: Reassembled[]; asked: number; restarted: number } {
  const r = new Reassembler({ start: c.start, trusted: c.trusted, maxHeldBytes: c.max_held_bytes ?? 1 << 20, chunkWaitMs: c.chunk_wait_ms ?? 60_000 });
  const out: Reassembled[] = [];
  let asked = 0;
  c.steps.forEach((s, i) => {
    if (s.expire) {
      r.expire(s.expire.now_ms, { fetchedTo: s.expire.fetched_to, lastStable: s.expire.last_stable, highWatermark: s.expire.high_watermark });
    } else {
      let value: Buffer;
      if (s.set !== undefined) {
        value = patchHeader(chunksOf.get(s.set)![s.index!]!, s.patch ?? {});
        value = value.subarray(0, value.length - (s.cut ?? 0));
      }
      else if (s.raw !== undefined) value = Buffer.from(s.raw, 'hex');
      else value = Buffer.from(s.whole!, 'utf8');
      const q = r.push(fetched(s.offset!, value, s.at_ms ?? 10 * i), s.at_ms ?? 10 * i, { skip: s.skip === true });
      if (q) {
        asked++;
        expect(c.log_start, `${c.name}: asked for the log start`).toBeDefined();
        r.answerLogStart(c.log_start!);
      }
    }
    if (eager) out.push(...r.take());
  });
  out.push(...r.take());
  return { out, asked, restarted: r.restarted };
}

/** The case file's words for a handed-out record. */
function describeOut(o: Reassembled): Record<string, unknown> {
  const base = { kind: o.kind, offset: o.offset, last_offset: o.lastOffset, next: o.next };
  switch (o.kind) {
    case 'record': {
      const name = o.chunks > 1 ? [...values].find(([, v]) => v.equals(o.value!))?.[0] : undefined;
      return { ...base, chunks: o.chunks, value: name ? `set:${name}` : o.value!.toString('utf8') };
    }
    case 'skipped':
      return { ...base, chunks: o.chunks };
    case 'incomplete':
      return { ...base, set: setNames.get(o.incomplete.setId) ?? o.incomplete.setId, have: o.incomplete.have, count: o.incomplete.count, detail: o.incomplete.detail };
    case 'undecodable':
      return base;
  }
}

describe('reassembler on the shared cases', () => {
  test('the case file has the cases the design asks for', () => {
    expect(doc.cases.length).toBeGreaterThanOrEqual(15);
  });

  test.each(doc.cases.map((c) => [c.name, c] as const))('%s', (_, c) => {
    for (const eager of [true, false]) {
      const { out, asked, restarted } = run(c, eager);
      expect(out.map(describeOut)).toEqual(c.want);
      expect(asked).toBe(c.asked ?? asked);
      expect(restarted).toBe(c.restarted ?? 0);
    }
  });

  test('a reassembled record carries chunk 0\'s key, headers and timestamp', () => {
    const r = new Reassembler({ start: '0', trusted: true, maxHeldBytes: 1 << 20, chunkWaitMs: 1000 });
    chunksOf.get('b')!.forEach((c, i) => r.push({ ...fetched(String(i), c, 100 + i), headers: { batch_id: Buffer.from(`b${i}`) } }, 0));
    const [out] = r.take();
    expect(out!.kind === 'record' && [out!.timestamp, out!.headers.batch_id!.toString()]).toEqual([100, 'b0']);
  });

  test('offsets must increase and a question must be answered', () => {
    const r = new Reassembler({ start: '5', trusted: true, maxHeldBytes: 1 << 20, chunkWaitMs: 1000 });
    expect(r.push(fetched('5', chunksOf.get('a')![1]!, 0), 0)).toEqual({ setId: namedSetId('a').toString('hex'), offset: '5' });
    expect(() => r.push(fetched('6', chunksOf.get('a')![2]!, 0), 0)).toThrow(/answer/);
    r.answerLogStart('0');
    expect(() => r.push(fetched('5', Buffer.from('{}'), 0), 0)).toThrow(/after/);
  });

  test('the sets it remembers to drop are bounded: the oldest forgotten makes its next chunk headless again', () => {
    const r = new Reassembler({ start: '0', trusted: false, maxHeldBytes: 1 << 20, chunkWaitMs: 1000 });
    const sets = Array.from({ length: 1025 }, (_, i) => splitIntoChunks(patternValue(129, 1), 64, namedSetId(`d${i}`)));
    sets.forEach((chunks, i) => r.push(fetched(String(i), chunks[1]!, 0), 0));
    r.push(fetched('2000', sets[1024]![2]!, 0), 0); // remembered: dropped
    r.push(fetched('2001', sets[0]![2]!, 0), 0); // forgotten: a fault again
    const out = r.take();
    expect(out).toHaveLength(1026);
    const last = out.at(-1)!;
    expect(last.kind === 'incomplete' && [last.offset, last.incomplete.setId]).toEqual(['2001', namedSetId('d0').toString('hex')]);
  });
});

describe('reassembler properties', () => {
  test('random values cut at random limits and interleaved come out byte-equal, in first-chunk order, with exact nexts', () => {
    const setArb = fc.record({ size: fc.integer({ min: 1, max: 3000 }), payload: fc.integer({ min: 1, max: 16 }).map((k) => 64 * k) });
    fc.assert(
      fc.property(fc.array(setArb, { minLength: 1, maxLength: 4 }), fc.array(fc.nat(), { minLength: 64, maxLength: 64 }), fc.nat(), (sets, picks, seed) => {
        const items = sets.map((s, k) => {
          const value = patternValue(Math.max(s.size, s.payload + 1), seed + k);
          return { value, chunks: splitIntoChunks(value, s.payload, namedSetId(`p${k}`)) };
        });
        // Interleave the sets' chunks at random, each set's in order.
        const cursors = items.map(() => 0);
        const stream: { k: number; chunk: Buffer }[] = [];
        for (let n = 0; stream.length < items.reduce((a, it) => a + it.chunks.length, 0); n++) {
          const left = items.map((_, k) => k).filter((k) => cursors[k]! < items[k]!.chunks.length);
          const k = left[picks[n % picks.length]! % left.length]!;
          stream.push({ k, chunk: items[k]!.chunks[cursors[k]!++]! });
        }
        const r = new Reassembler({ start: '0', trusted: true, maxHeldBytes: 1 << 30, chunkWaitMs: 1000 });
        const out: Reassembled[] = [];
        stream.forEach((s, o) => {
          r.push(fetched(String(o), s.chunk, 0), 0);
          out.push(...r.take());
        });
        const firsts = items.map((_, k) => stream.findIndex((s) => s.k === k));
        const lasts = items.map((_, k) => stream.reduce((last, s, o) => (s.k === k ? o : last), -1));
        const order = items.map((_, k) => k).sort((x, y) => firsts[x]! - firsts[y]!);
        expect(out.map((o) => o.offset)).toEqual(order.map((k) => String(firsts[k])));
        out.forEach((o, i) => {
          const k = order[i]!;
          expect(o.kind).toBe('record');
          expect(Buffer.compare(o.value!, items[k]!.value)).toBe(0);
          // next: the last chunk + 1, unless a set not handed on yet began before it.
          const later = order.slice(i + 1).map((j) => firsts[j]!);
          expect(o.next).toBe(String(Math.min(lasts[k]! + 1, ...later.filter((f) => f < lasts[k]! + 1))));
        });
        expect(r.openSets).toBe(0);
      }),
      { numRuns: 200 },
    );
  });
});

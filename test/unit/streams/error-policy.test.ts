/**
 * The error policy's bookkeeping (streams/runtime/error-policy.ts): the
 * retry schedule, failures counted per record across task rebuilds, the
 * verdict once a record reached `runtime.poison.attempts`, and the
 * `processing_error` dead letter it writes.
 */
import { describe, expect, test } from 'vitest';
import type { InputRecord } from '../../../streams/api/stage.js';
import { AttemptBook, describeError, processingErrorLetter, recordId, retryDelayMs } from '../../../streams/runtime/error-policy.js';

const record = (offset: string, key = 'g-7'): InputRecord => ({
  topic: 'p.rollout.group-complete',
  partition: 2,
  offset,
  key: Buffer.from(key),
  value: Buffer.from([0, 0, 0, 0, 9, 1, 2, 3]),
  timestamp: 0,
});

describe('retry schedule', () => {
  test('transient failures wait 1 s, doubling to at most 15 s', () => {
    expect([1, 2, 3, 4, 5, 6, 50].map((n) => retryDelayMs(n))).toEqual([1000, 2000, 4000, 8000, 15000, 15000, 15000]);
  });
});

describe('attempts per record', () => {
  test('dead-letter: a record is processed again until its third failure, with doubling backoff, then dead-lettered', () => {
    const book = new AttemptBook({ policy: 'dead-letter', attempts: 3, backoff_ms: 1000 });
    const id = recordId('postprocess', 'postprocess', record('41'), false);
    expect(book.verdict(id)).toBe('process');
    expect(book.fail(id, new Error('one'))).toEqual({ failures: 1, exhausted: false, backoffMs: 1000 });
    expect(book.verdict(id)).toBe('process');
    expect(book.fail(id, new Error('two'))).toEqual({ failures: 2, exhausted: false, backoffMs: 2000 });
    expect(book.fail(id, new Error('three'))).toEqual({ failures: 3, exhausted: true, backoffMs: 0 });
    expect(book.verdict(id)).toBe('dead-letter');
    expect((book.lastError(id) as Error).message).toBe('three');
    book.clear(id);
    expect([book.verdict(id), book.size]).toEqual(['process', 0]);
  });

  test('stop: the verdict at the limit is to stop', () => {
    const book = new AttemptBook({ policy: 'stop', attempts: 1, backoff_ms: 0 });
    const id = recordId('pack', 'pack', record('0'), false);
    expect(book.fail(id, new Error('x')).exhausted).toBe(true);
    expect(book.verdict(id)).toBe('stop');
  });

  test('records are told apart by stage, partition and offset, or by key for a record written in the same transaction', () => {
    const book = new AttemptBook({ policy: 'dead-letter', attempts: 2, backoff_ms: 10 });
    const own = recordId('accumulate', 'accumulate', record('5'), false);
    const handed = recordId('accumulate', 'postprocess', record('5'), true);
    // Re-written at another offset after the abort: still the same record for the count.
    expect(recordId('accumulate', 'postprocess', record('99'), true)).toBe(handed);
    expect(recordId('accumulate', 'accumulate', record('6'), false)).not.toBe(own);
    book.fail(own, new Error('a'));
    book.fail(handed, new Error('b'));
    expect([book.failures(own), book.failures(handed)]).toEqual([1, 1]);
    book.clearPartition('accumulate', 3);
    expect(book.size).toBe(2);
    book.clearPartition('accumulate', 2);
    expect(book.size).toBe(0);
  });
});

describe('the processing_error dead letter', () => {
  test('carries the input record with its bytes, the error code, message and first stack frame', () => {
    const r = record('41');
    const err = new TypeError("Cannot read properties of undefined (reading 'rows')");
    const d = processingErrorLetter('postprocess', r, err, 3, 1234);
    expect(d).toMatchObject({ reason: 'processing_error', stage: 'postprocess', group_id: 'g-7', produced_at: 1234 });
    expect(d.records).toEqual([{ topic: r.topic, partition: 2, offset: '41', key: r.key, value: r.value }]);
    expect(d.message).toMatch(/^postprocess failed 3 time\(s\) on p\.rollout\.group-complete partition 2 offset 41: TypeError: Cannot read properties of undefined \(reading 'rows'\) \(at .*error-policy\.test\.ts:\d+:\d+\)$/);
    expect(describeError('plain')).toBe('plain');
  });
});

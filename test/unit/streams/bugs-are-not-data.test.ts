/**
 * "Bugs are not data" (issue 25 item 3.1): an exception of our own code that
 * is no verdict on the record (a TypeError, a RangeError, any Error without
 * one of our codes) stops the partition and turns /healthz 503 under the
 * default `runtime.poison.policy`, instead of dead-lettering one record after
 * another while health says 200; `policy: dead-letter` still chooses dead
 * letters. A verdict (one of our coded poison errors, e.g. a PackError or a
 * dead-letter reason) is a dead letter at once under either policy, with no
 * retries: it would say the same every time.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { configSchema, type Config } from '../../../config/schema.js';
import { RolloutStreamError } from '../../../errors/index.js';
import { generateEvents } from '../../../loadgen/index.js';
import { PackError } from '../../../processors/pack-error.js';
import type { InputRecord } from '../../../streams/api/stage.js';
import type { RecordTypes } from '../../../streams/codecs/codec.js';
import { classify, isVerdict, ProcessingFailure, processingErrorLetter } from '../../../streams/runtime/error-policy.js';
import { RecordPolicy } from '../../../streams/runtime/record-policy.js';
import { TopologyTestDriver } from '../../../streams/testing/topology-driver.js';
import { asRecords } from './driver-fixtures.js';

const quiet = { info() {}, warn() {}, error() {} };

const record = (offset: string): InputRecord => ({
  topic: 'p.rollout.group-complete',
  partition: 1,
  offset,
  key: Buffer.from('g-3'),
  value: Buffer.from([0, 0, 0, 0, 9, 1]),
  timestamp: 0,
});

describe('verdicts and bugs', () => {
  test('a coded poison error is a verdict; TypeError, RangeError, ReferenceError, a plain Error, processing_error and a thrown string are bugs', () => {
    expect(isVerdict(new PackError('pack_bad_media', 'mixed dtypes'))).toBe(true);
    expect(isVerdict(new RolloutStreamError('nan_logprobs', 'row 2 has NaN logprobs'))).toBe(true);
    expect(isVerdict(new RolloutStreamError('publish_invalid', 'no group id'))).toBe(true);
    for (const bug of [new TypeError('x is undefined'), new RangeError('offset out of range'), new ReferenceError('y is not defined'), new Error('plain')]) {
      expect(isVerdict(bug), bug.name).toBe(false);
    }
    // processing_error names an exception that was no decision; a transient code is no verdict on the record either.
    expect(isVerdict(new RolloutStreamError('processing_error', 'wrapped bug'))).toBe(false);
    expect(isVerdict(new RolloutStreamError('registry_unavailable', 'down'))).toBe(false);
    expect(isVerdict('a string')).toBe(false);
    expect(classify(new ProcessingFailure('pack', [], new TypeError('x')))).toEqual({ kind: 'poison', code: 'processing_error' });
  });

  test('the default policy stops a partition on a bug once its attempts are used up', () => {
    const config = configSchema.parse({ runtime: { poison: { attempts: 2, backoff_ms: 0 } } });
    expect(config.runtime.poison.policy).toBe('stop');
    const policy = new RecordPolicy(config.runtime.poison, 'postprocess', 'postprocess', quiet);
    const f = new ProcessingFailure('postprocess', [record('7')], new TypeError("Cannot read properties of undefined (reading 'rows')"));
    expect(policy.failed(1, f, 7n)).toEqual({ action: 'retry', waitMs: 0 });
    expect(policy.failed(1, f, 7n)).toMatchObject({ action: 'stop', reason: expect.stringContaining('TypeError') });
  });

  test.each(['stop', 'dead-letter'] as const)('policy %s: a verdict is dead-lettered at the first failure, with its own reason when it is a dead-letter reason', async (name) => {
    const policy = new RecordPolicy({ policy: name, attempts: 3, backoff_ms: 1000 }, 'postprocess', 'postprocess', quiet);
    const r = record('9');
    const verdict = new RolloutStreamError('nan_logprobs', 'row 2 has NaN logprobs');
    expect(policy.failed(1, new ProcessingFailure('postprocess', [r], verdict), 9n)).toEqual({ action: 'retry', waitMs: 0 });
    const processor = {
      process: async () => {
        throw new Error('processed again');
      },
    };
    const stage = { name: 'postprocess' as const, inputTopic: r.topic, outputTopics: [], createProcessor: () => processor };
    const ctx = policy.context(1);
    const out = await policy.runNode(stage, processor, [r], false, ctx);
    expect(out.deadLetters).toHaveLength(1);
    expect(out.deadLetters[0]).toMatchObject({ reason: 'nan_logprobs', stage: 'postprocess', group_id: 'g-3' });
    expect(processingErrorLetter('pack', r, new PackError('pack_bad_media', 'mixed'), 1, 0).reason).toBe('processing_error');
  });
});

let driver: TopologyTestDriver | null = null;
afterEach(async () => {
  await driver?.close();
  driver = null;
});

function records(seed: number): Array<RecordTypes['rowCompleted']> {
  return asRecords([...generateEvents({ batches: 1, groupsPerBatch: 4, generations: 4, seed, profile: 'small', runId: `b${seed}` })]);
}

async function runWithBug(c: Config, seed: number) {
  const rs = records(seed);
  const bad = rs.find((r) => r.kind === 'row')!;
  const groupId = bad.kind === 'row' ? bad.row.group_id : '';
  driver = await TopologyTestDriver.create({ partitions: 2, config: c });
  // The fault throws a plain Error, as a programming error would.
  const a = await driver.startInstance('a', { fused: false, faults: [{ point: 'throw-on-group', stage: 'postprocess', groupId }] });
  driver.produce('rowCompleted', rs);
  return { d: driver, a, groupId };
}

describe('a processor that throws a bug on one record', () => {
  test('by default stops its partition and /healthz answers 503 stopped_by_policy; nothing is dead-lettered', async () => {
    const { d, a, groupId } = await runWithBug(configSchema.parse({ accumulate: { batch_end_grace_ms: 0 }, runtime: { poison: { attempts: 2, backoff_ms: 0 } } }), 61);
    await d.waitFor(() => d.health(a).status === 503, 'a 503 from /healthz', 5_000);
    const body = d.health(a).body as { unhealthy: Array<{ runner: string; state: string; reason: string }> };
    expect(body.unhealthy).toEqual([expect.objectContaining({ runner: 'postprocess', state: 'stopped_by_policy', reason: expect.stringContaining(groupId) })]);
    expect(body.unhealthy[0]!.reason).toContain('Error: injected fault postprocess.throw-on-group');
    // The other partition goes on; the record itself is neither dead-lettered nor packed.
    const otherGroups = records(61).flatMap((r) => (r.kind === 'row' && r.row.group_id !== groupId ? [r.row.group_id] : []));
    await d.waitFor(() => d.committedRecords('packed').some((p) => otherGroups.includes(p.key!.toString())), 'another group packed');
    expect(d.committedRecords('deadLetter')).toEqual([]);
    expect(d.committedRecords('packed').map((r) => r.key!.toString())).not.toContain(groupId);
    expect(d.health(a).status).toBe(503);
  });

  test('with runtime.poison.policy dead-letter is a processing_error dead letter after its attempts, and health stays 200', async () => {
    const c = configSchema.parse({ accumulate: { batch_end_grace_ms: 0 }, runtime: { poison: { policy: 'dead-letter', attempts: 2, backoff_ms: 0 } } });
    const { d, a, groupId } = await runWithBug(c, 62);
    await d.runUntilIdle();
    const letters = await d.committedValues('deadLetter');
    expect(letters.map((l) => [l.reason, l.group_id])).toEqual([['processing_error', groupId]]);
    expect(letters[0]!.message).toMatch(/^postprocess failed 2 time\(s\) on .*: Error: injected fault/);
    expect(d.health(a).status).toBe(200);
  });
});

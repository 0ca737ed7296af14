/**
 * The stable error codes and their kinds (errors/codes.ts), and how kafkajs
 * errors map onto them (streams/kafka/kafkajs/errors.ts): authorization is
 * fatal, never "fenced"; a fenced producer is task_migrated; the cluster
 * being briefly away is transient.
 */
import { createRequire } from 'node:module';
import { KafkaJSConnectionError, KafkaJSNonRetriableError, KafkaJSNumberOfRetriesExceeded, KafkaJSSASLAuthenticationError } from 'kafkajs';
import { describe, expect, expectTypeOf, test } from 'vitest';
import { ConfigError, DEAD_LETTER_REASONS, ERROR_CODES, RolloutStreamError, kindOfCode, type DeadLetterCode, type ErrorKind } from '../../../errors/index.js';
import type { DeadLetterReason } from '../../../processors/types.js';
import { PackError } from '../../../processors/pack-error.js';
import { RegistryError } from '../../../streams/codecs/schema-registry.js';
import { UndecodableError } from '../../../streams/codecs/wire-format.js';
import { isTransientKafkaError, kafkaErrorCode } from '../../../streams/kafka/kafkajs/errors.js';
import { platformaticErrorCode } from '../../../streams/kafka/platformatic/errors.js';
import { classify, ProcessingFailure } from '../../../streams/runtime/error-policy.js';

// kafkajs's typings leave out the constructors' options (cause, retry counts).
type Ctor = new (e: unknown, o?: unknown) => Error;
const NonRetriable = KafkaJSNonRetriableError as unknown as Ctor;
const SaslFailed = KafkaJSSASLAuthenticationError as unknown as Ctor;
const RetriesExceeded = KafkaJSNumberOfRetriesExceeded as unknown as Ctor;

// The broker's answers exactly as kafkajs builds them from a protocol error code.
const { createErrorFromCode } = createRequire(import.meta.url)('kafkajs/src/protocol/error.js') as { createErrorFromCode: (code: number) => Error };
const protocolError = (code: number) => createErrorFromCode(code);
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53;
const TOPIC_AUTHORIZATION_FAILED = 29;
const GROUP_AUTHORIZATION_FAILED = 30;
const INVALID_PRODUCER_EPOCH = 47;
const INVALID_PRODUCER_ID_MAPPING = 49;
const PRODUCER_FENCED = 90; // unknown to kafkajs 2.2.4: "Unknown error code 90"
const REBALANCE_IN_PROGRESS = 27;
const COORDINATOR_LOAD_IN_PROGRESS = 14;
const NOT_LEADER_FOR_PARTITION = 6;
const UNKNOWN_TOPIC_OR_PARTITION = 3;
const CONCURRENT_TRANSACTIONS = 51;
const REQUEST_TIMED_OUT = 7;

describe('error codes', () => {
  test('every code has one of the four kinds, and every kind has codes', () => {
    const kinds = new Set<ErrorKind>(['transient', 'task_migrated', 'fatal', 'poison']);
    for (const [code, kind] of Object.entries(ERROR_CODES)) expect(kinds.has(kind), code).toBe(true);
    expect(new Set(Object.values(ERROR_CODES))).toEqual(kinds);
    expect(kindOfCode('not_a_code')).toBeUndefined();
  });

  test('the design lists each of its codes under the right kind', () => {
    const want: Record<ErrorKind, string[]> = {
      transient: ['broker_unavailable', 'request_timeout', 'coordinator_loading', 'not_leader', 'concurrent_transactions', 'registry_unavailable'],
      task_migrated: ['producer_fenced', 'partition_revoked', 'transaction_outcome_unknown'],
      fatal: ['config_invalid', 'mode_conflict', 'unknown_topic', 'unequal_partitions', 'authorization_failed', 'restore_failed', 'transaction_state'],
      poison: ['undecodable', 'record_too_large', 'processing_error', 'pack_empty_group', 'pack_misaligned_logprobs', 'pack_bad_routed_experts', 'pack_bad_media'],
    };
    for (const [kind, codes] of Object.entries(want)) for (const c of codes) expect(kindOfCode(c), c).toBe(kind);
  });

  test('the dead-letter reasons are poison codes, and DeadLetterReason is exactly them', () => {
    for (const r of DEAD_LETTER_REASONS) expect(ERROR_CODES[r], r).toBe('poison');
    expectTypeOf<DeadLetterReason>().toEqualTypeOf<DeadLetterCode>();
    expect(new Set(DEAD_LETTER_REASONS).size).toBe(DEAD_LETTER_REASONS.length);
  });

  test('our errors carry their code and kind; messages are unchanged', () => {
    const c = new ConfigError('runtime.poison.policy', 'must be dead-letter or stop');
    expect([c.code, c.kind, c.message]).toEqual(['config_invalid', 'fatal', 'runtime.poison.policy: must be dead-letter or stop']);
    expect(new PackError('pack_bad_media', 'x').kind).toBe('poison');
    expect(new UndecodableError('bad magic byte').kind).toBe('poison');
    // A registry error says whether it is worth retrying: then it is transient whatever its code.
    expect(new RegistryError('timed out', { retriable: true }).kind).toBe('transient');
    expect(new RegistryError('schema 7 not found').kind).toBe('fatal');
    expect(new RolloutStreamError('broker_unavailable', 'x').retriable).toBe(true);
  });
});

describe('kafkajs errors → codes', () => {
  test.each([
    [TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 'authorization_failed'],
    [TOPIC_AUTHORIZATION_FAILED, 'authorization_failed'],
    [GROUP_AUTHORIZATION_FAILED, 'authorization_failed'],
    [INVALID_PRODUCER_EPOCH, 'producer_fenced'],
    [INVALID_PRODUCER_ID_MAPPING, 'producer_fenced'],
    [PRODUCER_FENCED, 'producer_fenced'],
    [REBALANCE_IN_PROGRESS, 'partition_revoked'],
    [COORDINATOR_LOAD_IN_PROGRESS, 'coordinator_loading'],
    [NOT_LEADER_FOR_PARTITION, 'not_leader'],
    [UNKNOWN_TOPIC_OR_PARTITION, 'partition_unavailable'],
    [CONCURRENT_TRANSACTIONS, 'concurrent_transactions'],
    [REQUEST_TIMED_OUT, 'request_timeout'],
  ])('protocol error %i is %s', (code, want) => {
    expect(kafkaErrorCode(protocolError(code))).toBe(want);
  });

  test('a transactional-id authorization failure is fatal, not fenced, even wrapped', () => {
    const wrapped = new NonRetriable(protocolError(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), { cause: protocolError(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) });
    expect(classify(wrapped)).toEqual({ kind: 'fatal', code: 'authorization_failed' });
    expect(classify(new SaslFailed('SASL PLAIN authentication failed'))).toEqual({ kind: 'fatal', code: 'authorization_failed' });
    expect(isTransientKafkaError(protocolError(TRANSACTIONAL_ID_AUTHORIZATION_FAILED))).toBe(false);
  });

  test('a fenced producer is task_migrated, also behind kafkajs wrappers', () => {
    expect(classify(protocolError(INVALID_PRODUCER_EPOCH))).toEqual({ kind: 'task_migrated', code: 'producer_fenced' });
    const retried = new RetriesExceeded(protocolError(PRODUCER_FENCED), { retryCount: 5, retryTime: 100 });
    expect(classify(retried)).toEqual({ kind: 'task_migrated', code: 'producer_fenced' });
  });

  test('a batch the broker refuses as too large is record_limit_changed (task_migrated: limits read again, abort, rebuild), also wrapped', () => {
    // MESSAGE_TOO_LARGE is protocol error 10, RECORD_LIST_TOO_LARGE 18.
    expect(classify(protocolError(10))).toEqual({ kind: 'task_migrated', code: 'record_limit_changed' });
    expect(classify(new RetriesExceeded(protocolError(18), { retryCount: 1, retryTime: 10 }))).toEqual({ kind: 'task_migrated', code: 'record_limit_changed' });
    expect(platformaticErrorCode({ code: 'PLT_KFK_PROTOCOL', apiId: 'MESSAGE_TOO_LARGE' })).toBe('record_limit_changed');
  });

  test('a broker that went away is transient', () => {
    const e = new KafkaJSConnectionError('Connection error: connect ECONNREFUSED 127.0.0.1:9092');
    expect(classify(e)).toEqual({ kind: 'transient', code: 'broker_unavailable' });
    expect(isTransientKafkaError(e)).toBe(true);
  });

  test('something that is no Kafka error has no Kafka code', () => {
    expect(kafkaErrorCode(new TypeError('x is undefined'))).toBeNull();
  });
});

describe('classify', () => {
  test('a processor exception that is no coded error is poison: processing_error', () => {
    expect(classify(new ProcessingFailure('postprocess', [], new TypeError('x is undefined')))).toEqual({ kind: 'poison', code: 'processing_error' });
    // A coded poison error escaping a processor (a PackError nobody caught) goes through the same policy.
    expect(classify(new ProcessingFailure('pack', [], new PackError('pack_bad_media', 'x')))).toEqual({ kind: 'poison', code: 'processing_error' });
  });

  test('a processor that hit a transient or fatal condition is retried or stops, not counted against the record', () => {
    expect(classify(new ProcessingFailure('accumulate', [], new RegistryError('registry unreachable', { retriable: true })))).toEqual({ kind: 'transient', code: 'registry_error' });
    expect(classify(new ProcessingFailure('postprocess', [], new ConfigError('postprocess.x', 'bad')))).toEqual({ kind: 'fatal', code: 'config_invalid' });
  });

  test('a failed transaction nobody coded is rebuilt like a migrated task', () => {
    expect(classify(new Error('the broker returned no offset for t partition 0'))).toEqual({ kind: 'task_migrated', code: 'transaction_outcome_unknown' });
  });
});

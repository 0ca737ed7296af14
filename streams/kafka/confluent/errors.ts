/**
 * @confluentinc/kafka-javascript errors → our stable codes (errors/codes.ts).
 * The client's errors (node-rdkafka's LibrdKafkaError, the KafkaJS API's
 * KafkaJSError) carry librdkafka's numeric `code` (negative: local to
 * librdkafka, e.g. -144 `_FENCED`; positive: the broker's error code) and
 * flags `isFatal`/`isRetriable`/`isTxnRequiresAbort`; a KafkaJSError keeps
 * the first as `cause`. This module is the only place that knows those
 * numbers; the runtime sees codes.
 */
import { createRequire } from 'node:module';
import type { ErrorCode } from '../../../errors/codes.js';
import { kindOfCode, registerErrorMapper, RolloutStreamError } from '../../../errors/index.js';

interface ConfluentLike {
  code?: unknown;
  message?: string;
  isRetriable?: boolean;
  retriable?: boolean;
  origin?: string;
  cause?: unknown;
  errors?: unknown[];
}

/** librdkafka's error names by code, without the `ERR_` prefix (`_FENCED`, `PRODUCER_FENCED`). */
const NAMES: Map<number, string> = (() => {
  const codes = (createRequire(import.meta.url)('@confluentinc/kafka-javascript') as { CODES: { ERRORS: Record<string, number> } }).CODES.ERRORS;
  const out = new Map<number, string>();
  // Aliases (NOT_COORDINATOR_FOR_GROUP = NOT_COORDINATOR): the first name wins.
  for (const [name, code] of Object.entries(codes)) if (!out.has(code)) out.set(code, name.replace(/^ERR_/, ''));
  return out;
})();

/** The error, its causes and aggregated errors, outermost first (bounded). */
function links(e: unknown): ConfluentLike[] {
  const out: ConfluentLike[] = [];
  const todo: unknown[] = [e];
  while (todo.length > 0 && out.length < 32) {
    const c = todo.shift() as ConfluentLike | undefined;
    if (!c || typeof c !== 'object' || out.includes(c)) continue;
    out.push(c);
    if (c.cause) todo.push(c.cause);
    if (Array.isArray(c.errors)) todo.push(...c.errors);
  }
  return out;
}

function nameOf(c: ConfluentLike): string | undefined {
  return typeof c.code === 'number' ? NAMES.get(c.code) : undefined;
}

const FENCED = new Set(['_FENCED', 'PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH', 'INVALID_PRODUCER_ID_MAPPING', 'TRANSACTION_COORDINATOR_FENCED', 'FENCED_INSTANCE_ID']);
const AUTHORIZATION = new Set([
  'TOPIC_AUTHORIZATION_FAILED',
  'GROUP_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
  'DELEGATION_TOKEN_AUTHORIZATION_FAILED',
  'SASL_AUTHENTICATION_FAILED',
  'UNSUPPORTED_SASL_MECHANISM',
  'ILLEGAL_SASL_STATE',
  '_AUTHENTICATION',
]);
const REVOKED = new Set(['REBALANCE_IN_PROGRESS', 'UNKNOWN_MEMBER_ID', 'ILLEGAL_GENERATION', '_ASSIGNMENT_LOST']);
const TRANSIENT: Record<string, ErrorCode> = {
  UNKNOWN_TOPIC_OR_PART: 'partition_unavailable',
  _UNKNOWN_PARTITION: 'partition_unavailable',
  LEADER_NOT_AVAILABLE: 'not_leader',
  NOT_LEADER_FOR_PARTITION: 'not_leader',
  FENCED_LEADER_EPOCH: 'not_leader',
  UNKNOWN_LEADER_EPOCH: 'not_leader',
  PREFERRED_LEADER_NOT_AVAILABLE: 'not_leader',
  NOT_CONTROLLER: 'not_leader',
  REQUEST_TIMED_OUT: 'request_timeout',
  _TIMED_OUT: 'request_timeout',
  _TIMED_OUT_QUEUE: 'request_timeout',
  _MSG_TIMED_OUT: 'request_timeout',
  NETWORK_EXCEPTION: 'broker_unavailable',
  BROKER_NOT_AVAILABLE: 'broker_unavailable',
  _TRANSPORT: 'broker_unavailable',
  _ALL_BROKERS_DOWN: 'broker_unavailable',
  _RESOLVE: 'broker_unavailable',
  COORDINATOR_LOAD_IN_PROGRESS: 'coordinator_loading',
  COORDINATOR_NOT_AVAILABLE: 'coordinator_loading',
  NOT_COORDINATOR: 'coordinator_loading',
  _WAIT_COORD: 'coordinator_loading',
  CONCURRENT_TRANSACTIONS: 'concurrent_transactions',
};

/**
 * The code of a @confluentinc/kafka-javascript error, looking through
 * causes: authorization first (fatal wherever it is), then the group
 * protocol conflict, fencing, revocation (task_migrated), then the transient
 * ones, then any error librdkafka calls retriable. Null when nothing in it
 * is recognisably a librdkafka error.
 */
export function confluentErrorCode(e: unknown): ErrorCode | null {
  const all = links(e);
  const names = all.map(nameOf);
  if (names.some((n) => n !== undefined && AUTHORIZATION.has(n))) return 'authorization_failed';
  // The group's members announce protocols this member shares none of: the other mode (streams/runtime/mode-guard.ts).
  if (names.includes('INCONSISTENT_GROUP_PROTOCOL')) return 'mode_conflict';
  if (names.some((n) => n !== undefined && FENCED.has(n))) return 'producer_fenced';
  if (names.some((n) => n !== undefined && REVOKED.has(n))) return 'partition_revoked';
  for (const n of names) if (n !== undefined && TRANSIENT[n]) return TRANSIENT[n]!;
  if (all.some((c) => (c.isRetriable === true || c.retriable === true) && nameOf(c) !== undefined)) return 'broker_unavailable';
  return null;
}

/**
 * A coded error for a client failure (the original as `cause`). A commit or
 * abort that failed for an unrecognised reason has an unknown outcome
 * (`endTxn`); any other unrecognised error is passed on as it is.
 */
export function coded(e: unknown, doing: string, endTxn = false): unknown {
  if (e instanceof RolloutStreamError) return e;
  const code = confluentErrorCode(e) ?? (endTxn ? 'transaction_outcome_unknown' : null);
  if (code === null) return e;
  return new RolloutStreamError(code, `${doing}: ${(e as Error)?.message ?? String(e)}`, { cause: e, retriable: kindOfCode(code) !== 'fatal' });
}

/** Runs `fn`, turning its failure into a coded error. */
export async function codedCall<T>(doing: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw coded(e, doing);
  }
}

/** A node-style callback call as a promise. */
export function callback<T = void>(fn: (cb: (err: unknown, value?: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value as T))));
}

registerErrorMapper(confluentErrorCode);

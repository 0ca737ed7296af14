/**
 * @platformatic/kafka errors → our stable codes (errors/codes.ts). The
 * client's errors carry a `code` (`PLT_KFK_NETWORK`, `PLT_KFK_PROTOCOL`, ...),
 * protocol errors an `apiId` (`PRODUCER_FENCED`, `CONCURRENT_TRANSACTIONS`),
 * and wrap each other as `cause` or, for a response with several errors or
 * retries that ran out, as `errors` (an AggregateError). This module is the
 * only place that knows those names; the runtime sees codes.
 */
import type { ErrorCode } from '../../../errors/codes.js';
import { kindOfCode, registerErrorMapper, RolloutStreamError } from '../../../errors/index.js';

interface PlatformaticLike {
  code?: string;
  apiId?: string;
  message?: string;
  canRetry?: boolean;
  cause?: unknown;
  errors?: unknown[];
}

/** The error, its causes and aggregated errors, outermost first (bounded). */
function links(e: unknown): PlatformaticLike[] {
  const out: PlatformaticLike[] = [];
  const todo: unknown[] = [e];
  while (todo.length > 0 && out.length < 32) {
    const c = todo.shift() as PlatformaticLike | undefined;
    if (!c || typeof c !== 'object' || out.includes(c)) continue;
    out.push(c);
    if (c.cause) todo.push(c.cause);
    if (Array.isArray(c.errors)) todo.push(...c.errors);
  }
  return out;
}

const FENCED = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH', 'INVALID_PRODUCER_ID_MAPPING', 'TRANSACTION_COORDINATOR_FENCED', 'FENCED_INSTANCE_ID']);
const AUTHORIZATION = new Set([
  'TOPIC_AUTHORIZATION_FAILED',
  'GROUP_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
  'DELEGATION_TOKEN_AUTHORIZATION_FAILED',
  'SASL_AUTHENTICATION_FAILED',
  'UNSUPPORTED_SASL_MECHANISM',
  'ILLEGAL_SASL_STATE',
]);
const REVOKED = new Set(['REBALANCE_IN_PROGRESS', 'UNKNOWN_MEMBER_ID', 'ILLEGAL_GENERATION']);
const TRANSIENT: Record<string, ErrorCode> = {
  UNKNOWN_TOPIC_OR_PARTITION: 'partition_unavailable',
  LEADER_NOT_AVAILABLE: 'not_leader',
  NOT_LEADER_OR_FOLLOWER: 'not_leader',
  FENCED_LEADER_EPOCH: 'not_leader',
  UNKNOWN_LEADER_EPOCH: 'not_leader',
  PREFERRED_LEADER_NOT_AVAILABLE: 'not_leader',
  NOT_CONTROLLER: 'not_leader',
  REQUEST_TIMED_OUT: 'request_timeout',
  NETWORK_EXCEPTION: 'broker_unavailable',
  BROKER_NOT_AVAILABLE: 'broker_unavailable',
  COORDINATOR_LOAD_IN_PROGRESS: 'coordinator_loading',
  COORDINATOR_NOT_AVAILABLE: 'coordinator_loading',
  NOT_COORDINATOR: 'coordinator_loading',
  CONCURRENT_TRANSACTIONS: 'concurrent_transactions',
};
const TRANSIENT_CODES: Record<string, ErrorCode> = {
  PLT_KFK_NETWORK: 'broker_unavailable',
  PLT_KFK_TIMEOUT: 'request_timeout',
};

/**
 * The code of a @platformatic/kafka error, looking through causes and
 * aggregated errors: authorization first (fatal wherever it is), then
 * fencing, then revocation (task_migrated), then the transient ones. Null
 * when nothing in it is recognisably a Kafka error.
 */
export function platformaticErrorCode(e: unknown): ErrorCode | null {
  const all = links(e);
  if (all.some((c) => c.code === 'PLT_KFK_AUTHENTICATION' || (c.apiId !== undefined && AUTHORIZATION.has(c.apiId)))) return 'authorization_failed';
  // The group's members announce protocols this member shares none of: the other mode (streams/runtime/mode-guard.ts).
  if (all.some((c) => c.apiId === 'INCONSISTENT_GROUP_PROTOCOL')) return 'mode_conflict';
  // A batch over the topic's max.message.bytes: the limit was lowered under the writer (streams/chunks/record-limits.ts).
  if (all.some((c) => c.apiId === 'MESSAGE_TOO_LARGE' || c.apiId === 'RECORD_LIST_TOO_LARGE')) return 'record_limit_changed';
  if (all.some((c) => c.apiId !== undefined && FENCED.has(c.apiId))) return 'producer_fenced';
  if (all.some((c) => c.apiId !== undefined && REVOKED.has(c.apiId))) return 'partition_revoked';
  for (const c of all) if (c.apiId !== undefined && TRANSIENT[c.apiId]) return TRANSIENT[c.apiId]!;
  for (const c of all) if (c.code !== undefined && TRANSIENT_CODES[c.code]) return TRANSIENT_CODES[c.code]!;
  if (all.some((c) => c.canRetry === true && c.code?.startsWith('PLT_KFK_'))) return 'broker_unavailable';
  return null;
}

/**
 * A coded error for a client failure (the original as `cause`). A commit or
 * abort that failed for an unrecognised reason has an unknown outcome
 * (`endTxn`); any other unrecognised error is passed on as it is.
 */
export function coded(e: unknown, doing: string, endTxn = false): unknown {
  if (e instanceof RolloutStreamError) return e;
  const code = platformaticErrorCode(e) ?? (endTxn ? 'transaction_outcome_unknown' : null);
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

registerErrorMapper(platformaticErrorCode);

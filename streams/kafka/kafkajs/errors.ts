/**
 * kafkajs errors → our stable codes (errors/codes.ts). kafkajs tells errors
 * apart by class name (`KafkaJSConnectionError`, ...) and, for broker
 * answers, by the protocol error's `type` (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`);
 * it wraps them (`KafkaJSNonRetriableError`, `KafkaJSNumberOfRetriesExceeded`)
 * with the original as `cause`. This module is the only place that knows
 * those names; the runtime sees codes.
 */
import type { ErrorCode } from '../../../errors/codes.js';
import { registerErrorMapper } from '../../../errors/index.js';

interface KafkaJsLike {
  name?: string;
  type?: string;
  message?: string;
  retriable?: boolean;
  cause?: unknown;
}

/** The error and its causes, outermost first (bounded: causes can be cyclic in theory). */
function chain(e: unknown): KafkaJsLike[] {
  const out: KafkaJsLike[] = [];
  for (let c = e as KafkaJsLike | undefined, depth = 0; c && typeof c === 'object' && depth < 8; c = c.cause as KafkaJsLike | undefined, depth++) out.push(c);
  return out;
}

/**
 * "Someone else owns this transactional id now". kafkajs 2.2.4 has no entry
 * for PRODUCER_FENCED (protocol error 90): it arrives as "Unknown error code 90".
 */
const FENCED_TYPES = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH', 'INVALID_PRODUCER_ID_MAPPING', 'TRANSACTION_COORDINATOR_FENCED', 'FENCED_INSTANCE_ID']);
const FENCED_TEXT = /PRODUCER_FENCED|INVALID_PRODUCER_EPOCH|INVALID_PRODUCER_ID_MAPPING|Unknown error code 90\b/;

/** A missing ACL or bad credentials: retrying (or "rebuilding the task") cannot help. */
const AUTHORIZATION_TYPES = new Set([
  'TOPIC_AUTHORIZATION_FAILED',
  'GROUP_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
  'DELEGATION_TOKEN_AUTHORIZATION_FAILED',
  'SASL_AUTHENTICATION_FAILED',
  'UNSUPPORTED_SASL_MECHANISM',
  'ILLEGAL_SASL_STATE',
]);
const AUTHORIZATION_NAMES = new Set(['KafkaJSSASLAuthenticationError']);
/** The same, for a wrapper that kept only the broker's message. */
const AUTHORIZATION_TEXT = /Not authorized to access|authorization failed|Authentication failed/i;

/**
 * The group's members announce assignment protocols this member shares none
 * of: a fused runner and a separate one met in a group (mode-guard.ts).
 */
const MODE_CONFLICT_TYPES = new Set(['INCONSISTENT_GROUP_PROTOCOL']);

/**
 * The broker refused a batch as larger than the topic's `max.message.bytes`
 * (or the request as too large): the limit a writer read was lowered under
 * it (streams/chunks/record-limits.ts reads it again).
 */
const TOO_LARGE_TYPES = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE']);

/** The group moved on without this member: its partitions are someone else's until it rejoins. */
const REVOKED_TYPES = new Set(['REBALANCE_IN_PROGRESS', 'UNKNOWN_MEMBER_ID', 'ILLEGAL_GENERATION']);

const TRANSIENT_TYPES: Record<string, ErrorCode> = {
  UNKNOWN_TOPIC_OR_PARTITION: 'partition_unavailable',
  LEADER_NOT_AVAILABLE: 'not_leader',
  NOT_LEADER_FOR_PARTITION: 'not_leader',
  FENCED_LEADER_EPOCH: 'not_leader',
  UNKNOWN_LEADER_EPOCH: 'not_leader',
  PREFERRED_LEADER_NOT_AVAILABLE: 'not_leader',
  NOT_CONTROLLER: 'not_leader',
  REQUEST_TIMED_OUT: 'request_timeout',
  NETWORK_EXCEPTION: 'broker_unavailable',
  COORDINATOR_LOAD_IN_PROGRESS: 'coordinator_loading',
  GROUP_LOAD_IN_PROGRESS: 'coordinator_loading',
  GROUP_COORDINATOR_NOT_AVAILABLE: 'coordinator_loading',
  COORDINATOR_NOT_AVAILABLE: 'coordinator_loading',
  NOT_COORDINATOR_FOR_GROUP: 'coordinator_loading',
  NOT_COORDINATOR: 'coordinator_loading',
  CONCURRENT_TRANSACTIONS: 'concurrent_transactions',
};

const TRANSIENT_NAMES: Record<string, ErrorCode> = {
  KafkaJSConnectionError: 'broker_unavailable',
  KafkaJSConnectionClosedError: 'broker_unavailable',
  KafkaJSNoBrokerAvailableError: 'broker_unavailable',
  KafkaJSBrokerNotFound: 'broker_unavailable',
  KafkaJSRequestTimeoutError: 'request_timeout',
  KafkaJSNumberOfRetriesExceeded: 'request_timeout',
};

/**
 * The code of a kafkajs error, looking through its causes: authorization
 * first (fatal, wherever in the chain), then fencing and revocation
 * (task_migrated), then the transient ones. Null when nothing in the chain
 * is recognisably a Kafka error.
 */
export function kafkaErrorCode(e: unknown): ErrorCode | null {
  const links = chain(e);
  const text = (c: KafkaJsLike) => `${c.name ?? ''} ${c.type ?? ''} ${c.message ?? ''}`;
  const authorization = (c: KafkaJsLike) =>
    (c.type !== undefined && AUTHORIZATION_TYPES.has(c.type)) || (c.name !== undefined && AUTHORIZATION_NAMES.has(c.name)) || (c.name?.startsWith('KafkaJS') === true && AUTHORIZATION_TEXT.test(c.message ?? ''));
  if (links.some(authorization)) {
    return 'authorization_failed';
  }
  if (links.some((c) => c.type !== undefined && MODE_CONFLICT_TYPES.has(c.type))) return 'mode_conflict';
  if (links.some((c) => c.type !== undefined && TOO_LARGE_TYPES.has(c.type))) return 'record_limit_changed';
  if (links.some((c) => (c.type !== undefined && FENCED_TYPES.has(c.type)) || FENCED_TEXT.test(text(c)))) return 'producer_fenced';
  if (links.some((c) => c.type !== undefined && REVOKED_TYPES.has(c.type))) return 'partition_revoked';
  for (const c of links) {
    if (c.type !== undefined && TRANSIENT_TYPES[c.type]) return TRANSIENT_TYPES[c.type]!;
    if (c.name !== undefined && TRANSIENT_NAMES[c.name]) return TRANSIENT_NAMES[c.name]!;
  }
  if (links.some((c) => c.retriable === true && c.name?.startsWith('KafkaJS'))) return 'broker_unavailable';
  return null;
}

/**
 * Whether a Kafka error is worth retrying: kafkajs marks protocol and network
 * errors `retriable`; "number of retries exceeded" wraps a retriable cause
 * (kafkajs restarts its own consumer on it too). Authorization, bad config
 * and our own programming errors are not.
 */
export function isTransientKafkaError(e: unknown): boolean {
  const links = chain(e);
  const code = kafkaErrorCode(e);
  if (code === 'authorization_failed' || code === 'mode_conflict') return false;
  return links.some((c) => c.retriable === true || (c.name !== undefined && Object.hasOwn(TRANSIENT_NAMES, c.name)));
}

registerErrorMapper(kafkaErrorCode);

/**
 * Every stable error code of rollout-stream, once, with its kind
 * (docs/design-streams-redesign.md, "One error policy"). The kind says what
 * the runtime does about an error carrying the code:
 *
 * - `transient`: retried in place with backoff (1 s doubling to 15 s); a
 *   stage that stays behind for `runtime.stall_warn_ms` reports `stalled`.
 * - `task_migrated`: someone else may own the partition now: abort, drop the
 *   task, rebuild it (fence, restore), re-read from the committed offset.
 * - `fatal`: the process stops with a non-zero exit (503 on /healthz until then).
 * - `poison`: one record. The dead-letter reasons are written at once as the
 *   processor decided, and so is a coded poison error a processor throws (a
 *   verdict, `isVerdict`); `processing_error` (any other exception while a
 *   stage processes a record: a bug) goes through the per-record policy
 *   (`runtime.poison`: stop the partition after N attempts, by default, or
 *   dead-letter it).
 *
 * The dead-letter reasons (`DEAD_LETTER_REASONS`) are poison codes;
 * `processors/types.ts`'s `DeadLetterReason` is derived from them.
 */
export type ErrorKind = 'transient' | 'task_migrated' | 'fatal' | 'poison';

/** The reasons a dead letter can carry (docs/formats.md "Dead-letter reasons"); all of kind poison. */
export const DEAD_LETTER_REASONS = [
  'row_index_type',
  'row_index_out_of_range',
  'duplicate_row_index',
  'inconsistent_group',
  'mixed_agents',
  'task_index_mismatch',
  'nan_logprobs',
  'undecodable',
  'incomplete_group',
  'invalid_row',
  'group_already_closed',
  'record_too_large',
  'reward_components_mismatch',
  'unsupported_roles',
  'processing_error',
  'non_contiguous_tokens',
  'no_generation_data',
  /** A chunk set that cannot be handed on whole (docs/design-chunked-records.md §3): headless, inconsistent, timed out. */
  'incomplete_record',
  /** Pack saw a group it packed already, with different content (streams/stages/pack-ledger.ts): the first version stands. */
  'group_already_packed',
] as const;

export type DeadLetterCode = (typeof DEAD_LETTER_REASONS)[number];

const deadLetterKinds = Object.fromEntries(DEAD_LETTER_REASONS.map((r) => [r, 'poison'])) as Record<DeadLetterCode, 'poison'>;

export const ERROR_CODES = {
  ...deadLetterKinds,

  // transient: the cluster or the registry is briefly unable to answer.
  broker_unavailable: 'transient',
  request_timeout: 'transient',
  coordinator_loading: 'transient',
  not_leader: 'transient',
  /** A topic-partition the broker does not host (yet, or again: a topic being recreated). */
  partition_unavailable: 'transient',
  concurrent_transactions: 'transient',
  registry_unavailable: 'transient',
  /** Fused mode waits for the separate stages to drain a partition before taking it over. */
  partition_not_drained: 'transient',
  /** A changelog restore that received nothing for its idle timeout; the next attempt reads again. */
  restore_stalled: 'transient',

  // task_migrated: DESIGN.md's one path for "someone else owns this partition now".
  producer_fenced: 'task_migrated',
  partition_revoked: 'task_migrated',
  transaction_outcome_unknown: 'task_migrated',
  /** A send refused as too large after the limit was read (someone lowered `max.message.bytes`): read it again, abort, rebuild. */
  record_limit_changed: 'task_migrated',

  // fatal: the process cannot go on.
  config_invalid: 'fatal',
  usage: 'fatal',
  mode_conflict: 'fatal',
  unknown_topic: 'fatal',
  topic_missing: 'fatal',
  unequal_partitions: 'fatal',
  authorization_failed: 'fatal',
  restore_failed: 'fatal',
  /** A record written by reference under another ingest config than the reader's: its rows would convert differently here. */
  ingest_config_mismatch: 'fatal',
  /** A consumer that lost its membership could not rejoin, for a reason that is not transient. */
  consumer_failed: 'fatal',
  transaction_state: 'fatal',
  registry_error: 'fatal',
  compression_corrupt: 'fatal',
  /** A Kafka client without a correctness fix its adapter needs (the kafkajs send retry, streams/kafka/kafkajs/send-retry.ts). */
  client_unpatched: 'fatal',
  publisher_closed: 'fatal',
  publish_failed: 'fatal',
  local_services: 'fatal',
  python_env: 'fatal',
  python_inspect: 'fatal',
  demo_timeout: 'fatal',
  bench_failed: 'fatal',

  // poison, besides the dead-letter reasons: one record refused or unpackable.
  /** A record the publisher refuses before it leaves (SPEC §2.2). */
  publish_invalid: 'poison',
  /** PackError's codes: pack dead-letters the group as `processing_error` with the code in the message. */
  pack_empty_group: 'poison',
  pack_misaligned_logprobs: 'poison',
  pack_bad_routed_experts: 'poison',
  pack_bad_media: 'poison',
} as const satisfies Record<string, ErrorKind>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The codes of one kind, e.g. `CodeOfKind<'fatal'>`. */
export type CodeOfKind<K extends ErrorKind> = { [C in ErrorCode]: (typeof ERROR_CODES)[C] extends K ? C : never }[ErrorCode];

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}

/** The kind of a code; undefined for a string that is not one of ours. */
export function kindOfCode(code: string): ErrorKind | undefined {
  return isErrorCode(code) ? ERROR_CODES[code] : undefined;
}

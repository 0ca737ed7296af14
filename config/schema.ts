/**
 * The one configuration schema of rollout-stream (SPEC §9). Processing keys
 * (`accumulate`, `postprocess`, `pack`) have fixed names; `kafka`, `topics`,
 * `runtime` are ours. Unknown keys are rejected so a typo stops start-up.
 * In the processing blocks `null` means "the key's default".
 */
import { z } from 'zod';

/** `null` → default: SPEC §9 says null means the key's default. */
function nullable<T extends z.ZodType>(schema: T, fallback: unknown) {
  return z.preprocess((v) => (v === null || v === undefined ? fallback : v), schema);
}

const strictBool = (fallback: boolean) =>
  nullable(z.boolean({ error: 'must be true or false (not 0/1 or a string)' }), fallback);

const idList = z.preprocess(
  (v) => (v === null || v === undefined ? [] : typeof v === 'number' ? [v] : v),
  z.array(z.number().int({ error: 'token ids must be integers' })),
);

const optionalId = z.preprocess(
  (v) => (v === undefined ? null : v),
  z.number().int({ error: 'token id must be an integer' }).nullable(),
);

export const accumulateConfigSchema = z.strictObject({
  /** true: rows of one group may come from different agents (`agent_ref.name`), as in a synchronous whole-batch group; false: such a group is a `mixed_agents` dead letter. Grouping is still by N rows. */
  allow_mixed_agents: strictBool(false),
  /** A group still missing rows this long after its first row arrived is an `incomplete_group` dead letter (with the rows it has and the indices it misses). */
  group_timeout_ms: nullable(z.number().int().positive(), 1_800_000),
  /** How long a closed group (emitted or dead-lettered) is remembered, so a replayed identical row is dropped and any other late row is `group_already_closed`. */
  emitted_retention_ms: nullable(z.number().int().positive(), 86_400_000),
  /** Grace after a batch's BatchEnd before its incomplete groups are dead-lettered. */
  batch_end_grace_ms: nullable(z.number().int().nonnegative(), 5_000),
});

export const effortConfigSchema = z.strictObject({
  /** Effort shaping (for rows whose last user message contains `low_string`): the weight of the length reward `min(1, low_weight·(1 − len/low_ub))`; 0 or less turns shaping off. */
  low_weight: nullable(z.number(), 0.0),
  /** Effort shaping: the factor of a negative length reward (the reward becomes r + r·max(lr, 0) + low_penalty·min(lr, 0)). */
  low_penalty: nullable(z.number(), 1.0),
  /** Effort shaping: the generated length (tokens of the last assistant message) at which the length reward reaches 0. */
  low_ub: nullable(z.number().positive(), 64000),
  /** Effort shaping: the marker in the last user message that selects low-effort rows; empty turns shaping off. */
  low_string: nullable(z.string(), ''),
});

export const rewardPenaltiesConfigSchema = z.strictObject({
  /** Reward 0 when a reasoning item's summary text equals the text of the item after it (the answer repeats the reasoning). */
  penalize_duplicated_reasoning: strictBool(false),
  /** Reward 0 when the last output item with content has empty text (unless the rollout ends on a function call). */
  penalize_empty_final_answer: strictBool(false),
  /** Reward 0 when an assistant message contains one of `token_ids.unwanted` (which must then be given). */
  penalize_unwanted_tokens: strictBool(false),
  /** Reward 0 when thinking tags are malformed: flagged by the generator, unbalanced against the prompt's (needs both think ids), or repeated in the generated text. */
  penalize_malformed_think_tag: strictBool(false),
  token_ids: nullable(
    z.strictObject({
      /** Token ids an assistant message must not contain (an id or a list). */
      unwanted: idList,
      /** Token id of the open thinking tag; both or neither (else inferred from `tokenizer_path` when each tag is one token). */
      think_open: optionalId,
      /** Token id of the close thinking tag. */
      think_close: optionalId,
    }),
    {},
  ),
  /** The open and close thinking tags, as text, for the malformed-think-tag checks. */
  thinking_tags: nullable(
    z.array(z.string()).min(2, { error: 'thinking_tags needs two entries: [open, close]' }),
    ['<think>', '</think>'],
  ),
  /** Local Hugging Face tokenizer.json; relative paths are relative to the config file. */
  tokenizer_path: z.string().nullable().default(null),
});

/** `null` or `[]` → the defaults; any non-empty list is used as given (SPEC §2.1, §9). */
const patternList = (defaults: string[]) =>
  z.preprocess(
    (v) => (v === null || v === undefined || (Array.isArray(v) && v.length === 0) ? defaults : v),
    z.array(z.string().min(1, { error: 'patterns must be non-empty strings' })),
  );

export const DEFAULT_INVALID_TOOL_CALL_PATTERNS = ['<tool_call>', '</tool_call>', '<function_call>', '</function_call>'];
export const DEFAULT_INGEST_THINKING_TAGS = ['<think>', '</think>'];

/** The conversion of a raw NeMo-Gym result (GymResult) into a RolloutRow (docs/formats.md "GymResult lines"). */
export const ingestConfigSchema = z.strictObject({
  /** Substrings that mark a generated message's text as an invalid tool call (`has_invalid_tool_call`); null or []: `<tool_call>`, `</tool_call>`, `<function_call>`, `</function_call>`. */
  invalid_tool_call_patterns: patternList(DEFAULT_INVALID_TOOL_CALL_PATTERNS),
  /** The open and close thinking tags whose misuse in generated text sets `has_malformed_thinking`; null or []: `<think>`, `</think>`. */
  thinking_tags: patternList(DEFAULT_INGEST_THINKING_TAGS),
  /** Integer type of the routed-expert ids a converted row carries. */
  routed_experts_dtype: nullable(z.enum(['int8', 'int16', 'int32']), 'int16'),
  /** true: a trainable output item without routed experts makes its row `invalid_row` (for router-replay training). */
  require_routed_experts: strictBool(false),
  /** Local tokenizer.json for prompt_str / generation_str; null: the penalty config's tokenizer_path. */
  tokenizer_path: z.string().nullable().default(null),
});

export const lengthPenaltyConfigSchema = z.strictObject({
  /** Length penalty on or off. */
  enabled: strictBool(false),
  /** Length penalty: reward += coef·λ, with λ = 0.5 − (len − shortest)/(longest − shortest) within the identity group. */
  coef: nullable(z.number(), 1.0),
  /** Length penalty: rows with a reward above this get λ; the others only its negative part. */
  correct_threshold: nullable(z.number(), 0.0),
});

export const postprocessConfigSchema = z.strictObject({
  /** A row whose tokens over all its messages reach this budget is truncated (`truncated: true`, also set by a length stop reason in the result). */
  max_total_tokens_per_sample: nullable(z.number().int().positive(), 65536),
  /** true: a row whose result (or its instance config) sets `mask_sample` gets `mask_sample: true`; false: the field is left out. */
  mask_env_flagged_samples: strictBool(true),
  /** Rows per identity group for the length penalty and the reward diagnostics (consecutive rows); null: the group's N. */
  identity_group_size: z.number().int().positive().nullable().default(null),
  effort: nullable(effortConfigSchema, {}),
  /** null or absent: no penalties. */
  reward_penalties: rewardPenaltiesConfigSchema.nullable().default(null),
  length_penalty: nullable(lengthPenaltyConfigSchema, {}),
});

export const packConfigSchema = z.strictObject({
  /** Right-padding values of dense per-row fields whose rows differ in length (`token_ids` pads `prompt_ids_for_adv`). */
  pad_values: nullable(z.record(z.string(), z.number().int()), { token_ids: 0 }),
  /** true: pack also writes the per-token `invalid_tool_call_mask` and `malformed_thinking_mask` fields. */
  include_message_violation_fields: strictBool(false),
  /**
   * Integer dtype of the packed `routed_experts` field. `auto` (the default):
   * the producer's, i.e. the widest dtype among the group's route blocks
   * (`ingest.routed_experts_dtype` for converted NeMo-Gym results; uint8
   * becomes int16 and int64 int32, to hold the −1 of messages without routes).
   * int8, int16 or int32 force that dtype; an id that does not fit makes the
   * group a `processing_error` dead letter instead of wrapping silently.
   */
  routed_experts_dtype: nullable(z.enum(['auto', 'int8', 'int16', 'int32']), 'auto'),
  /** Packing backend: `typed` (plain typed arrays) or `tfjs` (tfjs-core ops). */
  backend: nullable(z.enum(['typed', 'tfjs']), 'typed'),
  /**
   * Element types of packed tensors on the wire: `trainer` sends the trainer
   * dtypes (the decoder views them in place), `narrow` the smallest
   * type that holds every value (int32 ids, uint8 masks: ~55% fewer bytes, the
   * decoder widens). bench/README.md "python decode" has the trade.
   */
  wire_dtypes: nullable(z.enum(['trainer', 'narrow']), 'trainer'),
});

const saslSchema = z.discriminatedUnion('mechanism', [
  z.strictObject({ mechanism: z.literal('plain'), username: z.string(), password: z.string() }),
  z.strictObject({ mechanism: z.literal('scram-sha-256'), username: z.string(), password: z.string() }),
  z.strictObject({ mechanism: z.literal('scram-sha-512'), username: z.string(), password: z.string() }),
]);

const tlsSchema = z.strictObject({
  /** TLS on (a `tls` block with `enabled: false` is plaintext). */
  enabled: z.boolean().default(true),
  /** PEM file of the CA that signed the brokers' certificates; null: the system's CAs. */
  ca_file: z.string().nullable().default(null),
  /** Client certificate (PEM) for mutual TLS, with `key_file`. */
  cert_file: z.string().nullable().default(null),
  /** Client private key (PEM) for mutual TLS. */
  key_file: z.string().nullable().default(null),
  /** false: accept any broker certificate (testing only). */
  reject_unauthorized: z.boolean().default(true),
});

export const kafkaConfigSchema = z.strictObject({
  /** Bootstrap servers (`KAFKA_BROKERS`, comma-separated). */
  brokers: z.array(z.string().min(1)).min(1).default(['127.0.0.1:9092']),
  /** A Confluent-API schema registry (`SCHEMA_REGISTRY_URL`): a Confluent Schema Registry root or Apicurio's `/apis/ccompat/v7`. */
  schema_registry_url: z.url().default('http://127.0.0.1:8081/apis/ccompat/v7'),
  /** Prefix of the Kafka client ids (each runner adds its role). */
  client_id: z.string().min(1).default('rollout-stream'),
  /** SASL (PLAIN, SCRAM-SHA-256/512) with username and password (`KAFKA_SASL_MECHANISM`, `KAFKA_SASL_USERNAME`, `KAFKA_SASL_PASSWORD`); null: none. */
  sasl: saslSchema.nullable().default(null),
  /** TLS to the brokers: `enabled`, `ca_file`, `cert_file`, `key_file` (mTLS), `reject_unauthorized` (`KAFKA_TLS*`); null: plaintext. */
  tls: tlsSchema.nullable().default(null),
  /** Basic auth for the registry (`SCHEMA_REGISTRY_USERNAME`, `SCHEMA_REGISTRY_PASSWORD`); null: none. */
  registry_auth: z
    .strictObject({
      /** Registry user. */
      username: z.string(),
      /** Registry password. */
      password: z.string(),
    })
    .nullable()
    .default(null),
  /**
   * false: read-only registry use, for clients without write rights on it:
   * every schema's id is looked up under its subject and never registered
   * (register them once with `topics create` by a client that may); a schema
   * the registry does not hold stops start-up naming the subject.
   */
  register_schemas: z.boolean().default(true),
  /**
   * The record limit (bytes) of a topic whose own `max.message.bytes` cannot
   * be read (no DescribeConfigs), and the most bytes one produce request
   * carries. Writers read each topic's own limit from the broker; a value
   * above it travels as a chunk set.
   */
  max_message_bytes: z.number().int().positive().default(67_108_864),
  /**
   * The largest value (bytes) any writer sends, chunked or not (4 GiB): only
   * above it is a value `record_too_large`.
   */
  max_value_bytes: z.number().int().positive().max(2 ** 32).default(2 ** 32),
  /**
   * Whether writers cut a value above its topic's limit into a chunk set.
   * `false` (while readers that know chunk sets are being rolled out): such
   * a value is `record_too_large` as before.
   */
  chunk_records: z.boolean().default(true),
  /** Producer compression of every stage output (the packed topic can recompress on the broker: `topics.packed_compression`). */
  compression: z.enum(['none', 'gzip', 'snappy', 'lz4', 'zstd']).default('none'),
  /**
   * The Kafka client library the stage runners use (streams/kafka/):
   * `kafkajs` (patched; the default) or `platformatic` (@platformatic/kafka,
   * an optional dependency; bench/README.md "Kafka clients"). Publishers,
   * ops commands and the row reader use kafkajs either way.
   */
  client: z.enum(['kafkajs', 'platformatic']).default('kafkajs'),
  /**
   * How long a stage's start-up waits for a schema registry that does not
   * answer before it fails (once running, a stage waits for the registry as
   * long as it takes, and only for schema ids it has not seen yet).
   */
  registry_startup_wait_ms: z.number().int().nonnegative().default(30_000),
  /**
   * How long a reader waits for the rest of a chunk set (a value above its
   * topic's size limit, written as several records) when no chunk arrives
   * and nothing is left to fetch, before it gives the set up as an
   * `incomplete_record` dead letter. Longer than any writer's transaction
   * timeout, so only a dead non-transactional writer's set is given up.
   */
  chunk_wait_ms: z.number().int().positive().default(120_000),
});

/** Values of `topics.packed_compression` (Kafka's `compression.type`, `none` for `uncompressed`). */
export const PACKED_COMPRESSIONS = ['zstd', 'lz4', 'snappy', 'gzip', 'none', 'producer'] as const;

export const topicsConfigSchema = z
  .strictObject({
    /** Put in front of every topic name and consumer group (`TOPIC_PREFIX`): one cluster can hold several pipelines. */
    prefix: z.string().default(''),
    /** Partitions of every pipeline topic (`topics create`): the most processes one stage can spread over. */
    partitions: z.number().int().positive().default(4),
    /**
     * `max.message.bytes` `topics create` gives the pipeline's topics. null:
     * `kafka.max_message_bytes`. The compacted changelogs always get
     * `kafka.max_message_bytes` (their records are never chunked).
     */
    max_message_bytes: z.number().int().positive().nullable().default(null),
    /**
     * Replicas of every pipeline topic. null: decided by `topics create` from
     * the brokers the cluster has then (1 on one broker, 3 on three or more).
     */
    replication_factor: z.number().int().positive().nullable().default(null),
    /**
     * `min.insync.replicas` of every pipeline topic: with acks=all, a write
     * (and so a transaction) succeeds only while this many replicas have it.
     * null: 2 when the replication factor is 3 or more, else 1.
     */
    min_insync_replicas: z.number().int().positive().nullable().default(null),
    /**
     * `compression.type` of `rollout.packed`: the broker compresses every
     * batch the pack stage writes before storing it, and the trainer's
     * client decompresses (librdkafka and kafkajs here read all four codecs).
     * Packed records in the trainer dtypes are redundant (int64 token ids,
     * 0/1 int64 masks, −1 route blocks): zstd stores them in 0.3× their size,
     * so each row's bytes are written about 1.5× instead of 2.6× (bench/README.md
     * "Write amplification"). `none`: stored as sent; `producer`: whatever
     * the producer sent (`kafka.compression`).
     */
    packed_compression: z.enum(PACKED_COMPRESSIONS).default('zstd'),
    /**
     * `retention.ms` `topics create` gives the pipeline's delete-policy
     * topics (row-completed, group-complete, penalized, packed, dead-letter,
     * metrics, batch progress); the compacted changelogs and the pack ledger
     * are left alone (retention does not apply to compaction). -1: keep
     * forever; 0 is refused. It must outlive the longest a trainer may be
     * down (a trainer resumes `rollout.packed` from its offsets, and what
     * retention deleted meanwhile it never gets), the collector's read-back
     * of a resumed batch in `rollout.row-completed` (rows gone are run
     * again), the slowest path to `rollout.packed` (reference records point
     * into `rollout.row-completed`), and the time within which you may
     * redrive dead letters. Default 7 days (Kafka's own default): a trainer
     * down over a long weekend loses nothing, and topics on a cluster whose
     * default is shorter still get it. Disk: docs/managed-kafka.md "Retention".
     */
    retention_ms: z
      .number({ error: 'must be a number of milliseconds (604800000: 7 days; -1: keep forever)' })
      .int({ error: 'must be a whole number of milliseconds (-1: keep forever)' })
      .min(-1, { error: 'must be -1 (keep forever) or a positive number of milliseconds' })
      .refine((v) => v !== 0, { error: 'must not be 0 (records would be deleted at once; -1 keeps them forever)' })
      .default(604_800_000),
  })
  .superRefine((t, ctx) => {
    if (t.replication_factor !== null && t.min_insync_replicas !== null && t.min_insync_replicas > t.replication_factor) {
      ctx.addIssue({
        code: 'custom',
        path: ['min_insync_replicas'],
        message: `${t.min_insync_replicas} is more than topics.replication_factor (${t.replication_factor}): no write could ever succeed; lower it or raise the replication factor`,
      });
    }
  });

/** The stages `runtime.stages` can name, in pipeline order; each has its entry in streams/stages/registry.ts. */
export const PIPELINE_STAGES = ['accumulate', 'postprocess', 'pack'] as const;
export type PipelineStage = (typeof PIPELINE_STAGES)[number];

export const runtimeConfigSchema = z.strictObject({
  /** The stages this process runs (`run --stages`). */
  stages: z.array(z.enum(PIPELINE_STAGES)).default([...PIPELINE_STAGES]),
  /**
   * Accumulate, postprocess and pack in one transaction per input batch
   * (docs/design-fused-stages.md). 'auto': fused when this process runs all
   * three stages; true needs all three; false: one transaction per stage.
   */
  fused: z.union([z.boolean(), z.literal('auto')]).default('auto'),
  /**
   * What `rollout.group-complete` and `rollout.penalized` carry (the
   * claim-check pattern): `reference` (default) the group's identity, what
   * postprocess computed, and the (partition, offset) of each row in
   * `rollout.row-completed`, whose retention must then outlive the slowest
   * path to `rollout.packed`; `full` copies of the rows, as before. Readers
   * accept both; change it between runs.
   */
  intermediate_records: z.enum(['reference', 'full']).default('reference'),
  /** Port of /metrics, /healthz and /readyz (`METRICS_PORT`, `run --metrics-port`); 0: no server. */
  metrics_port: z.number().int().min(0).max(65535).default(9464),
  /**
   * The address /metrics, /healthz and /readyz listen on: 127.0.0.1 (the
   * default) keeps them on this machine; 0.0.0.0 (the container image's
   * setting) lets probes and Prometheus reach them from outside.
   */
  metrics_host: z.string().min(1).default('127.0.0.1'),
  /** How long SIGTERM/SIGINT wait for the open transactions to finish or abort before `run` exits 1 (keep below the orchestrator's grace period: 30 s on Kubernetes). */
  shutdown_timeout_ms: z.number().int().positive().default(20_000),
  /** Most bytes a stage has fetched and not yet committed (its memory bound for input). */
  max_inflight_bytes: z.number().int().positive().default(256 * 1024 * 1024),
  /** Kafka `transaction.timeout.ms` of the stages' producers: how long the broker waits before aborting a transaction whose producer died. */
  transaction_timeout_ms: z.number().int().positive().default(60_000),
  /** Consumer-group session timeout: how long a crashed instance holds its partitions. */
  session_timeout_ms: z.number().int().min(6_000).default(30_000),
  /** A stage that is behind on its input and has committed nothing for this long logs a warning (checked every 5 s). */
  stall_warn_ms: z.number().int().min(1_000).default(30_000),
  /**
   * A record a stage keeps throwing on with a bug (an exception of our code
   * that is no verdict on the record: a TypeError, any Error without one of
   * our poison codes): after `attempts` failures, `backoff_ms` apart and
   * doubling, `stop` (the default: bugs are not data) pauses its partition
   * and /healthz answers 503 `stopped_by_policy`; `dead-letter` writes it as
   * a `processing_error` dead letter and goes on. A verdict thrown as one of
   * our coded poison errors is a dead letter at once under either policy.
   */
  poison: nullable(
    z.strictObject({
      /** `stop`: pause the partition and answer /healthz 503 `stopped_by_policy`; `dead-letter`: write a `processing_error` dead letter and go on. */
      policy: z.enum(['dead-letter', 'stop']).default('stop'),
      /** Failures of the same record before the policy acts (also the restore attempts before `restore_failed`). */
      attempts: z.number().int().min(1).max(100).default(3),
      /** Wait before the second attempt, doubling after each failure. */
      backoff_ms: z.number().int().min(0).max(600_000).default(1_000),
    }),
    {},
  ),
});

export const LOG_FORMATS = ['text', 'json'] as const;

export const loggingConfigSchema = z.strictObject({
  /**
   * `text`: `<time> <level> <message>` lines; `json`: one JSON object per
   * line with time, level, msg and, where the message names them, stage,
   * partition, group and code (the container image's setting).
   */
  format: z.enum(LOG_FORMATS).default('text'),
});

export const configSchema = z.strictObject({
  accumulate: nullable(accumulateConfigSchema, {}),
  postprocess: nullable(postprocessConfigSchema, {}),
  pack: nullable(packConfigSchema, {}),
  ingest: nullable(ingestConfigSchema, {}),
  kafka: nullable(kafkaConfigSchema, {}),
  topics: nullable(topicsConfigSchema, {}),
  runtime: nullable(runtimeConfigSchema, {}),
  logging: nullable(loggingConfigSchema, {}),
});

export type Config = z.output<typeof configSchema>;
export type AccumulateConfig = z.output<typeof accumulateConfigSchema>;
export type PostprocessConfig = z.output<typeof postprocessConfigSchema>;
export type EffortConfig = z.output<typeof effortConfigSchema>;
export type RewardPenaltiesConfig = z.output<typeof rewardPenaltiesConfigSchema>;
export type LengthPenaltyConfig = z.output<typeof lengthPenaltyConfigSchema>;
export type IngestConfig = z.output<typeof ingestConfigSchema>;
export type PackConfig = z.output<typeof packConfigSchema>;
export type KafkaConfig = z.output<typeof kafkaConfigSchema>;
export type TopicsConfig = z.output<typeof topicsConfigSchema>;
export type RuntimeConfig = z.output<typeof runtimeConfigSchema>;
export type LoggingConfig = z.output<typeof loggingConfigSchema>;
export type PoisonConfig = RuntimeConfig['poison'];

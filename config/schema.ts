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
  allow_mixed_agents: strictBool(false),
  group_timeout_ms: nullable(z.number().int().positive(), 1_800_000),
  emitted_retention_ms: nullable(z.number().int().positive(), 86_400_000),
  /** Grace after a batch's BatchEnd before its incomplete groups are dead-lettered. */
  batch_end_grace_ms: nullable(z.number().int().nonnegative(), 5_000),
});

export const effortConfigSchema = z.strictObject({
  low_weight: nullable(z.number(), 0.0),
  low_penalty: nullable(z.number(), 1.0),
  low_ub: nullable(z.number().positive(), 64000),
  low_string: nullable(z.string(), ''),
});

export const rewardPenaltiesConfigSchema = z.strictObject({
  penalize_duplicated_reasoning: strictBool(false),
  penalize_empty_final_answer: strictBool(false),
  penalize_unwanted_tokens: strictBool(false),
  penalize_malformed_think_tag: strictBool(false),
  token_ids: nullable(
    z.strictObject({
      unwanted: idList,
      think_open: optionalId,
      think_close: optionalId,
    }),
    {},
  ),
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

/** GymResult → RolloutRow conversion (SPEC §2.1). */
export const ingestConfigSchema = z.strictObject({
  invalid_tool_call_patterns: patternList(DEFAULT_INVALID_TOOL_CALL_PATTERNS),
  thinking_tags: patternList(DEFAULT_INGEST_THINKING_TAGS),
  routed_experts_dtype: nullable(z.enum(['int8', 'int16', 'int32']), 'int16'),
  require_routed_experts: strictBool(false),
  /** Local tokenizer.json for prompt_str / generation_str; null: the penalty config's tokenizer_path. */
  tokenizer_path: z.string().nullable().default(null),
});

export const lengthPenaltyConfigSchema = z.strictObject({
  enabled: strictBool(false),
  coef: nullable(z.number(), 1.0),
  correct_threshold: nullable(z.number(), 0.0),
});

export const postprocessConfigSchema = z.strictObject({
  max_total_tokens_per_sample: nullable(z.number().int().positive(), 65536),
  mask_env_flagged_samples: strictBool(true),
  identity_group_size: z.number().int().positive().nullable().default(null),
  effort: nullable(effortConfigSchema, {}),
  /** null or absent: no penalties. */
  reward_penalties: rewardPenaltiesConfigSchema.nullable().default(null),
  length_penalty: nullable(lengthPenaltyConfigSchema, {}),
});

export const packConfigSchema = z.strictObject({
  pad_values: nullable(z.record(z.string(), z.number().int()), { token_ids: 0 }),
  include_message_violation_fields: strictBool(false),
  /** Integer dtype of packed routed experts (reference default int16). */
  routed_experts_dtype: nullable(z.enum(['int8', 'int16', 'int32']), 'int16'),
  /** Packing backend: `typed` (plain typed arrays) or `tfjs` (tfjs-core ops). */
  backend: nullable(z.enum(['typed', 'tfjs']), 'typed'),
  /**
   * Element types of packed tensors on the wire: `trainer` sends the trainer
   * dtypes of SPEC §5 (the decoder views them in place), `narrow` the smallest
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
  enabled: z.boolean().default(true),
  ca_file: z.string().nullable().default(null),
  cert_file: z.string().nullable().default(null),
  key_file: z.string().nullable().default(null),
  reject_unauthorized: z.boolean().default(true),
});

export const kafkaConfigSchema = z.strictObject({
  brokers: z.array(z.string().min(1)).min(1).default(['127.0.0.1:9092']),
  schema_registry_url: z.url().default('http://127.0.0.1:8081/apis/ccompat/v7'),
  client_id: z.string().min(1).default('rollout-stream'),
  sasl: saslSchema.nullable().default(null),
  tls: tlsSchema.nullable().default(null),
  registry_auth: z
    .strictObject({ username: z.string(), password: z.string() })
    .nullable()
    .default(null),
  /** Largest record (bytes) accepted end to end; matches the broker's message.max.bytes. */
  max_message_bytes: z.number().int().positive().default(67_108_864),
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
    prefix: z.string().default(''),
    partitions: z.number().int().positive().default(4),
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
  stages: z.array(z.enum(PIPELINE_STAGES)).default([...PIPELINE_STAGES]),
  /**
   * Accumulate, postprocess and pack in one transaction per input batch
   * (docs/design-fused-stages.md). 'auto': fused when this process runs all
   * three stages; true needs all three; false: one transaction per stage.
   */
  fused: z.union([z.boolean(), z.literal('auto')]).default('auto'),
  /**
   * What `rollout.group-complete` and `rollout.penalized` carry (SPEC §1, the
   * claim-check pattern): `reference` (default) the group's identity, what
   * postprocess computed, and the (partition, offset) of each row in
   * `rollout.row-completed`, whose retention must then outlive the slowest
   * path to `rollout.packed`; `full` copies of the rows, as before. Readers
   * accept both; change it between runs.
   */
  intermediate_records: z.enum(['reference', 'full']).default('reference'),
  metrics_port: z.number().int().min(0).max(65535).default(9464),
  max_inflight_bytes: z.number().int().positive().default(256 * 1024 * 1024),
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
      policy: z.enum(['dead-letter', 'stop']).default('stop'),
      attempts: z.number().int().min(1).max(100).default(3),
      backoff_ms: z.number().int().min(0).max(600_000).default(1_000),
    }),
    {},
  ),
});

export const configSchema = z.strictObject({
  accumulate: nullable(accumulateConfigSchema, {}),
  postprocess: nullable(postprocessConfigSchema, {}),
  pack: nullable(packConfigSchema, {}),
  ingest: nullable(ingestConfigSchema, {}),
  kafka: nullable(kafkaConfigSchema, {}),
  topics: nullable(topicsConfigSchema, {}),
  runtime: nullable(runtimeConfigSchema, {}),
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
export type PoisonConfig = RuntimeConfig['poison'];

/**
 * The stages a process can run, by the names `runtime.stages` and `run
 * --stages` give them. Each entry builds its stage, and any stage that runs
 * wherever it runs (batch-metrics beside postprocess), from what all the
 * stages of one process share. Adding a stage: its file in this folder, its
 * name in `PIPELINE_STAGES` (config/schema.ts) and its entry here; the
 * compiler asks for the entry once the name is there.
 */
import type { Config, PipelineStage } from '../../config/schema.js';
import { resolvePostprocessConfig } from '../../processors/postprocess.js';
import type { ResolvedIngestConfig } from '../../processors/ingest-config.js';
import type { RecordKind } from '../../schemas/index.js';
import type { Stage } from '../api/stage.js';
import type { CodecOptions, TopicCodec } from '../codecs/codec.js';
import type { RowResolver } from '../codecs/row-resolver.js';
import type { TopicNames } from '../topics/names.js';
import { accumulateStage } from './accumulate-stage.js';
import { batchMetricsStage } from './batch-metrics-stage.js';
import { packStage } from './pack-stage.js';
import { postprocessStage } from './postprocess-stage.js';

/** What every stage of one process is built from. */
export interface StageContext {
  topics: TopicNames;
  config: Config;
  configDir: string;
  ingest: ResolvedIngestConfig;
  /** The codec of `kind` records on `topic`, its writer schema registered. */
  codec<K extends RecordKind>(kind: K, topic: string, options?: CodecOptions): Promise<TopicCodec<K>>;
  /** Reads the rows reference records name (absent where no stage needs them). */
  rows?: RowResolver;
  /** `runtime.intermediate_records` is `reference`: write group-complete and penalized by reference. */
  references: boolean;
  /** Informational log lines of stages (pack's idempotent replays). */
  log?: (message: string) => void;
}

export type StageBuilder = (ctx: StageContext) => Promise<Stage[]>;

export const STAGE_REGISTRY: Record<PipelineStage, StageBuilder> = {
  accumulate: async (c) => [
    accumulateStage({
      topics: c.topics,
      config: c.config.accumulate,
      ingest: c.ingest,
      rowCodec: await c.codec('rowCompleted', c.topics.rowCompleted),
      groupCodec: await c.codec('groupComplete', c.topics.groupComplete),
      inputPartitions: c.config.topics.partitions,
      references: c.references,
    }),
  ],
  postprocess: async (c) => {
    const config = resolvePostprocessConfig(c.config.postprocess, { configDir: c.configDir });
    const metricsCodec = await c.codec('metrics', c.topics.metrics);
    return [
      postprocessStage({
        topics: c.topics,
        config,
        groupCodec: await c.codec('groupComplete', c.topics.groupComplete),
        penalizedCodec: await c.codec('penalized', c.topics.penalized),
        metricsCodec,
        ...(c.rows ? { rows: c.rows } : {}),
        references: c.references,
      }),
      batchMetricsStage({ topics: c.topics, config, metricsCodec }),
    ];
  },
  pack: async (c) => [
    packStage({
      topics: c.topics,
      config: c.config.pack,
      penalizedCodec: await c.codec('penalized', c.topics.penalized),
      packedCodec: await c.codec('packed', c.topics.packed, { packedWire: c.config.pack.wire_dtypes }),
      ...(c.rows ? { rows: c.rows } : {}),
      ...(c.log ? { log: c.log } : {}),
    }),
  ],
};

/** The stages `names` run, in the order given (each entry's stages in its order). */
export async function buildStages(names: readonly PipelineStage[], ctx: StageContext): Promise<Stage[]> {
  const out: Stage[] = [];
  for (const name of names) out.push(...(await STAGE_REGISTRY[name](ctx)));
  return out;
}

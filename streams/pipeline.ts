/**
 * Assembles the stage services of one process from the configuration:
 * codecs (schemas registered), stages, one StageRunner per stage, the
 * /metrics endpoint, and graceful shutdown.
 */
import type { Server } from 'node:http';
import type { Config } from '../config/schema.js';
import type { RecordKind } from '../schemas/index.js';
import { resolvePostprocessConfig } from '../processors/postprocess.js';
import { TopicCodec } from './codec.js';
import { createKafka, createRegistry } from './kafka-client.js';
import { RuntimeMetrics, serveMetrics } from './runtime-metrics.js';
import type { Stage, StageName } from './stage.js';
import { StageRunner, type Logger } from './stage-runner.js';
import { accumulateStage } from './stages/accumulate-stage.js';
import { batchMetricsStage } from './stages/batch-metrics-stage.js';
import { packStage } from './stages/pack-stage.js';
import { postprocessStage } from './stages/postprocess-stage.js';
import { subjectOf, topicNames } from './topics.js';

export interface PipelineOptions {
  config: Config;
  configDir: string;
  /** The batch-metrics aggregator runs wherever postprocess runs. */
  stages: Array<Exclude<StageName, 'batch-metrics'>>;
  log: Logger;
  /** Overrides config.runtime.metrics_port (0 = no endpoint). */
  metricsPort?: number;
}

export interface RunningPipeline {
  runners: StageRunner[];
  metrics: RuntimeMetrics;
  server: Server | null;
  stop(): Promise<void>;
}

export const consumerGroupId = (prefix: string, stage: StageName): string => `${prefix}rollout-stream.${stage}`;

/** Starts the requested stages; resolves once every consumer has joined its group. */
export async function startPipeline(o: PipelineOptions): Promise<RunningPipeline> {
  const { config } = o;
  const topics = topicNames(config.topics.prefix);
  const registry = createRegistry(config.kafka);
  const codec = <K extends RecordKind>(kind: K, topic: string) => new TopicCodec(kind, subjectOf(topic), registry).init();
  const deadLetterCodec = await codec('deadLetter', topics.deadLetter);
  const stages: Stage[] = [];
  for (const name of o.stages) {
    if (name === 'accumulate') {
      stages.push(
        accumulateStage({
          topics,
          config: config.accumulate,
          rowCodec: await codec('rowCompleted', topics.rowCompleted),
          groupCodec: await codec('groupComplete', topics.groupComplete),
          inputPartitions: config.topics.partitions,
        }),
      );
    } else if (name === 'postprocess') {
      const resolved = resolvePostprocessConfig(config.postprocess, { configDir: o.configDir });
      const metricsCodec = await codec('metrics', topics.metrics);
      stages.push(
        postprocessStage({
          topics,
          config: resolved,
          groupCodec: await codec('groupComplete', topics.groupComplete),
          penalizedCodec: await codec('penalized', topics.penalized),
          metricsCodec,
        }),
        batchMetricsStage({ topics, config: resolved, metricsCodec }),
      );
    } else {
      stages.push(
        packStage({
          topics,
          config: config.pack,
          penalizedCodec: await codec('penalized', topics.penalized),
          packedCodec: await codec('packed', topics.packed),
        }),
      );
    }
  }
  const metrics = new RuntimeMetrics();
  const runners = stages.map(
    (stage) =>
      new StageRunner({
        kafka: createKafka(config.kafka, stage.name),
        stage,
        groupId: consumerGroupId(config.topics.prefix, stage.name),
        deadLetterTopic: topics.deadLetter,
        deadLetterCodec,
        maxMessageBytes: config.kafka.max_message_bytes,
        compression: config.kafka.compression,
        maxInflightBytes: config.runtime.max_inflight_bytes,
        transactionTimeoutMs: config.runtime.transaction_timeout_ms,
        sessionTimeoutMs: config.runtime.session_timeout_ms,
        metrics,
        log: o.log,
      }),
  );
  for (const r of runners) await r.start();
  const gaugeTimer = setInterval(() => {
    let open = 0;
    for (const r of runners) open += r.gauges().open_groups ?? 0;
    metrics.openGroups.set(open);
  }, 1000);
  const server = await serveMetrics(metrics, o.metricsPort ?? config.runtime.metrics_port, () => ({
    ok: true,
    detail: { stages: runners.map((r) => r.stageName) },
  }));
  return {
    runners,
    metrics,
    server,
    async stop() {
      clearInterval(gaugeTimer);
      await Promise.all(runners.map((r) => r.stop()));
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    },
  };
}

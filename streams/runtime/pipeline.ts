/**
 * Assembles the stage services of one process from the configuration:
 * codecs (schemas registered), stages, one StageRunner per stage, the
 * /metrics and /healthz endpoint (health.ts: 503 while a runner is stalled,
 * fenced, stopped by the poison policy or failed), and graceful shutdown.
 */
import type { Server } from 'node:http';
import { PIPELINE_STAGES, type Config, type PipelineStage } from '../../config/schema.js';
import type { RecordKind } from '../../schemas/index.js';
import { ConfigError, RolloutStreamError } from '../../errors/index.js';
import { resolveIngestConfig } from '../../processors/ingest-config.js';
import { TopicCodec, type CodecOptions } from '../codecs/codec.js';
import { firstUndrained } from './fused-drain.js';
import { createClient } from '../kafka/clients.js';
import { classify, retryDelayMs } from './error-policy.js';
import { chunkReaderOptions } from '../chunks/chunked-client.js';
import type { KafkaClient, OffsetReader } from '../kafka/types.js';
import { holdGuards, isModeConflict, protocolsOf, settleFusedTransactions, type Guards } from './mode-guard.js';
import { createRowReader } from '../kafka/kafkajs/offset-reader.js';
import { RowResolver } from '../codecs/row-resolver.js';
import { createRegistry, type SchemaRegistryClient } from '../codecs/schema-registry.js';
import { RuntimeMetrics, serveMetrics } from './metrics.js';
import { withFaults, type Fault } from './faults.js';
import { healthReport, readinessReport, UNHEALTHY_STATES } from './health.js';
import type { Stage, StageName } from '../api/stage.js';
import { StageRunner, type Logger } from './stage-runner.js';
import { buildStages } from '../stages/registry.js';
import { subjectOf, topicNames } from '../topics/names.js';

export interface PipelineOptions {
  config: Config;
  configDir: string;
  /** The batch-metrics aggregator runs wherever postprocess runs (streams/stages/registry.ts). */
  stages: PipelineStage[];
  log: Logger;
  /** Overrides config.runtime.metrics_port (0 = no endpoint). */
  metricsPort?: number;
  /** Overrides config.runtime.fused ('auto': fused when all three stages run here). */
  fused?: boolean | 'auto';
  /** Test-only fault-injection points (faults.ts; `run --fault`). */
  faults?: Fault[];
  /** Test-only: what stands in for Kafka and the registry (the topology test driver, streams/testing/); absent: the real ones of config.kafka. */
  io?: PipelineIo;
}

/** Where a pipeline's Kafka clients, row reader and schema registry come from (PipelineOptions.io). */
export interface PipelineIo {
  /** The client of the mode checks and guards (`pipeline`) and of each runner (its client name). */
  client(name: string): KafkaClient;
  /** The row reader of postprocess and pack (reference records) and of accumulate's restore. */
  rowReader(): OffsetReader;
  registry: SchemaRegistryClient;
}

export interface RunningPipeline {
  /** Whether the stages run fused (one transaction per batch). */
  fused: boolean;
  runners: StageRunner[];
  metrics: RuntimeMetrics;
  server: Server | null;
  /** Settles with the first fatal error of any runner (the process should stop, non-zero exit); never rejects. */
  failed: Promise<RolloutStreamError>;
  stop(): Promise<void>;
}

export const consumerGroupId = (prefix: string, stage: StageName): string => `${prefix}rollout-stream.${stage}`;

export class PipelineModeError extends RolloutStreamError {
  constructor(message: string, cause?: unknown) {
    super('mode_conflict', message, cause === undefined ? undefined : { cause });
  }
}

/** The refusal of a member of the other mode (mode-guard.ts), said for the operator. */
function modeRefusal(e: unknown, config: Config, fused: boolean): PipelineModeError {
  const prefix = config.topics.prefix;
  const session = `runtime.session_timeout_ms, ${config.runtime.session_timeout_ms} ms`;
  const why = (e as Error).message;
  return new PipelineModeError(
    fused
      ? `fused mode refused: separate stage instances are running on prefix '${prefix}' (${why}); stop them first ` +
          `(a killed instance stays a member until its session times out: ${session})`
      : `a fused runner is processing prefix '${prefix}' (${why}); separate stages would process its outputs again; stop it first (or run all three stages fused; ` +
          `a killed fused process stays a member until its session times out: ${session})`,
    e,
  );
}

/**
 * Before a fused start: fused mode needs equal partition counts on its
 * topics, and the first fused process after separate stages must know
 * whether they left records behind (then it drains them first). Which mode
 * may run is not decided here: the coordinator refuses the other mode's
 * members (mode-guard.ts).
 */
async function checkFused(client: KafkaClient, config: Config): Promise<{ undrained: string | null }> {
  const prefix = config.topics.prefix;
  const names = topicNames(prefix);
  const admin = await client.admin();
  try {
    const counts = await Promise.all([names.rowCompleted, names.groupComplete, names.penalized].map(async (topic) => [topic, await admin.partitionCount(topic)] as const));
    if (new Set(counts.map(([, n]) => n)).size > 1) {
      throw new PipelineModeError(`fused mode needs equal partition counts on its topics; found ${counts.map(([t, n]) => `${t}: ${n}`).join(', ')}`);
    }
    // The first fused process after separate stages: have they left records behind?
    if ((await admin.describeGroup(consumerGroupId(prefix, 'accumulate'))).members === 0) {
      return {
        undrained: await firstUndrained(client, admin, [
          { topic: names.groupComplete, groupId: consumerGroupId(prefix, 'postprocess') },
          { topic: names.penalized, groupId: consumerGroupId(prefix, 'pack') },
        ]),
      };
    }
    return { undrained: null };
  } finally {
    await admin.close();
  }
}

/**
 * Before the first fused process takes over from separate stages: run
 * postprocess and pack as separate runners in this process until they have
 * processed everything on their input topics (nothing feeds them meanwhile:
 * no accumulate instance runs), then stop them.
 */
async function drainSeparately(
  stages: Stage[],
  makeRunner: (stage: Stage, client: string) => StageRunner,
  client: KafkaClient,
  config: Config,
  first: string,
  log: Logger,
): Promise<void> {
  const t0 = Date.now();
  log.info(`fused: ${first} holds records the separate stages have not processed; draining them with ${stages.map((s) => s.name).join(' and ')} first`);
  const runners = stages.map((s) => makeRunner(s, s.name));
  const admin = await client.admin();
  try {
    for (const r of runners) await r.start();
    const targets = stages.map((s) => ({ topic: s.inputTopic, groupId: consumerGroupId(config.topics.prefix, s.name) }));
    let lastReport = Date.now();
    for (;;) {
      await new Promise((r) => setTimeout(r, 1000));
      const left = await firstUndrained(client, admin, targets);
      if (left === null) break;
      if (Date.now() - lastReport > 10_000) {
        log.info(`fused: still draining (${left}) after ${Math.round((Date.now() - t0) / 1000)} s`);
        lastReport = Date.now();
      }
    }
  } finally {
    await admin.close();
    await Promise.all(runners.map((r) => r.stop()));
  }
  log.info(`fused: separate stages drained in ${((Date.now() - t0) / 1000).toFixed(1)} s; starting fused`);
}

/** Starts the requested stages; resolves once every consumer has joined its group. */
export async function startPipeline(o: PipelineOptions): Promise<RunningPipeline> {
  const { config } = o;
  const topics = topicNames(config.topics.prefix);
  // Start-up waits a bounded time for the registry; afterwards a schema id
  // not seen yet waits for it (logged), and known ids need it not at all.
  const registry = o.io?.registry ?? createRegistry(config.kafka, {
    registerWaitMs: config.kafka.registry_startup_wait_ms,
    waitOnLookup: true,
    log: (m) => o.log.warn(m),
  });
  const codec = <K extends RecordKind>(kind: K, topic: string, options?: CodecOptions) =>
    new TopicCodec(kind, subjectOf(topic), registry, options).init();
  const deadLetterCodec = await codec('deadLetter', topics.deadLetter);
  const all = PIPELINE_STAGES.every((s) => o.stages.includes(s));
  const setting = o.fused ?? config.runtime.fused;
  const fused = setting === 'auto' ? all : setting;
  if (fused && !all) {
    throw new ConfigError('runtime.fused', `fused mode runs accumulate, postprocess and pack together; runtime.stages is ${o.stages.join(',')}`);
  }
  // One client library for the mode checks, the guards and the drain; each runner gets its own client id.
  const client = o.io?.client('pipeline') ?? (await createClient(config.kafka, 'pipeline', chunkReaderOptions(config.kafka, config.runtime)));
  const mode = fused ? await checkFused(client, config) : { undrained: null };
  let reportFatal!: (e: RolloutStreamError) => void;
  const failed = new Promise<RolloutStreamError>((resolve) => (reportFatal = resolve));
  const ingest = resolveIngestConfig(config.ingest, {
    configDir: o.configDir,
    postprocessTokenizerPath: config.postprocess.reward_penalties?.tokenizer_path ?? null,
  });
  const references = config.runtime.intermediate_records === 'reference';
  // Postprocess and pack read the rows of reference records back from
  // row-completed (in either mode: records of an earlier run may be
  // references), and accumulate's restore the pending rows its changelog names.
  const rowReader = o.io?.rowReader() ?? createRowReader(config.kafka);
  const rows = o.stages.some((s) => s !== 'accumulate')
    ? new RowResolver({ topic: topics.rowCompleted, reader: rowReader, rowCodec: await codec('rowCompleted', topics.rowCompleted), ingest })
    : undefined;
  const byName = new Map<StageName, Stage>();
  const stages = await buildStages(o.stages, { topics, config, configDir: o.configDir, ingest, codec, ...(rows ? { rows } : {}), references, log: (m) => o.log.info(m) });
  for (const stage of stages) byName.set(stage.name, withFaults(stage, o.faults ?? []));
  // One runner per stage; fused: one runner for the chain, batch metrics on its own.
  const plan: Array<{ stage: Stage; client: string; downstream?: Stage[] }> = fused
    ? [
        { stage: byName.get('accumulate')!, client: 'fused', downstream: [byName.get('postprocess')!, byName.get('pack')!] },
        { stage: byName.get('batch-metrics')!, client: 'batch-metrics' },
      ]
    : [...byName.values()].map((stage) => ({ stage, client: stage.name }));
  const metrics = new RuntimeMetrics();
  const groupOf = (s: Stage) => consumerGroupId(config.topics.prefix, s.name);
  // Batch metrics serve either mode (no protocol of a mode); the others announce theirs (mode-guard.ts).
  const protocolsFor = (stage: Stage) => (stage.name === 'batch-metrics' ? undefined : protocolsOf(fused ? 'fused' : 'separate'));
  // One client per runner: its group source and its sinks belong together (a KIP-447 client commits offsets through its own member).
  const clients = new Map<string, KafkaClient>();
  for (const name of [...plan.map((p) => p.client), 'postprocess', 'pack']) if (!clients.has(name)) clients.set(name, o.io?.client(name) ?? (await createClient(config.kafka, name, chunkReaderOptions(config.kafka, config.runtime))));
  const makeRunner = (stage: Stage, clientName: string, downstream?: Stage[]) =>
    new StageRunner({
      client: clients.get(clientName)!,
      reader: rowReader,
      stage,
      groupId: groupOf(stage),
      deadLetterTopic: topics.deadLetter,
      deadLetterCodec,
      maxMessageBytes: config.kafka.max_message_bytes,
      maxValueBytes: config.kafka.max_value_bytes,
      chunkRecords: config.kafka.chunk_records,
      compression: config.kafka.compression,
      maxInflightBytes: config.runtime.max_inflight_bytes,
      transactionTimeoutMs: config.runtime.transaction_timeout_ms,
      sessionTimeoutMs: config.runtime.session_timeout_ms,
      stallWarnMs: config.runtime.stall_warn_ms,
      poison: config.runtime.poison,
      onFatal: reportFatal,
      metrics,
      log: o.log,
      ...(protocolsFor(stage) ? { protocols: protocolsFor(stage)! } : {}),
      ...(downstream ? { downstream: downstream.map((d) => ({ stage: d, groupId: groupOf(d) })) } : {}),
    });
  // A fused process holds the postprocess and pack groups (guard members) before it processes anything.
  let guards: Guards | null = null;
  const runners = plan.map(({ stage, client: name, downstream }) => makeRunner(stage, name, downstream));
  // Served from before the runners join their groups: /readyz answers 503 until they have partitions and state.
  const server = await serveMetrics(
    metrics,
    { host: config.runtime.metrics_host, port: o.metricsPort ?? config.runtime.metrics_port },
    () => healthReport(runners.map((r) => r.healthState()), { stages: runners.flatMap((r) => r.stageNames), fused }),
    () => readinessReport(runners.map((r) => r.healthState())),
  );
  // A runner that cannot start (after retrying transient errors) must not
  // leave the others running in a process that looks alive: stop them all.
  const started: StageRunner[] = [];
  try {
    if (fused) {
      // The fused runner's own client: its transactions commit the postprocess and pack offsets, which a
      // KIP-447 client does with the generation of its member in those groups (the guard).
      guards = await holdGuards(
        clients.get('fused')!,
        (['postprocess', 'pack'] as const).map((s) => ({ groupId: consumerGroupId(config.topics.prefix, s), topic: byName.get(s)!.inputTopic })),
        config.runtime.session_timeout_ms,
        (e) => {
          o.log.error(`fatal [${e.code}]: ${e.message}`);
          reportFatal(e);
        },
      );
      if (mode.undrained !== null) await drainSeparately([byName.get('postprocess')!, byName.get('pack')!], makeRunner, client, config, mode.undrained, o.log);
    } else {
      // No separate runner may read an offset a fused transaction has yet to commit (mode-guard.ts).
      // The broker briefly away (a restart under a starting process) is waited out, as the runners' own start-up does.
      const t0 = Date.now();
      for (let attempt = 1; ; attempt++) {
        try {
          const admin = await client.admin();
          try {
            await settleFusedTransactions({
              client,
              admin,
              accumulateGroup: consumerGroupId(config.topics.prefix, 'accumulate'),
              rowTopic: topics.rowCompleted,
              transactionTimeoutMs: config.runtime.transaction_timeout_ms,
              log: o.log,
            });
          } finally {
            await admin.close().catch(() => undefined);
          }
          break;
        } catch (e) {
          if (classify(e).kind !== 'transient' || Date.now() - t0 > 120_000) throw e;
          const wait = retryDelayMs(attempt);
          o.log.warn(`separate stages: settling the fused transactional ids failed (attempt ${attempt}): ${(e as Error).message}; retrying in ${wait / 1000} s`);
          await new Promise((r) => setTimeout(r, wait));
        }
      }
    }
    for (const r of runners) {
      started.push(r);
      await r.start();
    }
  } catch (e) {
    await Promise.all(started.map((s) => s.stop().catch(() => undefined)));
    await guards?.stop();
    await rowReader.close().catch(() => undefined);
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    throw isModeConflict(e) ? modeRefusal(e, config, fused) : e;
  }
  const gaugeTimer = setInterval(() => {
    let open = 0;
    let batches = 0;
    for (const r of runners) {
      const g = r.gauges();
      open += g.open_groups ?? 0;
      batches += g.open_batches ?? 0;
    }
    metrics.openGroups.set(open);
    metrics.openBatches.set(batches);
    let oldest = Infinity;
    for (const r of runners) oldest = Math.min(oldest, r.gauges().open_group_opened_at_min ?? Infinity);
    metrics.oldestOpenGroup.set(oldest === Infinity ? 0 : Math.max(0, (Date.now() - oldest) / 1000));
    for (const r of runners) {
      const h = r.healthState();
      metrics.runnerHealthy.set({ runner: h.runner }, UNHEALTHY_STATES.has(h.state) ? 0 : 1);
      metrics.runnerReady.set({ runner: h.runner }, h.state === 'running' ? 1 : 0);
    }
    for (const r of runners) {
      const g = r.gauges();
      if (g.open_weight_version_min === undefined || g.open_weight_version_max === undefined) {
        metrics.openWeightVersion.remove({ stage: r.stageName, bound: 'min' });
        metrics.openWeightVersion.remove({ stage: r.stageName, bound: 'max' });
        continue;
      }
      metrics.openWeightVersion.set({ stage: r.stageName, bound: 'min' }, g.open_weight_version_min);
      metrics.openWeightVersion.set({ stage: r.stageName, bound: 'max' }, g.open_weight_version_max);
    }
  }, 1000);
  return {
    fused,
    runners,
    metrics,
    server,
    failed,
    async stop() {
      clearInterval(gaugeTimer);
      await Promise.all(runners.map((r) => r.stop()));
      await guards?.stop();
      await rowReader.close();
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    },
  };
}

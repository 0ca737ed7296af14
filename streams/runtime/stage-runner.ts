/**
 * The exactly-once runner of one stage, or of the fused chain (SPEC §8,
 * DESIGN.md), composed from Kafka Streams' seams: the consumer loop
 * (consumer-loop.ts) hands batches to the task manager (task-manager.ts),
 * which keeps one stream task per assigned partition (stream-task.ts),
 * fenced and restored (restorer.ts) before it processes; each task writes a
 * batch's outputs, changelog records and input offsets in one transaction
 * (transaction-writer.ts); failures follow the one error policy
 * (error-policy.ts, record-policy.ts); the lag monitor (lag-monitor.ts) and
 * the health tracker (health.ts) say how it is doing.
 */
import type { Stage } from '../api/stage.js';
import type { TopicCodec } from '../codecs/codec.js';
import type { CompressionName, KafkaAdmin, KafkaClient, MemberProtocols, OffsetReader } from '../kafka/types.js';
import { RolloutStreamError, type CodeOfKind } from '../../errors/index.js';
import { classify, describeError, type PoisonPolicy } from './error-policy.js';
import { HealthTracker, type RunnerHealth } from './health.js';
import { ConsumerLoop } from './consumer-loop.js';
import { LagMonitor } from './lag-monitor.js';
import type { Logger } from './logger.js';
import type { RuntimeMetrics } from './metrics.js';
import { RecordPolicy } from './record-policy.js';
import { Restorer } from './restorer.js';
import type { ChainNode } from './stream-task.js';
import { TaskManager } from './task-manager.js';
import { TransactionWriter } from './transaction-writer.js';
import { ChunkingTransactionalSink } from '../chunks/chunking-sink.js';
import { RecordLimits } from '../chunks/record-limits.js';
import { restoreChangelog } from './changelog-restore.js';

export type { Logger } from './logger.js';

export interface StageRunnerOptions {
  /** The Kafka client library behind the runtime's seams (streams/kafka/types.ts). */
  client: KafkaClient;
  /** Reads input records by offset: a restore reads back the pending records its changelog references (the process's row reader). */
  reader: OffsetReader;
  stage: Stage;
  /** Consumer group id; also the transactional-id prefix. */
  groupId: string;
  deadLetterTopic: string;
  deadLetterCodec: TopicCodec<'deadLetter'>;
  /** `kafka.max_message_bytes`: the limit of a topic whose own cannot be read, and the bytes of one produce request. */
  maxMessageBytes: number;
  /** `kafka.max_value_bytes`: the largest value written, chunked or not (default 4 GiB). */
  maxValueBytes?: number;
  /** `kafka.chunk_records` (default true): values above their topic's limit are written as chunk sets. */
  chunkRecords?: boolean;
  /** Upper bound on bytes fetched and held per stage (backpressure). */
  maxInflightBytes: number;
  transactionTimeoutMs: number;
  sessionTimeoutMs: number;
  /** Behind on input and nothing committed for this long: logged as stalled (default 30 s). */
  stallWarnMs?: number;
  /** Producer compression of every output (bench/README.md "compression": none by default). */
  compression?: CompressionName;
  tickIntervalMs?: number;
  metrics: RuntimeMetrics;
  log: Logger;
  /**
   * Fused mode (docs/design-fused-stages.md): stages that run inside this
   * runner's transaction, each on what the previous one wrote. Every record a
   * step writes to the next stage's input topic goes to the partition number
   * being processed, marked as handed off, and each downstream group's offset
   * past those records is committed in the same transaction when nobody else
   * wrote there meanwhile; records others wrote there are read and processed
   * by the task itself (fused-handoff.ts), and every reader skips marked ones.
   */
  downstream?: Array<{ stage: Stage; groupId: string }>;
  /** What to do with a record whose processing keeps throwing (runtime.poison; default: a bug stops the partition after 3 attempts, 1 s backoff). */
  poison?: PoisonPolicy;
  /** Called once when the runner hits a fatal error (the process should stop with a non-zero exit). */
  onFatal?: (e: RolloutStreamError) => void;
  /** The assignment protocols its consumer announces (mode-guard.ts); absent: the client's default. */
  protocols?: MemberProtocols;
}

/** A stage with lag that has committed nothing for this long is reported as stalled (then at most this often). */
const STALL_WARN_MS_DEFAULT = 30_000;

export class StageRunner {
  /** This runner's state for /healthz. */
  readonly health: HealthTracker;
  /** Connected by `start` (each start-up attempt connects a new one). */
  private admin: KafkaAdmin | null = null;
  private readonly tasks: TaskManager;
  private readonly loop: ConsumerLoop;
  private readonly lag: LagMonitor;
  private ticker: NodeJS.Timeout | null = null;
  private lagTimer: NodeJS.Timeout | null = null;
  private stopping = false;

  constructor(private readonly o: StageRunnerOptions) {
    const chain: ChainNode[] = [{ stage: o.stage, groupId: o.groupId }, ...(o.downstream ?? [])];
    const chainName = chain.map((n) => n.stage.name).join('+');
    const admin = deferredAdmin(() => this.admin);
    const stallWarnMs = o.stallWarnMs ?? STALL_WARN_MS_DEFAULT;
    this.health = new HealthTracker(chainName, stallWarnMs);
    const policy = new RecordPolicy(o.poison ?? { policy: 'stop', attempts: 3, backoff_ms: 1_000 }, o.stage.name, chainName, o.log);
    const writer = new TransactionWriter({
      chainName,
      deadLetterTopic: o.deadLetterTopic,
      deadLetterCodec: o.deadLetterCodec,
      maxMessageBytes: o.maxMessageBytes,
      ...(o.maxValueBytes !== undefined ? { maxValueBytes: o.maxValueBytes } : {}),
      ...(o.chunkRecords !== undefined ? { chunkRecords: o.chunkRecords } : {}),
      metrics: o.metrics,
    });
    const restorer = new Restorer({
      readChangelog: (topic, partitions, onRecord) => restoreChangelog(o.client, admin, topic, partitions, onRecord, o.maxInflightBytes),
      reader: o.reader,
      stages: chain.map((n) => n.stage),
      chainName,
      metrics: o.metrics,
      log: o.log,
    });
    // Partition counts for placing keyed records; topics do not change under a running stage.
    const counts = new Map<string, Promise<number>>();
    const partitionsOf = (topic: string): Promise<number> => {
      let n = counts.get(topic);
      if (!n) {
        counts.set(topic, (n = admin.partitionCount(topic)));
        n.catch(() => counts.delete(topic));
      }
      return n;
    };
    // Every task's sink writes a value above its topic's limit (read from the broker) as a chunk set;
    // the compacted changelogs never (compaction would keep one chunk of a key).
    const limits = new RecordLimits({ admin: () => admin, fallbackBytes: o.maxMessageBytes, log: (line) => o.log.warn(line) });
    const neverChunk = new Set(chain.map((n) => n.stage.changelogTopic).filter((t): t is string => t !== undefined));
    this.tasks = new TaskManager({
      admin,
      sinkFor: (id) =>
        new ChunkingTransactionalSink(
          o.client.transactionalSink(id, { transactionTimeoutMs: o.transactionTimeoutMs, partitionsOf, ...(o.compression ? { compression: o.compression } : {}) }),
          { limits, partitionsOf, requestBudget: o.maxMessageBytes, neverChunk, enabled: o.chunkRecords !== false },
        ),
      reader: o.reader,
      chain,
      chainName,
      writer,
      policy,
      restorer,
      health: this.health,
      metrics: o.metrics,
      log: o.log,
      onProgress: () => this.lag.progressed(),
      onFatal: (e, code, context) => this.failFatal(e, code, context),
    });
    this.lag = new LagMonitor({
      admin,
      chainName,
      inputTopic: o.stage.inputTopic,
      groupId: o.groupId,
      stallWarnMs,
      metrics: o.metrics,
      health: this.health,
      log: o.log,
      assigned: () => this.tasks.assigned,
      describeTasks: () => [...this.tasks.tasks.values()].map((t) => `${t.partition}${t.closed ? ' closed' : ''}`),
      caughtUp: (partition, high) => this.loop.caughtUp(partition, high),
    });
    this.loop = new ConsumerLoop({
      newSource: () =>
        o.client.groupSource({
          groupId: o.groupId,
          topic: o.stage.inputTopic,
          sessionTimeoutMs: o.sessionTimeoutMs,
          maxBytes: o.maxInflightBytes,
          maxBytesPerPartition: Math.max(o.maxMessageBytes + 1024, Math.floor(o.maxInflightBytes / 4)),
          concurrency: 4,
          ...(o.protocols ? { protocols: o.protocols } : {}),
        }),
      groupId: o.groupId,
      chainName,
      tasks: this.tasks,
      log: o.log,
      onFailed: (e) => this.failFatal(e, 'consumer_failed', 'could not restart the consumer'),
    });
  }

  /** The stages this runner runs, in chain order (one unless fused). */
  get stageNames(): string[] {
    return [this.o.stage, ...(this.o.downstream ?? []).map((d) => d.stage)].map((s) => s.name);
  }

  /** For logs and the transaction metrics: `accumulate`, or `accumulate+postprocess+pack` when fused. */
  get stageName(): string {
    return this.stageNames.join('+');
  }

  /**
   * Connects, subscribes and joins the consumer group. A transient failure
   * (the broker restarting, a coordinator still loading) is retried with
   * backoff, with a fresh consumer each time, until it succeeds or `stop()`
   * is called; anything else is thrown.
   */
  async start(): Promise<void> {
    await this.loop.start(async () => {
      await this.admin?.close();
      this.admin = await this.o.client.admin();
    });
    const interval = this.o.tickIntervalMs ?? 1000;
    this.ticker = setInterval(() => void this.tasks.tickAll(), interval);
    this.lagTimer = setInterval(() => void this.lag.measure(), 5000);
    this.health.started();
  }

  /** The runner's health state now (see health.ts). */
  healthState(): RunnerHealth {
    return this.health.snapshot();
  }

  /** Open groups and similar gauges over all tasks (every stage of a fused chain). */
  gauges(): Record<string, number> {
    return this.tasks.gauges();
  }

  /**
   * A fatal error: this runner processes nothing more, /healthz says
   * `failed`, and the owner is told once (it stops the process, non-zero exit).
   * `e` keeps its code when it is ours and fatal; otherwise it becomes `code`.
   */
  private failFatal(e: unknown, code: CodeOfKind<'fatal'>, context: string): void {
    if (this.health.isFailed || this.stopping) return;
    const c = classify(e);
    const fatal =
      e instanceof RolloutStreamError && e.kind === 'fatal'
        ? e
        : new RolloutStreamError(c.kind === 'fatal' ? c.code : code, `${this.stageName}: ${context}: ${describeError(e)}`, { cause: e });
    this.health.fail(`[${fatal.code}] ${fatal.message}`);
    this.o.log.error(`${this.stageName}: fatal [${fatal.code}]: ${fatal.message}`);
    void this.tasks.dropAll();
    this.o.onFatal?.(fatal);
  }

  /** Graceful stop: finish the transaction in progress, leave the group, close producers. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.health.stopping();
    if (this.ticker) clearInterval(this.ticker);
    if (this.lagTimer) clearInterval(this.lagTimer);
    await this.loop.stop();
    await this.tasks.stop();
    await this.admin?.close().catch(() => undefined);
  }
}

/** A KafkaAdmin that forwards to the one `current` returns (connected by `start`, replaced on a retried start-up). */
function deferredAdmin(current: () => KafkaAdmin | null): KafkaAdmin {
  const now = (): KafkaAdmin => {
    const a = current();
    if (!a) throw new RolloutStreamError('broker_unavailable', 'the admin client is not connected yet', { retriable: true });
    return a;
  };
  return {
    partitionCount: (topic) => now().partitionCount(topic),
    listTopics: () => now().listTopics(),
    topicOffsets: (topic) => now().topicOffsets(topic),
    offsetsForTime: (topic, timeMs) => now().offsetsForTime(topic, timeMs),
    committedOffsets: (groupId, topic) => now().committedOffsets(groupId, topic),
    brokerCount: () => now().brokerCount(),
    describeGroup: (groupId) => now().describeGroup(groupId),
    topicConfigs: (topics, names) => now().topicConfigs(topics, names),
    close: async () => undefined,
  };
}

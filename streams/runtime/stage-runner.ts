/**
 * The exactly-once stage runner (SPEC §8, DESIGN.md). For each assigned input
 * partition it keeps a PartitionTask; each batch of records is processed and
 * its outputs, dead letters, changelog records and the next input offset are
 * written in one transaction of that partition's producer.
 *
 * Order of operations on a new partition, which is what makes a restart or a
 * rebalance safe: (1) fence — the task's transactional id completes or aborts
 * whatever the previous owner left open; (2) restore the changelog (stable now,
 * only this id writes it); (3) read the committed input offset (stable too)
 * and seek there if the consumer's position differs; (4) process.
 *
 * Failures follow the one error policy (error-policy.ts, errors/codes.ts):
 * fatal errors stop the runner (health `failed`, `onFatal`); a processor's
 * exception is counted per record (the runner outlives the rebuilt task),
 * the partition replayed one record per transaction to isolate it, and after
 * `runtime.poison.attempts` the record is dead-lettered as `processing_error`
 * or its partition stopped; anything else drops the task and rebuilds it
 * with backoff. The runner's state for /healthz is in `health` (health.ts).
 */
import type { Admin, Consumer, EachBatchPayload, Kafka, Message, Transaction } from 'kafkajs';
import type { DeadLetterRecord } from '../api/dead-letter-record.js';
import type { TopicCodec } from '../codecs/codec.js';
import { restoreChangelog } from './changelog-restore.js';
import { firstUndrained } from './fused-drain.js';
import { scanRanges, unconsumedRanges, type PartitionRange } from '../ops/topic-scan.js';
import { compressionType, type CompressionName } from '../kafka/kafkajs/compression.js';
import { PartitionTask } from './partition-task.js';
import type { RuntimeMetrics } from './metrics.js';
import { emptyOutput, type InputRecord, type PartitionProcessor, type Stage, type StageOutput } from '../api/stage.js';
import { splitBySize } from './transaction-writer.js';
import { RolloutStreamError, type CodeOfKind } from '../../errors/index.js';
import { isTransientKafkaError } from '../kafka/kafkajs/errors.js';
import { AttemptBook, classify, describeError, processingErrorLetter, ProcessingFailure, recordId, retryDelayMs, type PoisonPolicy } from './error-policy.js';
import { HealthTracker, type RunnerHealth } from './health.js';

export { isTransientKafkaError } from '../kafka/kafkajs/errors.js';

export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

export interface StageRunnerOptions {
  kafka: Kafka;
  stage: Stage;
  /** Consumer group id; also the transactional-id prefix. */
  groupId: string;
  deadLetterTopic: string;
  deadLetterCodec: TopicCodec<'deadLetter'>;
  maxMessageBytes: number;
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
   * being processed, and each downstream group's offset past those records is
   * committed in the same transaction, so separate instances of those stages
   * started later begin exactly where the fused steps stopped.
   */
  downstream?: Array<{ stage: Stage; groupId: string }>;
  /** What to do with a record whose processing keeps throwing (runtime.poison; default: dead-letter after 3 attempts, 1 s backoff). */
  poison?: PoisonPolicy;
  /** Called once when the runner hits a fatal error (the process should stop with a non-zero exit). */
  onFatal?: (e: RolloutStreamError) => void;
}

/** How a chain node runs in one transaction: record by record (isolating), and the failing records dead-lettered in it. */
interface NodeContext {
  isolate: boolean;
  settled: string[];
}

/** `isolating` mark of a partition whose timer tick failed downstream: no input range, the next tick and batch go record by record. */
const TICK_ISOLATION = -1n;

/** What one transaction will count in /metrics once it committed. */
interface StepTally {
  stage: string;
  out: StageOutput;
  messages: StageOutput['messages'];
  deadLetters: DeadLetterRecord[];
}

/** Start-up steps (connect, join) taking longer than this are reported, and again at each multiple. */
const SLOW_START_WARN_MS = 15_000;
/** A stage with lag that has committed nothing for this long is reported as stalled (then at most this often). */
const STALL_WARN_MS_DEFAULT = 30_000;

/** Start-up retries a transient failure after this long, doubling up to START_RETRY_MAX_MS. */
const START_RETRY_MS = 1_000;
const START_RETRY_MAX_MS = 15_000;

export class StageRunner {
  private consumer: Consumer;
  private readonly admin: Admin;
  private readonly tasks = new Map<number, PartitionTask>();
  private assigned = new Set<number>();
  private restoring: Promise<void> | null = null;
  private preparing = false;
  private ticker: NodeJS.Timeout | null = null;
  private lagTimer: NodeJS.Timeout | null = null;
  private stopping = false;
  /** When this runner last committed a transaction (or started). */
  private lastProgressAt = Date.now();
  private lastStallWarnAt = 0;
  /** This runner's state for /healthz. */
  readonly health: HealthTracker;
  /** Failures per record (error policy): kept by the runner, so they outlive the rebuilt tasks. */
  private readonly attempts: AttemptBook;
  /** Partition → last offset of a batch that failed in a processor: replayed one record per transaction up to there. */
  private readonly isolating = new Map<number, bigint>();
  /** Partitions paused by `runtime.poison.policy: stop`. */
  private readonly stoppedParts = new Set<number>();
  /** Consecutive failed transactions per partition (not counting poison), for the backoff. */
  private readonly failures = new Map<number, number>();
  /** Consecutive restores a processor threw in. */
  private restoreFailures = 0;

  constructor(private readonly o: StageRunnerOptions) {
    this.consumer = this.newConsumer();
    this.admin = o.kafka.admin();
    this.attempts = new AttemptBook(o.poison ?? { policy: 'dead-letter', attempts: 3, backoff_ms: 1_000 });
    this.health = new HealthTracker(this.stageName, o.stallWarnMs ?? STALL_WARN_MS_DEFAULT);
  }

  private newConsumer(): Consumer {
    const o = this.o;
    return o.kafka.consumer({
      groupId: o.groupId,
      readUncommitted: false,
      maxBytes: o.maxInflightBytes,
      maxBytesPerPartition: Math.max(o.maxMessageBytes + 1024, Math.floor(o.maxInflightBytes / 4)),
      sessionTimeout: o.sessionTimeoutMs,
      rebalanceTimeout: Math.max(o.sessionTimeoutMs, 30_000),
      heartbeatInterval: Math.max(500, Math.floor(o.sessionTimeoutMs / 10)),
      maxWaitTimeInMs: 50,
      allowAutoTopicCreation: false,
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
    await this.retryTransient('start-up', async () => {
      await this.slowStep('connecting the admin client', this.admin.connect());
      await this.startConsumer();
    });
    const interval = this.o.tickIntervalMs ?? 1000;
    this.ticker = setInterval(() => void this.tickAll(), interval);
    this.lagTimer = setInterval(() => void this.measureLag(), 5000);
    this.health.started();
  }

  /** The runner's health state now (see health.ts). */
  healthState(): RunnerHealth {
    return this.health.snapshot();
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
    void this.dropAllTasks();
    this.o.onFatal?.(fatal);
  }

  private async startConsumer(): Promise<void> {
    const consumer = this.consumer;
    await this.slowStep('connecting the consumer', consumer.connect());
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      if (consumer !== this.consumer) return;
      const parts = e.payload.memberAssignment[this.o.stage.inputTopic] ?? [];
      void this.onAssignment(new Set(parts));
    });
    consumer.on(consumer.events.CRASH, (e) => {
      if (consumer !== this.consumer || this.stopping) return;
      if (e.payload.restart) {
        this.o.log.error(`${this.stageName}: consumer crashed: ${e.payload.error.message}; kafkajs restarts it`);
        void this.dropAllTasks().then(() => this.prepareSoon(500));
        return;
      }
      // kafkajs gives up on this consumer: without a new one the stage would sit silent.
      this.o.log.error(`${this.stageName}: consumer crashed and kafkajs will not restart it: ${e.payload.error.message}; starting a new consumer`);
      void this.replaceConsumer();
    });
    await this.slowStep('subscribing', consumer.subscribe({ topic: this.o.stage.inputTopic, fromBeginning: true }));
    // run() returns once the consumer has joined its group.
    await this.slowStep(
      `joining consumer group ${this.o.groupId}`,
      consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: 4,
        eachBatch: (payload) => this.onBatch(payload),
      }),
    );
  }

  /** After a crash kafkajs does not recover from: drop the tasks, and join again with a new consumer. */
  private async replaceConsumer(): Promise<void> {
    await this.dropAllTasks();
    this.assigned = new Set();
    await this.renewConsumer();
    // The start-up rule: transient errors are retried, anything else is fatal (not a loop).
    await this.retryTransient('restarting the consumer', () => this.startConsumer()).catch((e: Error) => {
      this.o.log.error(`${this.stageName}: could not restart the consumer: ${e.message}`);
      this.failFatal(e, 'consumer_failed', 'could not restart the consumer');
    });
  }

  /** Puts a new consumer in place of the current one (events of the old one are ignored from now on) and disconnects the old one. */
  private async renewConsumer(): Promise<void> {
    const old = this.consumer;
    this.consumer = this.newConsumer();
    await old.disconnect().catch(() => undefined);
  }

  /**
   * Runs `fn` until it succeeds. After a failure the consumer is replaced by
   * a new one (a half-started kafkajs consumer is not reused) and `fn` runs
   * again after a backoff, if the error is transient and the runner is not
   * stopping.
   */
  private async retryTransient(what: string, fn: () => Promise<void>): Promise<void> {
    for (let attempt = 1, wait = START_RETRY_MS; ; attempt++, wait = Math.min(wait * 2, START_RETRY_MAX_MS)) {
      try {
        await fn();
        if (attempt > 1) this.o.log.info(`${this.stageName}: ${what} succeeded on attempt ${attempt}`);
        return;
      } catch (e) {
        await this.renewConsumer();
        if (this.stopping || !isTransientKafkaError(e)) throw e;
        this.o.log.warn(`${this.stageName}: ${what} failed (attempt ${attempt}): ${(e as Error).message}; retrying in ${wait / 1000} s`);
        await sleep(wait);
        if (this.stopping) throw e;
      }
    }
  }

  /** Awaits `p`, warning every 15 s that start-up is still waiting on `what`, so a stall is never silent. */
  private async slowStep<T>(what: string, p: Promise<T>): Promise<T> {
    const t0 = Date.now();
    const timer = setInterval(() => {
      this.o.log.warn(`${this.stageName}: start-up still ${what} after ${Math.round((Date.now() - t0) / 1000)} s`);
    }, SLOW_START_WARN_MS);
    try {
      return await p;
    } finally {
      clearInterval(timer);
    }
  }

  /**
   * Consumer lag of this instance: end offsets minus the group's committed
   * offsets, over the input partitions assigned to this instance only (each
   * instance of a group reports its own share, so the gauge sums to the
   * group's lag and one instance does not warn of another's backlog).
   */
  private async measureLag(): Promise<void> {
    try {
      let lag = 0n;
      // A transactional writer leaves a commit marker after its records: one
      // unconsumed offset may be only that; two or more hold a record.
      let behind = false;
      const behindOn: number[] = [];
      for (const r of await unconsumedRanges(this.admin, this.o.stage.inputTopic, this.o.groupId)) {
        if (!this.assigned.has(r.partition)) continue;
        const n = BigInt(r.end) - BigInt(r.start);
        lag += n;
        if (n >= 2n) {
          behind = true;
          behindOn.push(r.partition);
        }
      }
      this.o.metrics.consumerLag.set({ stage: this.stageName }, Number(lag));
      const now = Date.now();
      const stallMs = this.o.stallWarnMs ?? STALL_WARN_MS_DEFAULT;
      const stalled = behind && now - this.lastProgressAt > stallMs;
      this.health.setStalled(
        stalled ? `${lag} input records behind and nothing committed for ${Math.round((now - this.lastProgressAt) / 1000)} s` : null,
        behindOn.sort((a, b) => a - b),
      );
      if (stalled && now - this.lastStallWarnAt > stallMs) {
        this.lastStallWarnAt = now;
        const tasks = [...this.tasks.values()].map((t) => `${t.partition}${t.closed ? ' closed' : ''}`);
        this.o.log.warn(
          `${this.stageName}: ${lag} input records behind and nothing committed for ${Math.round((now - this.lastProgressAt) / 1000)} s ` +
            `(assigned partitions [${[...this.assigned].sort().join(',')}], tasks [${tasks.join(', ')}])`,
        );
      }
    } catch {
      /* the broker is unavailable; the next round retries */
    }
  }

  /** Graceful stop: finish the transaction in progress, leave the group, close producers. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.health.stopping();
    if (this.ticker) clearInterval(this.ticker);
    if (this.lagTimer) clearInterval(this.lagTimer);
    await this.consumer.disconnect().catch(() => undefined);
    await this.dropAllTasks();
    await this.admin.disconnect().catch(() => undefined);
  }

  /** Open groups and similar gauges over all tasks. */
  gauges(): Record<string, number> {
    const sum: Record<string, number> = {};
    for (const t of this.tasks.values()) {
      for (const [k, v] of Object.entries(t.processor.gauges?.() ?? {})) sum[k] = (sum[k] ?? 0) + v;
    }
    return sum;
  }

  private async onAssignment(parts: Set<number>): Promise<void> {
    const before = this.assigned;
    this.assigned = parts;
    for (const p of before) {
      if (parts.has(p)) continue;
      // Whatever was wrong with it is the next owner's to count and report.
      this.health.released(p);
      this.stoppedParts.delete(p);
      this.isolating.delete(p);
      this.failures.delete(p);
      this.attempts.clearPartition(this.o.stage.name, p);
    }
    for (const [p, task] of this.tasks) {
      if (!parts.has(p)) {
        this.tasks.delete(p);
        await task.exclusive(() => task.close());
        this.o.log.info(`${this.stageName}: partition ${p} revoked`);
      }
    }
    // Fence and restore right away rather than on the first batch, so the
    // first records of a new partition do not wait for the restore.
    this.prepareSoon(0);
  }

  /**
   * (Re)creates the tasks of every assigned partition that has none, in the
   * background, retrying with backoff while the broker is unavailable. Fencing
   * promptly matters: a transaction left open by a dropped task holds the
   * stable offset of its output partitions (read_committed readers downstream
   * see nothing past it) until the same transactional id initializes again.
   */
  private prepareSoon(delayMs: number): void {
    if (this.preparing || this.stopping) return;
    this.preparing = true;
    setTimeout(() => {
      this.preparing = false;
      const missing = [...this.assigned].find((p) => !this.tasks.has(p) && !this.stoppedParts.has(p));
      if (missing === undefined || this.stopping) return;
      this.taskFor(missing).catch((e: Error) => {
        this.o.log.warn(`${this.stageName}: preparing partitions failed: ${e.message}; retrying`);
        this.prepareSoon(Math.min(Math.max(delayMs * 2, 250), 5_000));
      });
    }, delayMs);
  }

  private async dropAllTasks(): Promise<void> {
    const tasks = [...this.tasks.values()];
    this.tasks.clear();
    await Promise.all(tasks.map((t) => t.exclusive(() => t.close())));
  }

  private async dropTask(task: PartitionTask): Promise<void> {
    if (this.tasks.get(task.partition) === task) this.tasks.delete(task.partition);
    await task.close();
  }

  /**
   * The ready task of a partition: created, fenced and restored on first use;
   * null when the partition is not (or no longer) assigned to this instance.
   */
  private async taskFor(partition: number): Promise<PartitionTask | null> {
    for (;;) {
      const existing = this.tasks.get(partition);
      if (existing) return existing;
      if (!this.assigned.has(partition) || this.stopping || this.stoppedParts.has(partition) || this.health.isFailed) return null;
      // Restore all not-yet-restored assigned partitions in one changelog pass.
      if (!this.restoring) this.restoring = this.createTasks().finally(() => (this.restoring = null));
      await this.restoring;
    }
  }

  private async createTasks(): Promise<void> {
    const parts = [...new Set([...this.assigned].filter((p) => !this.tasks.has(p) && !this.stoppedParts.has(p)))];
    const fresh: PartitionTask[] = [];
    this.health.restoring(true);
    try {
      await this.openAndRestore(parts, fresh);
    } catch (e) {
      // Half-built tasks hold connected producers: close them before the retry builds new ones.
      await Promise.all(fresh.map((t) => t.close()));
      this.noteRestoreFailure(e, parts);
      throw e;
    } finally {
      this.health.restoring(false);
    }
    this.restoreFailures = 0;
    for (const t of fresh) {
      // A rebalance during the restore may have taken the partition away.
      if (this.assigned.has(t.partition) && !this.stopping) {
        this.tasks.set(t.partition, t);
        this.health.rebuilt(t.partition);
      } else await t.close();
    }
  }

  /**
   * A restore the cluster interrupted is retried as long as it takes; one in
   * which a processor threw (a changelog it cannot apply) would throw again
   * every time: after `runtime.poison.attempts` of those in a row it is fatal
   * (`restore_failed`). An authorization failure is fatal at once.
   */
  private noteRestoreFailure(e: unknown, parts: number[]): void {
    const c = classify(e);
    if (c.kind === 'fatal') {
      this.failFatal(e, 'restore_failed', `restoring partitions [${parts.join(',')}]`);
      return;
    }
    if (c.kind !== 'poison') return;
    this.restoreFailures += 1;
    const limit = this.attempts.policy.attempts;
    this.o.log.warn(`${this.stageName}: restoring partitions [${parts.join(',')}] failed (attempt ${this.restoreFailures} of ${limit}): ${describeError((e as ProcessingFailure).cause)}`);
    if (this.restoreFailures >= limit) {
      this.failFatal(
        new RolloutStreamError('restore_failed', `${this.stageName}: restoring partitions [${parts.join(',')}] failed ${this.restoreFailures} times: ${describeError((e as ProcessingFailure).cause)}`, { cause: e }),
        'restore_failed',
        'restore',
      );
    }
  }

  /** Opens (fences) a task per partition into `fresh`, then restores their changelog partitions. */
  private async openAndRestore(parts: number[], fresh: PartitionTask[]): Promise<void> {
    for (const p of parts) {
      const task = new PartitionTask(
        this.o.kafka,
        p,
        `${this.o.groupId}.${this.o.stage.inputTopic}.${p}`,
        this.o.stage.createProcessor(p),
        this.o.transactionTimeoutMs,
        (this.o.downstream ?? []).map((d) => d.stage.createProcessor(p)),
      );
      fresh.push(task);
      await task.open();
      // An empty transaction makes the coordinator fence the previous owner
      // and complete its open transaction before we read offsets or state.
      const tx = await task.producer.transaction();
      await tx.abort();
    }
    const { changelogTopic } = this.o.stage;
    if (changelogTopic && fresh.length > 0) {
      const byPartition = new Map(fresh.map((t) => [t.partition, t]));
      // A processor that cannot apply a record is told apart from the cluster
      // failing the read (error policy): its first exception ends the restore
      // as a ProcessingFailure once the read is done.
      let applyError: ProcessingFailure | null = null;
      const stats = await restoreChangelog(
        this.o.kafka,
        this.admin,
        changelogTopic,
        [...byPartition.keys()],
        async (p, record) => {
          if (applyError) return;
          try {
            await byPartition.get(p)!.processor.restore!(record);
          } catch (e) {
            applyError = new ProcessingFailure(this.o.stage.name, [], e);
          }
        },
        this.o.maxInflightBytes,
      );
      if (applyError) throw applyError;
      this.o.log.info(
        `${this.stageName}: restored partitions [${[...byPartition.keys()].join(',')}] from ${changelogTopic}: ` +
          `${stats.records} records, ${(stats.bytes / 1e6).toFixed(1)} MB in ${stats.ms} ms`,
      );
      this.o.metrics.restoreSeconds.observe({ stage: this.stageName }, stats.ms / 1000);
      await this.readBackInputs(fresh);
    }
    await this.checkDrained(fresh.map((t) => t.partition));
  }

  /**
   * Fused mode takes over partitions only when the separate downstream stages
   * have processed everything on them: records they left behind would be
   * skipped by the offsets the fused steps commit. Only this task's
   * transactional id writes those partitions in fused mode, and it was just
   * fenced, so nothing moves meanwhile. Throws (the tasks are retried with
   * backoff) naming the partition.
   */
  private async checkDrained(partitions: number[]): Promise<void> {
    const downstream = this.o.downstream ?? [];
    if (downstream.length === 0 || partitions.length === 0) return;
    const left = await firstUndrained(
      this.o.kafka,
      this.admin,
      downstream.map((d) => ({ topic: d.stage.inputTopic, groupId: d.groupId })),
      partitions,
    );
    if (left !== null) {
      throw new RolloutStreamError(
        'partition_not_drained',
        `${left} holds records its separate stage has not processed; the fused runner takes a partition over only once ` +
          `it is drained (start it alone: it drains first; or run the separate stages until their lag is 0)`,
      );
    }
  }

  /**
   * Second half of a restore: the changelog references pending rows by their
   * input offset, so read those records back from the input partitions (one
   * bounded read_committed scan over every restored partition) and hand them
   * to the processors.
   */
  private async readBackInputs(fresh: PartitionTask[]): Promise<void> {
    const needs = new Map<number, Set<string>>();
    const ranges: PartitionRange[] = [];
    for (const t of fresh) {
      const offsets = t.processor.restoreNeeds?.() ?? [];
      if (offsets.length === 0) continue;
      needs.set(t.partition, new Set(offsets));
      let lo = BigInt(offsets[0]!);
      let hi = lo;
      for (const o of offsets) {
        const v = BigInt(o);
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
      ranges.push({ topic: this.o.stage.inputTopic, partition: t.partition, start: lo.toString(), end: (hi + 1n).toString() });
    }
    const found = new Map<number, Map<string, Buffer>>();
    if (ranges.length > 0) {
      const t0 = Date.now();
      const scan = await scanRanges(this.o.kafka, ranges, (r) => {
        if (r.value && needs.get(r.partition)?.has(r.offset)) {
          let m = found.get(r.partition);
          if (!m) found.set(r.partition, (m = new Map()));
          m.set(r.offset, Buffer.from(r.value));
        }
      });
      if (!scan.complete) throw new RolloutStreamError('restore_stalled', `reading back pending rows from ${this.o.stage.inputTopic} stalled on ${scan.unfinished.join(', ')}`);
      this.o.log.info(`${this.stageName}: read back ${scan.records} input records for ${[...needs.values()].reduce((n, x) => n + x.size, 0)} pending rows in ${Date.now() - t0} ms`);
    }
    for (const t of fresh) {
      if (!t.processor.finishRestore) continue;
      let missing: number;
      try {
        ({ missing } = await t.processor.finishRestore(found.get(t.partition) ?? new Map()));
      } catch (e) {
        throw new ProcessingFailure(this.o.stage.name, [], e);
      }
      if (missing > 0) {
        this.o.log.warn(
          `${this.stageName}: partition ${t.partition}: ${missing} pending rows are no longer in ${this.o.stage.inputTopic} ` +
            `(its retention is shorter than groups stay open); their groups will dead-letter as incomplete`,
        );
      }
    }
  }

  private async committedOffset(partition: number): Promise<string | null> {
    const res = await this.admin.fetchOffsets({ groupId: this.o.groupId, topics: [this.o.stage.inputTopic] });
    const p = res[0]?.partitions.find((x) => x.partition === partition);
    return p && p.offset !== '-1' ? p.offset : null;
  }

  private async onBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    if (this.stopping || this.health.isFailed || batch.messages.length === 0) return;
    if (this.stoppedParts.has(batch.partition)) {
      this.pause(batch.partition); // a rebalance may have resumed it
      return;
    }
    let task: PartitionTask | null;
    try {
      task = await this.taskFor(batch.partition);
    } catch (e) {
      this.o.log.warn(`${this.stageName}: partition ${batch.partition} not ready: ${(e as Error).message}`);
      await sleep(500);
      throw e;
    }
    if (!task) return; // revoked meanwhile: the new owner reads from the committed offset
    const t = task;
    await t.exclusive(async () => {
      if (t.closed || !isRunning() || isStale()) return;
      if (!task.positionChecked) {
        const committed = await this.committedOffset(batch.partition);
        task.positionChecked = true;
        if (committed !== null && committed !== batch.firstOffset()) {
          this.o.log.info(`${this.stageName}: partition ${batch.partition} resumes at committed offset ${committed}`);
          this.consumer.seek({ topic: batch.topic, partition: batch.partition, offset: committed });
          return;
        }
      }
      const records: InputRecord[] = batch.messages.map((m: Message & { offset: string; timestamp: string }) => ({
        topic: batch.topic,
        partition: batch.partition,
        offset: m.offset,
        key: (m.key as Buffer | null) ?? null,
        value: (m.value as Buffer | null) ?? null,
        timestamp: Number(m.timestamp),
      }));
      // After a processor failed on a batch, its records are replayed one per
      // transaction up to that batch's end: the failing one is then known.
      const isolateTo = this.isolating.get(batch.partition);
      const steps = isolateTo !== undefined && BigInt(records[0]!.offset) <= isolateTo ? records.map((r) => [r]) : [records];
      for (const step of steps) {
        if (t.closed || !isRunning() || isStale()) return;
        const start = performance.now();
        const last = step[step.length - 1]!.offset;
        try {
          const ctx = this.nodeContext(t.partition);
          const out = await this.runNode(this.o.stage, t.processor, step, false, ctx);
          await this.commit(t, out, step, (BigInt(last) + 1n).toString(), ctx);
        } catch (e) {
          await this.onFailure(t, e, batch.topic, records);
          return;
        }
        resolveOffset(last);
        if (isolateTo !== undefined && BigInt(last) >= isolateTo) this.isolating.delete(batch.partition);
        this.o.metrics.recordsIn.inc({ stage: this.o.stage.name }, step.length);
        this.o.metrics.batchSeconds.observe({ stage: this.stageName }, (performance.now() - start) / 1000);
        if (steps.length > 1) await heartbeat().catch(() => undefined);
      }
      await heartbeat().catch(() => undefined);
    });
  }

  private async tickAll(): Promise<void> {
    if (this.stopping || this.health.isFailed) return;
    for (const task of this.tasks.values()) {
      if (!task.processor.tick) continue;
      await task.exclusive(async () => {
        if (task.closed || this.stopping) return;
        try {
          const ctx = this.nodeContext(task.partition);
          let out: StageOutput;
          try {
            out = await task.processor.tick!(Date.now());
          } catch (e) {
            throw new ProcessingFailure(this.o.stage.name, [], e);
          }
          if (out.messages.length + out.deadLetters.length + out.changelog.length > 0) {
            await this.commit(task, out, [], null, ctx);
            if (this.isolating.get(task.partition) === TICK_ISOLATION) this.isolating.delete(task.partition);
          }
        } catch (e) {
          await this.onFailure(task, e, this.o.stage.inputTopic, []);
        }
      });
    }
  }

  private nodeContext(partition: number): NodeContext {
    return { isolate: this.isolating.has(partition), settled: [] };
  }

  /**
   * Runs one chain node's processor on `records`. Normally one call for all
   * of them; record by record while the partition is being isolated or when
   * one of the records failed before, so that a record whose failures reached
   * `runtime.poison.attempts` gets the policy instead of another call
   * (dead-letter: a `processing_error` dead letter in this transaction).
   * A processor's exception comes out as a ProcessingFailure naming the
   * record(s) of the failing call.
   */
  private async runNode(node: Stage, processor: PartitionProcessor, records: InputRecord[], byKey: boolean, ctx: NodeContext): Promise<StageOutput> {
    const now = Date.now();
    const head = this.o.stage.name;
    const idOf = (r: InputRecord) => recordId(head, node.name, r, byKey);
    const perRecord = ctx.isolate || (this.attempts.size > 0 && records.some((r) => this.attempts.failures(idOf(r)) > 0));
    if (!perRecord || records.length === 0) {
      try {
        return await processor.process(records, now);
      } catch (e) {
        throw new ProcessingFailure(node.name, records, e);
      }
    }
    const out = emptyOutput();
    for (const r of records) {
      const id = idOf(r);
      const verdict = this.attempts.verdict(id);
      if (verdict === 'dead-letter') {
        out.deadLetters.push(processingErrorLetter(node.name, r, this.attempts.lastError(id), this.attempts.failures(id), now));
        ctx.settled.push(id);
        const also = await processor.poisoned?.(r, now).catch((e: unknown) => {
          this.o.log.warn(`${this.stageName}: ${node.name}: reporting a dead-lettered record failed: ${describeError(e)}`);
          return null;
        });
        if (also) merge(out, also);
        continue;
      }
      if (verdict === 'stop') throw new ProcessingFailure(node.name, [r], this.attempts.lastError(id));
      let o: StageOutput;
      try {
        o = await processor.process([r], now);
      } catch (e) {
        throw new ProcessingFailure(node.name, [r], e);
      }
      merge(out, o);
    }
    return out;
  }

  /**
   * After a failed batch or tick (the transaction, if any, is aborted):
   * fatal errors stop the runner; a processor's exception goes through the
   * per-record policy; anything else (the cluster, fencing, a transaction
   * that failed for a reason nobody coded) drops the task and rebuilds it,
   * retrying with backoff (fenced: at once).
   */
  private async onFailure(task: PartitionTask, e: unknown, topic: string, batch: InputRecord[]): Promise<void> {
    const c = classify(e);
    const p = task.partition;
    const fenced = c.code === 'producer_fenced';
    this.o.metrics.transactionFailures.inc({ stage: this.stageName, fenced: String(fenced) });
    if (c.kind === 'fatal') {
      this.failFatal(e, 'transaction_state', `partition ${p}`);
      return;
    }
    if (c.kind === 'poison' && e instanceof ProcessingFailure) {
      await this.onPoison(task, e, topic, batch);
      return;
    }
    const n = (this.failures.get(p) ?? 0) + 1;
    this.failures.set(p, n);
    const wait = fenced ? 100 : retryDelayMs(n);
    const message = (e as Error).message;
    this.o.log.warn(
      `${this.stageName}: partition ${p}: ${fenced ? 'fenced by a newer owner' : 'transaction failed'} [${c.code}]: ${message}; rebuilding the task` +
        (fenced ? '' : ` in ${wait / 1000} s`),
    );
    this.health.rebuilding(p, `[${c.code}] ${message}`, fenced);
    await this.recover(task, topic, wait);
  }

  /**
   * A processor threw. With one record in the failing call, that record's
   * failures are counted (they outlive the task); at the limit the policy
   * applies: `dead-letter` on the replay, `stop` at once. With several, the
   * partition is replayed one record per transaction to find it.
   */
  private async onPoison(task: PartitionTask, f: ProcessingFailure, topic: string, batch: InputRecord[]): Promise<void> {
    const p = task.partition;
    const head = this.o.stage.name;
    const policy = this.attempts.policy;
    const lastOfBatch = batch.length > 0 ? BigInt(batch[batch.length - 1]!.offset) : TICK_ISOLATION;
    const isolateTo = this.isolating.get(p);
    if (isolateTo === undefined || lastOfBatch > isolateTo) this.isolating.set(p, lastOfBatch);
    const r = f.records.length === 1 ? f.records[0]! : null;
    let wait = policy.backoff_ms;
    if (r || f.records.length === 0) {
      const id = r ? recordId(head, f.stage, r, f.stage !== head) : `${head}/${p}/${f.stage}/tick`;
      const { failures, exhausted, backoffMs } = this.attempts.fail(id, f.cause);
      const where = r ? `${r.topic} partition ${r.partition} offset ${r.offset}${r.key ? ` (key ${r.key.toString('utf8')})` : ''}` : 'its timer tick';
      this.o.log.warn(`${this.stageName}: ${f.stage} failed on ${where} (attempt ${failures} of ${policy.attempts}): ${describeError(f.cause)}`);
      // A tick has no record to dead-letter: it stops the partition under either policy.
      if (exhausted && (policy.policy === 'stop' || !r)) {
        await this.stopPartition(task, `${f.stage} failed ${failures} time(s) on ${where}: ${describeError(f.cause)}`);
        return;
      }
      if (exhausted) this.o.log.warn(`${this.stageName}: ${f.stage}: dead-lettering ${where} as processing_error (runtime.poison.policy: dead-letter)`);
      wait = backoffMs;
    } else {
      this.o.log.warn(
        `${this.stageName}: ${f.stage} failed on a batch of ${f.records.length} records on partition ${p}: ${describeError(f.cause)}; ` +
          `replaying them one per transaction to find the failing one`,
      );
    }
    this.health.rebuilding(p, `[processing_error] ${describeError(f.cause)}`, false);
    await this.recover(task, topic, wait);
  }

  /** `runtime.poison.policy: stop`: the partition is paused (nothing is committed past the record) and /healthz says so. */
  private async stopPartition(task: PartitionTask, reason: string): Promise<void> {
    const p = task.partition;
    this.stoppedParts.add(p);
    this.isolating.delete(p);
    this.health.stoppedByPolicy(p, reason);
    this.o.log.error(`${this.stageName}: partition ${p} stopped by runtime.poison.policy (stop): ${reason}`);
    await this.dropTask(task);
    this.pause(p);
  }

  private pause(partition: number): void {
    try {
      this.consumer.pause([{ topic: this.o.stage.inputTopic, partitions: [partition] }]);
    } catch {
      /* not subscribed at the moment (rebalancing): onBatch pauses it when it comes back */
    }
  }

  /**
   * After a failure the in-memory state may be ahead of what was committed:
   * drop the task and go back to the committed offset; the next batch builds a
   * fresh task (fence, restore) after `waitMs`. A long wait pauses the
   * partition instead of holding the batch (kafkajs heartbeats between batches).
   */
  private async recover(task: PartitionTask, topic: string, waitMs: number): Promise<void> {
    await this.dropTask(task);
    const p = task.partition;
    if (this.stopping || !this.assigned.has(p)) return;
    this.prepareSoon(waitMs);
    if (waitMs <= 1_000) await sleep(waitMs);
    else {
      const consumer = this.consumer;
      this.pause(p);
      setTimeout(() => {
        if (consumer !== this.consumer || this.stopping || this.stoppedParts.has(p)) return;
        try {
          consumer.resume([{ topic: this.o.stage.inputTopic, partitions: [p] }]);
        } catch {
          /* rebalancing: a new assignment fetches anyway */
        }
      }, waitMs).unref();
    }
    const committed = await this.committedOffset(p).catch(() => null);
    try {
      this.consumer.seek({ topic, partition: p, offset: committed ?? '0' });
    } catch {
      /* the consumer is rebalancing; it will fetch from the committed offset */
    }
  }

  /**
   * Writes one step's outputs (and the next input offset, when given) in one
   * transaction. In fused mode the downstream stages run inside it on the
   * records just written to their input topics (with their real offsets), and
   * their groups' offsets past those records join the transaction.
   */
  private async commit(task: PartitionTask, out: StageOutput, sources: InputRecord[], nextOffset: string | null, ctx: NodeContext): Promise<void> {
    const t0 = performance.now();
    const chain = this.o.downstream ?? [];
    const offsets: Array<{ stage: string; groupId: string; topic: string; offset: string }> = [];
    if (nextOffset !== null) offsets.push({ stage: this.o.stage.name, groupId: this.o.groupId, topic: this.o.stage.inputTopic, offset: nextOffset });
    const tallies: StepTally[] = [];
    const inputs: Array<[string, number]> = [];
    const phases: Array<[stage: string, phase: string, seconds: number]> = [];
    let lap = performance.now();
    const phase = (stage: string, name: string) => {
      const now = performance.now();
      phases.push([stage, name, (now - lap) / 1000]);
      lap = now;
    };
    const tx = await task.producer.transaction();
    try {
      let step = { stage: this.o.stage, out, sources };
      for (let i = 0; ; i++) {
        const next = chain[i];
        const written = await this.sendStep(tx, task.partition, step, next?.stage.inputTopic, tallies);
        phase(step.stage.name, 'send');
        if (!next || written.length === 0) break;
        offsets.push({
          stage: next.stage.name,
          groupId: next.groupId,
          topic: next.stage.inputTopic,
          offset: (BigInt(written[written.length - 1]!.offset) + 1n).toString(),
        });
        inputs.push([next.stage.name, written.length]);
        step = { stage: next.stage, out: await this.runNode(next.stage, task.downstream[i]!, written, true, ctx), sources: written };
        phase(next.stage.name, 'process');
      }
      for (const o of offsets) {
        await tx.sendOffsets({ consumerGroupId: o.groupId, topics: [{ topic: o.topic, partitions: [{ partition: task.partition, offset: o.offset }] }] });
        phase(o.stage, 'send_offsets');
      }
      await tx.commit();
      phase(this.stageName, 'commit');
    } catch (e) {
      if (tx.isActive()) await tx.abort().catch(() => undefined);
      throw e;
    }
    this.lastProgressAt = Date.now();
    this.failures.delete(task.partition);
    this.health.setStalled(null);
    for (const id of ctx.settled) this.attempts.clear(id);
    this.o.metrics.transactionSeconds.observe({ stage: this.stageName }, (performance.now() - t0) / 1000);
    for (const [stage, name, seconds] of phases) this.o.metrics.transactionPhaseSeconds.observe({ stage, phase: name }, seconds);
    for (const [stage, n] of inputs) this.o.metrics.recordsIn.inc({ stage }, n);
    for (const t of tallies) {
      for (const m of t.messages) this.o.metrics.recordsOut.inc({ stage: t.stage, topic: m.topic });
      for (const d of t.deadLetters) this.o.metrics.deadLetters.inc({ stage: t.stage, reason: d.reason });
      for (const [k, v] of Object.entries(t.out.counters ?? {})) this.o.metrics.events.inc({ stage: t.stage, event: k }, v);
    }
  }

  /**
   * Sends one stage's outputs inside `tx`. Records for `pinTopic` (fused mode:
   * the next stage's input) go to partition `partition` and come back as that
   * stage's input records, with the offsets the broker gave them.
   */
  private async sendStep(
    tx: Transaction,
    partition: number,
    step: { stage: Stage; out: StageOutput; sources: InputRecord[] },
    pinTopic: string | undefined,
    tallies: StepTally[],
  ): Promise<InputRecord[]> {
    const { stage, out, sources } = step;
    const { messages, deadLetters } = this.enforceSizes(out, sources, stage.name);
    tallies.push({ stage: stage.name, out, messages, deadLetters });
    const changelogTopic = stage.changelogTopic;
    const all: Array<{ topic: string; message: { key: string; value: Buffer | null; partition?: number } }> = [
      ...messages.map((m) => ({ topic: m.topic, message: m.topic === pinTopic ? { key: m.key, value: m.value, partition } : { key: m.key, value: m.value } })),
      ...deadLetters.map((d) => ({ topic: this.o.deadLetterTopic, message: { key: d.group_id ?? '', value: this.o.deadLetterCodec.encode(d) } })),
      ...(changelogTopic ? out.changelog.map((c) => ({ topic: changelogTopic, message: { key: c.key, value: c.value, partition } })) : []),
    ];
    const written: InputRecord[] = [];
    for (const chunk of splitBySize(all, this.o.maxMessageBytes)) {
      const meta = await tx.sendBatch({ topicMessages: groupByTopic(chunk), compression: compressionType(this.o.compression ?? 'none') });
      if (pinTopic === undefined) continue;
      const pinned = chunk.filter((c) => c.topic === pinTopic);
      if (pinned.length === 0) continue;
      const at = meta.find((m) => m.topicName === pinTopic && m.partition === partition);
      if (!at || at.baseOffset === undefined) throw new Error(`the broker returned no offset for ${pinTopic} partition ${partition}`);
      const base = BigInt(at.baseOffset);
      const now = Date.now();
      pinned.forEach((c, i) =>
        written.push({ topic: pinTopic, partition, offset: (base + BigInt(i)).toString(), key: Buffer.from(c.message.key), value: c.message.value, timestamp: now }),
      );
    }
    return written;
  }

  /**
   * A record over the size limit would fail the whole transaction and stall
   * the partition; it becomes a `record_too_large` dead letter instead (and a
   * dead letter that is itself too large keeps coordinates, not payloads).
   */
  private enforceSizes(
    out: StageOutput,
    sources: InputRecord[],
    stageName: string,
  ): { messages: StageOutput['messages']; deadLetters: DeadLetterRecord[] } {
    const limit = this.o.maxMessageBytes - 4096;
    const messages: StageOutput['messages'] = [];
    const deadLetters = [...out.deadLetters];
    for (const m of out.messages) {
      if (m.value.length <= limit) {
        messages.push(m);
        continue;
      }
      deadLetters.push({
        reason: 'record_too_large',
        message: `${stageName} output for ${m.key} to ${m.topic} is ${m.value.length} bytes, over the ${this.o.maxMessageBytes}-byte limit (kafka.max_message_bytes)`,
        stage: stageName,
        group_id: m.key,
        batch_id: null,
        row_indices: [],
        missing_row_indices: [],
        records: sources.map((r) => ({ topic: r.topic, partition: r.partition, offset: r.offset, key: r.key, value: null })),
        produced_at: Date.now(),
      });
    }
    return {
      messages,
      deadLetters: deadLetters.map((d) => {
        const size = d.records.reduce((n, r) => n + (r.value?.length ?? 0), 0);
        if (size <= limit) return d;
        return {
          ...d,
          message: `${d.message} [original payloads omitted: ${size} bytes exceed the record size limit; read them at the source offsets]`,
          records: d.records.map((r) => ({ ...r, value: null })),
        };
      }),
    };
  }
}

/** Appends `o` to `out` (outputs of one node's calls record by record). */
function merge(out: StageOutput, o: StageOutput): void {
  out.messages.push(...o.messages);
  out.deadLetters.push(...o.deadLetters);
  out.changelog.push(...o.changelog);
  for (const [k, v] of Object.entries(o.counters ?? {})) (out.counters ??= {})[k] = (out.counters[k] ?? 0) + v;
}

function groupByTopic(items: Array<{ topic: string; message: { key: string; value: Buffer | null; partition?: number } }>) {
  const byTopic = new Map<string, Array<{ key: string; value: Buffer | null; partition?: number }>>();
  for (const { topic, message } of items) {
    let list = byTopic.get(topic);
    if (!list) byTopic.set(topic, (list = []));
    list.push(message);
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

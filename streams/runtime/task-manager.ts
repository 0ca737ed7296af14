/**
 * The tasks of one runner (Kafka Streams' TaskManager): one StreamTask per
 * assigned input partition, created in the order that makes a restart or a
 * rebalance safe — (1) fence: the task's sink `init` completes or aborts
 * whatever the previous owner left open; (2) restore the changelog (stable
 * now, only this id writes it); (3) read the committed input offset (stable
 * too) and seek there if the consumer's position differs; (4) process.
 *
 * It also routes failures (error policy, error-policy.ts): fatal errors stop
 * the runner; a processor's exception goes to the per-record policy
 * (record-policy.ts); a fenced producer means someone else owns the
 * partition now: the task is dropped, the partition given up and the
 * consumer rejoins its group (Kafka Streams' TaskMigratedException), and
 * the partition's producer is initialized again only if the new assignment
 * gives it back, never to fence its new owner; anything else drops the task
 * and rebuilds it with backoff from the committed offset.
 */
import type { InputRecord, Stage } from '../api/stage.js';
import { RolloutStreamError, type CodeOfKind } from '../../errors/index.js';
import { nextOffset, type KafkaAdmin, type TransactionalSink } from '../kafka/types.js';
import { crashPoint } from './crash-points.js';
import { classify, describeError, ProcessingFailure, retryDelayMs } from './error-policy.js';
import type { HealthTracker } from './health.js';
import type { Logger } from './logger.js';
import type { RuntimeMetrics } from './metrics.js';
import { TICK_ISOLATION, type RecordPolicy } from './record-policy.js';
import type { Restorer } from './restorer.js';
import { combineGauges, StreamTask, type ChainNode } from './stream-task.js';
import type { TransactionWriter } from './transaction-writer.js';

/** What the task manager needs of the consumer. */
export interface InputControl {
  pause(partition: number): void;
  resume(partition: number): void;
  seek(partition: number, offset: string): void;
  /**
   * `partition`'s task was fenced: leave the group and join it afresh
   * (`reset` first, then a new member whose assignment decides what this
   * runner owns). False when the consumer already knows the partition is
   * not its own (its revocation is on the way) and does not rejoin.
   */
  rejoin(partition: number): boolean;
}

/** One batch as the consumer hands it over, with its consumer's hooks. */
export interface BatchHooks {
  /** False once the partition was revoked or seeked (kafkajs `isStale`), or the consumer stopped. */
  current(): boolean;
  /** The records before `next` (the resume offset of the last one processed) are processed: the consumer fetches from there. */
  resolve(next: string): void;
  heartbeat(): Promise<void>;
}

export interface TaskManagerOptions {
  admin: KafkaAdmin;
  /** A new transactional sink for a task (the id fences every earlier holder at `init`). */
  sinkFor: (transactionalId: string) => TransactionalSink;
  /**
   * Fused mode: the first of `partitions` on which a separate downstream
   * stage has records it has not processed (`topic/partition`), or null.
   */
  undrained: (partitions: number[]) => Promise<string | null>;
  chain: readonly ChainNode[];
  chainName: string;
  writer: TransactionWriter;
  policy: RecordPolicy;
  restorer: Restorer;
  health: HealthTracker;
  metrics: RuntimeMetrics;
  log: Logger;
  /** A transaction committed (for the lag monitor). */
  onProgress: () => void;
  /** A fatal error: the runner stops. */
  onFatal: (e: unknown, code: CodeOfKind<'fatal'>, context: string) => void;
}

export class TaskManager {
  readonly tasks = new Map<number, StreamTask>();
  assigned = new Set<number>();
  /** Partitions paused by `runtime.poison.policy: stop`. */
  readonly stopped = new Set<number>();
  /** Partitions given up after their task was fenced, until the consumer rejoined (`reset`): never prepared again before. */
  private readonly givenUp = new Set<number>();
  /** Consecutive failed transactions per partition (not counting poison), for the backoff. */
  private readonly failures = new Map<number, number>();
  /** Consecutive restores a processor threw in. */
  private restoreFailures = 0;
  private restoring: Promise<void> | null = null;
  private preparing = false;
  private stopping = false;
  private input: InputControl | null = null;

  constructor(private readonly o: TaskManagerOptions) {}

  private get stage(): Stage {
    return this.o.chain[0]!.stage;
  }

  private get groupId(): string {
    return this.o.chain[0]!.groupId;
  }

  /** The consumer in use now (replaced after a crash kafkajs does not recover from). */
  attach(input: InputControl): void {
    this.input = input;
  }

  async onAssignment(parts: Set<number>): Promise<void> {
    const before = this.assigned;
    // A partition given up stays given up until the rejoin's new member is assigned it.
    this.assigned = new Set([...parts].filter((p) => !this.givenUp.has(p)));
    for (const p of before) {
      if (this.assigned.has(p)) continue;
      // Whatever was wrong with it is the next owner's to count and report.
      this.o.health.released(p);
      this.stopped.delete(p);
      this.failures.delete(p);
      this.o.policy.forget(p);
    }
    for (const [p, task] of this.tasks) {
      if (!this.assigned.has(p)) {
        this.tasks.delete(p);
        await task.exclusive(() => task.close());
        this.o.log.info(`${this.o.chainName}: partition ${p} revoked`);
      }
    }
    // Fence and restore right away rather than on the first batch, so the
    // first records of a new partition do not wait for the restore.
    this.prepareSoon(0);
  }

  /** Forgets every assignment (a new consumer joins afresh): nothing is this runner's until the new member is assigned it. */
  async reset(): Promise<void> {
    const held = new Set([...this.assigned, ...this.givenUp]);
    // First, so that no batch or preparation still under way builds a task (and initializes a producer) meanwhile.
    this.assigned = new Set();
    this.givenUp.clear();
    await this.dropAll();
    for (const p of held) this.o.health.rebuilt(p);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.dropAll();
  }

  /**
   * (Re)creates the tasks of every assigned partition that has none, in the
   * background, retrying with backoff while the broker is unavailable. Fencing
   * promptly matters: a transaction left open by a dropped task holds the
   * stable offset of its output partitions (read_committed readers downstream
   * see nothing past it) until the same transactional id initializes again.
   */
  prepareSoon(delayMs: number): void {
    if (this.preparing || this.stopping) return;
    this.preparing = true;
    setTimeout(() => {
      this.preparing = false;
      const missing = [...this.assigned].find((p) => !this.tasks.has(p) && !this.stopped.has(p));
      if (missing === undefined || this.stopping) return;
      this.taskFor(missing).catch((e: Error) => {
        this.o.log.warn(`${this.o.chainName}: preparing partitions failed: ${e.message}; retrying`);
        this.prepareSoon(Math.min(Math.max(delayMs * 2, 250), 5_000));
      });
    }, delayMs);
  }

  async dropAll(): Promise<void> {
    const tasks = [...this.tasks.values()];
    this.tasks.clear();
    await Promise.all(tasks.map((t) => t.exclusive(() => t.close())));
  }

  private async dropTask(task: StreamTask): Promise<void> {
    if (this.tasks.get(task.partition) === task) this.tasks.delete(task.partition);
    await task.close();
  }

  /**
   * The ready task of a partition: created, fenced and restored on first use;
   * null when the partition is not (or no longer) assigned to this instance.
   */
  async taskFor(partition: number): Promise<StreamTask | null> {
    for (;;) {
      const existing = this.tasks.get(partition);
      if (existing) return existing;
      if (!this.assigned.has(partition) || this.stopping || this.stopped.has(partition) || this.o.health.isFailed) return null;
      // Restore all not-yet-restored assigned partitions in one changelog pass.
      if (!this.restoring) this.restoring = this.createTasks().finally(() => (this.restoring = null));
      await this.restoring;
    }
  }

  private newTask(p: number): StreamTask {
    const sink = this.o.sinkFor(`${this.groupId}.${this.stage.inputTopic}.${p}`);
    return new StreamTask(p, sink, this.o.chain, this.o.chain.map((n) => n.stage.createProcessor(p)), this.o.writer, this.o.policy);
  }

  private async createTasks(): Promise<void> {
    const parts = [...new Set([...this.assigned].filter((p) => !this.tasks.has(p) && !this.stopped.has(p)))];
    const fresh: StreamTask[] = [];
    this.o.health.restoring(true);
    try {
      for (const p of parts) {
        const task = this.newTask(p);
        fresh.push(task);
        await task.open();
        crashPoint('fence.after');
      }
      await this.o.restorer.restore(fresh);
      crashPoint('restore.after');
      await this.checkDrained(fresh.map((t) => t.partition));
    } catch (e) {
      // Half-built tasks hold connected producers: close them before the retry builds new ones.
      await Promise.all(fresh.map((t) => t.close()));
      this.noteRestoreFailure(e, parts);
      throw e;
    } finally {
      this.o.health.restoring(false);
    }
    this.restoreFailures = 0;
    for (const t of fresh) {
      // A rebalance during the restore may have taken the partition away.
      if (this.assigned.has(t.partition) && !this.stopping) {
        this.tasks.set(t.partition, t);
        this.o.health.rebuilt(t.partition);
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
      this.o.onFatal(e, 'restore_failed', `restoring partitions [${parts.join(',')}]`);
      return;
    }
    if (c.kind !== 'poison') return;
    this.restoreFailures += 1;
    const limit = this.o.policy.policy.attempts;
    const cause = describeError((e as ProcessingFailure).cause);
    this.o.log.warn(`${this.o.chainName}: restoring partitions [${parts.join(',')}] failed (attempt ${this.restoreFailures} of ${limit}): ${cause}`);
    if (this.restoreFailures >= limit) {
      this.o.onFatal(
        new RolloutStreamError('restore_failed', `${this.o.chainName}: restoring partitions [${parts.join(',')}] failed ${this.restoreFailures} times: ${cause}`, { cause: e }),
        'restore_failed',
        'restore',
      );
    }
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
    if (this.o.chain.length < 2 || partitions.length === 0) return;
    const left = await this.o.undrained(partitions);
    if (left !== null) {
      throw new RolloutStreamError(
        'partition_not_drained',
        `${left} holds records its separate stage has not processed; the fused runner takes a partition over only once ` +
          `it is drained (start it alone: it drains first; or run the separate stages until their lag is 0)`,
      );
    }
  }

  async committedOffset(partition: number): Promise<string | null> {
    return (await this.o.admin.committedOffsets(this.groupId, this.stage.inputTopic)).get(partition) ?? null;
  }

  /** One fetched batch of `partition`: check the position once per task, then process and commit it (record by record while isolating). */
  async runBatch(partition: number, records: InputRecord[], hooks: BatchHooks): Promise<void> {
    if (this.stopping || this.o.health.isFailed || records.length === 0) return;
    if (this.stopped.has(partition)) {
      this.input?.pause(partition); // a rebalance may have resumed it
      return;
    }
    let task: StreamTask | null;
    try {
      task = await this.taskFor(partition);
    } catch (e) {
      this.o.log.warn(`${this.o.chainName}: partition ${partition} not ready: ${(e as Error).message}`);
      await sleep(500);
      throw e;
    }
    if (!task) return; // revoked meanwhile: the new owner reads from the committed offset
    const t = task;
    await t.exclusive(async () => {
      if (t.closed || !hooks.current()) return;
      if (!t.positionChecked) {
        const committed = await this.committedOffset(partition);
        t.positionChecked = true;
        if (committed !== null && committed !== records[0]!.offset) {
          this.o.log.info(`${this.o.chainName}: partition ${partition} resumes at committed offset ${committed}`);
          this.input?.seek(partition, committed);
          return;
        }
      }
      const steps = this.o.policy.steps(partition, records);
      for (const step of steps) {
        if (t.closed || !hooks.current()) return;
        const start = performance.now();
        const last = step[step.length - 1]!.offset;
        const ctx = this.o.policy.context(partition);
        try {
          await t.processStep(step, ctx);
        } catch (e) {
          await this.onFailure(t, e, records);
          return;
        }
        this.committed(partition, last, ctx);
        crashPoint('tx.after-commit');
        hooks.resolve(nextOffset(step[step.length - 1]!));
        this.o.metrics.recordsIn.inc({ stage: this.stage.name }, step.length);
        this.o.metrics.batchSeconds.observe({ stage: this.o.chainName }, (performance.now() - start) / 1000);
        if (steps.length > 1) await hooks.heartbeat().catch(() => undefined);
      }
      await hooks.heartbeat().catch(() => undefined);
    });
  }

  /** Timer ticks of every task (timeouts), each in its own transaction when it has output. */
  async tickAll(): Promise<void> {
    if (this.stopping || this.o.health.isFailed) return;
    for (const task of this.tasks.values()) {
      if (!task.ticks) continue;
      await task.exclusive(async () => {
        if (task.closed || this.stopping) return;
        const ctx = this.o.policy.context(task.partition);
        try {
          if (await task.tick(Date.now(), ctx)) this.committed(task.partition, null, ctx);
        } catch (e) {
          await this.onFailure(task, e, []);
        }
      });
    }
  }

  private committed(partition: number, lastOffset: string | null, ctx: ReturnType<RecordPolicy['context']>): void {
    this.failures.delete(partition);
    this.o.policy.committed(partition, lastOffset, ctx);
    this.o.onProgress();
  }

  /** Open groups and similar gauges over all tasks and every node of their chains. */
  gauges(): Record<string, number> {
    const sum: Record<string, number> = {};
    for (const t of this.tasks.values()) combineGauges(sum, t.gauges());
    return sum;
  }

  /**
   * After a failed batch or tick (the transaction, if any, is aborted):
   * fatal errors stop the runner; a processor's exception goes through the
   * per-record policy; a fenced producer gives the partition up and rejoins
   * (giveUp); anything else (the cluster, a transaction that failed for a
   * reason nobody coded) drops the task and rebuilds it, retrying with
   * backoff.
   */
  private async onFailure(task: StreamTask, e: unknown, batch: InputRecord[]): Promise<void> {
    const c = classify(e);
    const p = task.partition;
    const fenced = c.code === 'producer_fenced';
    this.o.metrics.transactionFailures.inc({ stage: this.o.chainName, fenced: String(fenced) });
    if (c.kind === 'fatal') {
      this.o.onFatal(e, 'transaction_state', `partition ${p}`);
      return;
    }
    if (fenced) {
      await this.giveUp(task, e);
      return;
    }
    if (c.kind === 'poison' && e instanceof ProcessingFailure) {
      const lastOfBatch = batch.length > 0 ? BigInt(batch[batch.length - 1]!.offset) : TICK_ISOLATION;
      const next = this.o.policy.failed(p, e, lastOfBatch);
      if (next.action === 'stop') {
        await this.stopPartition(task, next.reason);
        return;
      }
      this.o.health.rebuilding(p, `[processing_error] ${describeError(e.cause)}`, false);
      await this.recover(task, next.waitMs);
      return;
    }
    const n = (this.failures.get(p) ?? 0) + 1;
    this.failures.set(p, n);
    const wait = retryDelayMs(n);
    const message = (e as Error).message;
    this.o.log.warn(`${this.o.chainName}: partition ${p}: transaction failed [${c.code}]: ${message}; rebuilding the task in ${wait / 1000} s`);
    this.o.health.rebuilding(p, `[${c.code}] ${message}`, false);
    await this.recover(task, wait);
  }

  /**
   * A newer producer of the partition's transactional id fenced this task:
   * someone else owns the partition now (Kafka Streams' task-migrated path).
   * The transaction is over (the new owner's init aborted it), the task and
   * its in-memory state are dropped, and the partition is given up: nothing
   * here initializes its producer again, which would fence the new owner
   * back. The consumer rejoins its group, and the new assignment decides
   * whether the partition comes back (then fenced and restored afresh). A
   * task already replaced, or a partition already revoked, is only dropped.
   */
  private async giveUp(task: StreamTask, e: unknown): Promise<void> {
    const p = task.partition;
    const current = this.tasks.get(p) === task;
    await this.dropTask(task);
    if (!current || this.stopping || !this.assigned.has(p)) return;
    const message = (e as Error).message;
    this.assigned.delete(p);
    if (this.input?.rejoin(p)) {
      this.givenUp.add(p);
      this.o.health.rebuilding(p, `[producer_fenced] ${message}`, true);
      this.o.log.warn(
        `${this.o.chainName}: partition ${p}: fenced by a newer owner [producer_fenced]: ${message}; ` +
          `dropping its task, giving the partition up and rejoining the group (its producer is initialized again only if the new assignment gives it back)`,
      );
    } else {
      this.o.log.info(`${this.o.chainName}: partition ${p}: fenced by its new owner after a rebalance took it away; task dropped`);
    }
  }

  /** `runtime.poison.policy: stop`: the partition is paused (nothing is committed past the record) and /healthz says so. */
  private async stopPartition(task: StreamTask, reason: string): Promise<void> {
    const p = task.partition;
    this.stopped.add(p);
    this.o.health.stoppedByPolicy(p, reason);
    this.o.log.error(`${this.o.chainName}: partition ${p} stopped by runtime.poison.policy (stop): ${reason}`);
    await this.dropTask(task);
    this.input?.pause(p);
  }

  /**
   * After a failure the in-memory state may be ahead of what was committed:
   * drop the task and go back to the committed offset; the next batch builds a
   * fresh task (fence, restore) after `waitMs`. A long wait pauses the
   * partition instead of holding the batch (kafkajs heartbeats between batches).
   */
  private async recover(task: StreamTask, waitMs: number): Promise<void> {
    await this.dropTask(task);
    const p = task.partition;
    if (this.stopping || !this.assigned.has(p)) return;
    this.prepareSoon(waitMs);
    if (waitMs <= 1_000) await sleep(waitMs);
    else {
      const input = this.input;
      input?.pause(p);
      setTimeout(() => {
        if (input !== this.input || this.stopping || this.stopped.has(p)) return;
        input?.resume(p);
      }, waitMs).unref();
    }
    const committed = await this.committedOffset(p).catch(() => null);
    this.input?.seek(p, committed ?? '0');
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

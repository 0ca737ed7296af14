/**
 * The runner's consumer (Kafka Streams' StreamThread): a pull loop over a
 * GroupSource that hands each fetched batch to the task manager and gives it
 * back once processed, so a partition fetches again only after its batch
 * committed (the source keeps at most one batch out per partition; how many
 * partitions are out at once is its `concurrency`). Start-up retries
 * transient failures with backoff and a fresh source each time (a
 * half-started member is not reused); a membership lost for good gets a new
 * source once, following the start-up rule, never a loop; so does a task
 * fenced by a newer owner (`rejoin`): this member's view of the group is
 * stale, and a new member's assignment says what is still its own.
 */
import type { InputRecord } from '../api/stage.js';
import { classify } from './error-policy.js';
import type { FetchedBatch, GroupSource } from '../kafka/types.js';
import type { Logger } from './logger.js';
import type { InputControl, TaskManager } from './task-manager.js';

/** Start-up steps (connect, join) taking longer than this are reported, and again at each multiple. */
const SLOW_START_WARN_MS = 15_000;
/** Start-up retries a transient failure after this long, doubling up to START_RETRY_MAX_MS. */
const START_RETRY_MS = 1_000;
const START_RETRY_MAX_MS = 15_000;
/** How long one poll waits for a batch before it looks at `stopping` again. */
const POLL_MS = 200;

export interface ConsumerLoopOptions {
  /** A new, unstarted member of the runner's group (one per start attempt). */
  newSource: () => GroupSource;
  groupId: string;
  chainName: string;
  tasks: TaskManager;
  log: Logger;
  /** The consumer could not be restarted after its membership was lost (not transient). */
  onFailed: (e: unknown) => void;
}

/**
 * Whether an error is worth another start-up attempt: the cluster briefly
 * unable to answer, or the group moving on. An error nobody coded (a bug) is
 * not: start-up fails with it.
 */
function transient(e: unknown): boolean {
  const c = classify(e);
  return (c.kind === 'transient' || c.kind === 'task_migrated') && c.code !== 'transaction_outcome_unknown';
}

export class ConsumerLoop implements InputControl {
  private source: GroupSource;
  private stopping = false;
  private pumping: Promise<void> = Promise.resolve();
  /** Partitions with a batch being processed now. */
  private readonly busy = new Set<number>();
  /** A rejoin under way (one at a time: every task fenced meanwhile is dropped by it). */
  private rejoining: Promise<void> | null = null;

  constructor(private readonly o: ConsumerLoopOptions) {
    this.source = o.newSource();
    o.tasks.attach(this);
  }

  /** Joins the group (with the start-up retries); `before` runs first on each attempt (e.g. connecting the admin client). */
  async start(before: () => Promise<void>): Promise<void> {
    await this.retryTransient('start-up', async () => {
      await before();
      await this.startSource();
    });
  }

  private async startSource(): Promise<void> {
    const source = this.source;
    const assigned = new Set<number>();
    await this.slowStep(`joining consumer group ${this.o.groupId}`, () =>
      source.start({
        onAssigned: async (partitions) => {
          if (source !== this.source) return;
          for (const p of partitions) assigned.add(p);
          await this.o.tasks.onAssignment(new Set(assigned));
        },
        onRevoked: async (partitions) => {
          if (source !== this.source) return;
          for (const p of partitions) assigned.delete(p);
          await this.o.tasks.onAssignment(new Set(assigned));
        },
        onRejoining: (e) => {
          if (source !== this.source || this.stopping) return;
          this.o.log.error(`${this.o.chainName}: consumer crashed: ${(e as Error).message}; the client restarts it`);
        },
        onLost: (e) => {
          if (source !== this.source || this.stopping) return;
          // Without a new member the stage would sit silent.
          this.o.log.error(`${this.o.chainName}: consumer crashed and the client will not restart it: ${(e as Error).message}; starting a new consumer`);
          void this.replaceSource();
        },
      }),
    );
    this.pumping = this.pump(source);
  }

  /** Polls `source` until it is replaced or the loop stops; each batch is processed on its own and handed back when done. */
  private async pump(source: GroupSource): Promise<void> {
    while (!this.stopping && source === this.source) {
      let batches: FetchedBatch[];
      try {
        batches = await source.poll(POLL_MS);
      } catch (e) {
        this.o.log.warn(`${this.o.chainName}: poll failed: ${(e as Error).message}`);
        await sleep(500);
        continue;
      }
      for (const b of batches) void this.runBatch(source, b);
    }
  }

  private async runBatch(source: GroupSource, batch: FetchedBatch): Promise<void> {
    let resolved: string | null = null;
    const records: InputRecord[] = batch.records.map((m) => {
      const r: InputRecord = { topic: batch.topic, partition: batch.partition, offset: m.offset, key: m.key, value: m.value, timestamp: m.timestamp };
      // A chunk reader's record (streams/chunks/): commit past its last chunk, not past its offset.
      if (m.next !== undefined) r.next = m.next;
      if (m.chunk !== undefined) r.chunk = m.chunk;
      return r;
    });
    this.busy.add(batch.partition);
    try {
      await this.o.tasks.runBatch(batch.partition, records, {
        current: () => !this.stopping && source === this.source && source.isCurrent(batch),
        resolve: (next) => (resolved = next),
        // The source heartbeats while a batch is out.
        heartbeat: async () => undefined,
      });
    } catch {
      // Not ready (logged by the task manager): the batch is fetched again from its first record.
    } finally {
      this.busy.delete(batch.partition);
      source.release(batch, resolved);
    }
  }

  /**
   * Whether `partition` is idle at its end: no batch of it in hand, and the
   * source has read up to `highWatermark` (what lies between the committed
   * offset and there held nothing to process: aborted records, markers).
   */
  caughtUp(partition: number, highWatermark: string): boolean {
    if (this.busy.has(partition)) return false;
    const at = this.source.fetchPosition?.(partition) ?? null;
    return at !== null && BigInt(at) >= BigInt(highWatermark);
  }

  /** After a lost membership: drop the tasks, and join again with a new source. */
  private async replaceSource(): Promise<void> {
    await this.restartSource('restarting the consumer', 'restart the consumer');
  }

  /**
   * A task of `partition` was fenced (InputControl.rejoin): leave the group
   * and join it with a new member, the tasks dropped first, so that only the
   * new assignment makes this runner initialize a partition's producer
   * again. Nothing to do when the source no longer has the partition (a
   * rebalance took it away; its revocation reaches the tasks) or a rejoin is
   * under way already.
   */
  rejoin(partition: number): boolean {
    if (this.stopping) return false;
    if (this.rejoining) return true;
    if (!this.source.assignment().has(partition)) return false;
    this.o.log.warn(`${this.o.chainName}: rejoining consumer group ${this.o.groupId}: partition ${partition} was fenced by a newer owner`);
    this.rejoining = this.restartSource('rejoining the group', 'rejoin the group').finally(() => (this.rejoining = null));
    return true;
  }

  /**
   * Joins again with a new source, the tasks dropped: the old source is
   * replaced first, so nothing it reports any more reaches the tasks. The
   * start-up rule: transient errors are retried, anything else is fatal (not
   * a loop).
   */
  private async restartSource(what: string, failed: string): Promise<void> {
    await this.renewSource();
    await this.o.tasks.reset();
    if (this.stopping) return;
    await this.retryTransient(what, () => this.startSource()).catch((e: Error) => {
      this.o.log.error(`${this.o.chainName}: could not ${failed}: ${e.message}`);
      this.o.onFailed(e);
    });
  }

  /** Puts a new source in place of the current one (the old one's callbacks are ignored from now on) and stops the old one. */
  private async renewSource(): Promise<void> {
    const old = this.source;
    this.source = this.o.newSource();
    await old.stop().catch(() => undefined);
  }

  /**
   * Runs `fn` until it succeeds. After a failure the source is replaced by a
   * new one and `fn` runs again after a backoff, if the error is transient and
   * the loop is not stopping.
   */
  private async retryTransient(what: string, fn: () => Promise<void>): Promise<void> {
    for (let attempt = 1, wait = START_RETRY_MS; ; attempt++, wait = Math.min(wait * 2, START_RETRY_MAX_MS)) {
      try {
        await fn();
        if (attempt > 1) this.o.log.info(`${this.o.chainName}: ${what} succeeded on attempt ${attempt}`);
        return;
      } catch (e) {
        await this.renewSource();
        if (this.stopping || !transient(e)) throw e;
        this.o.log.warn(`${this.o.chainName}: ${what} failed (attempt ${attempt}): ${(e as Error).message}; retrying in ${wait / 1000} s`);
        await sleep(wait);
        if (this.stopping) throw e;
      }
    }
  }

  /** Runs `step`, warning every 15 s that start-up is still waiting on `what`, so a stall is never silent. */
  private async slowStep<T>(what: string, step: () => Promise<T>): Promise<T> {
    const t0 = Date.now();
    const timer = setInterval(() => {
      this.o.log.warn(`${this.o.chainName}: start-up still ${what} after ${Math.round((Date.now() - t0) / 1000)} s`);
    }, SLOW_START_WARN_MS);
    try {
      return await step();
    } finally {
      clearInterval(timer);
    }
  }

  pause(partition: number): void {
    try {
      this.source.pause([partition]);
    } catch {
      /* not assigned at the moment (rebalancing): the next batch of it pauses it again */
    }
  }

  resume(partition: number): void {
    try {
      this.source.resume([partition]);
    } catch {
      /* rebalancing: a new assignment fetches anyway */
    }
  }

  seek(partition: number, offset: string): void {
    try {
      this.source.seek(partition, offset);
    } catch {
      /* the member is rebalancing; it will fetch from the committed offset */
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.source.stop().catch(() => undefined);
    await this.pumping.catch(() => undefined);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * The runner's consumer (Kafka Streams' StreamThread): joins the group and
 * hands each fetched batch to the task manager, up to four partitions at a
 * time; a partition fetches again only after its batch committed. Start-up
 * retries transient failures with backoff and a fresh consumer each time
 * (a half-started kafkajs consumer is not reused); a crash kafkajs will not
 * recover from gets a new consumer once, following the start-up rule, never
 * a loop.
 */
import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import type { InputRecord } from '../api/stage.js';
import { isTransientKafkaError } from '../kafka/kafkajs/errors.js';
import type { Logger } from './logger.js';
import type { InputControl, TaskManager } from './task-manager.js';

/** Start-up steps (connect, join) taking longer than this are reported, and again at each multiple. */
const SLOW_START_WARN_MS = 15_000;
/** Start-up retries a transient failure after this long, doubling up to START_RETRY_MAX_MS. */
const START_RETRY_MS = 1_000;
const START_RETRY_MAX_MS = 15_000;

export interface ConsumerLoopOptions {
  kafka: Kafka;
  groupId: string;
  inputTopic: string;
  chainName: string;
  maxMessageBytes: number;
  maxInflightBytes: number;
  sessionTimeoutMs: number;
  tasks: TaskManager;
  log: Logger;
  /** The consumer could not be restarted after a crash (not transient). */
  onFailed: (e: unknown) => void;
}

export class ConsumerLoop implements InputControl {
  private consumer: Consumer;
  private stopping = false;

  constructor(private readonly o: ConsumerLoopOptions) {
    this.consumer = this.newConsumer();
    o.tasks.attach(this);
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

  /** Joins the group (with the start-up retries); `before` runs first on each attempt (e.g. connecting the admin client). */
  async start(before: () => Promise<void>): Promise<void> {
    await this.retryTransient('start-up', async () => {
      await before();
      await this.startConsumer();
    });
  }

  private async startConsumer(): Promise<void> {
    const consumer = this.consumer;
    await this.slowStep('connecting the consumer', consumer.connect());
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      if (consumer !== this.consumer) return;
      const parts = e.payload.memberAssignment[this.o.inputTopic] ?? [];
      void this.o.tasks.onAssignment(new Set(parts));
    });
    consumer.on(consumer.events.CRASH, (e) => {
      if (consumer !== this.consumer || this.stopping) return;
      if (e.payload.restart) {
        this.o.log.error(`${this.o.chainName}: consumer crashed: ${e.payload.error.message}; kafkajs restarts it`);
        void this.o.tasks.dropAll().then(() => this.o.tasks.prepareSoon(500));
        return;
      }
      // kafkajs gives up on this consumer: without a new one the stage would sit silent.
      this.o.log.error(`${this.o.chainName}: consumer crashed and kafkajs will not restart it: ${e.payload.error.message}; starting a new consumer`);
      void this.replaceConsumer();
    });
    await this.slowStep('subscribing', consumer.subscribe({ topic: this.o.inputTopic, fromBeginning: true }));
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

  private async onBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    if (this.stopping || batch.messages.length === 0) return;
    const records: InputRecord[] = batch.messages.map((m) => ({
      topic: batch.topic,
      partition: batch.partition,
      offset: m.offset,
      key: m.key ?? null,
      value: m.value ?? null,
      timestamp: Number(m.timestamp),
    }));
    await this.o.tasks.runBatch(batch.partition, records, {
      current: () => isRunning() && !isStale(),
      resolve: (offset) => resolveOffset(offset),
      heartbeat,
    });
  }

  /** After a crash kafkajs does not recover from: drop the tasks, and join again with a new consumer. */
  private async replaceConsumer(): Promise<void> {
    await this.o.tasks.reset();
    await this.renewConsumer();
    // The start-up rule: transient errors are retried, anything else is fatal (not a loop).
    await this.retryTransient('restarting the consumer', () => this.startConsumer()).catch((e: Error) => {
      this.o.log.error(`${this.o.chainName}: could not restart the consumer: ${e.message}`);
      this.o.onFailed(e);
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
   * a new one and `fn` runs again after a backoff, if the error is transient
   * and the loop is not stopping.
   */
  private async retryTransient(what: string, fn: () => Promise<void>): Promise<void> {
    for (let attempt = 1, wait = START_RETRY_MS; ; attempt++, wait = Math.min(wait * 2, START_RETRY_MAX_MS)) {
      try {
        await fn();
        if (attempt > 1) this.o.log.info(`${this.o.chainName}: ${what} succeeded on attempt ${attempt}`);
        return;
      } catch (e) {
        await this.renewConsumer();
        if (this.stopping || !isTransientKafkaError(e)) throw e;
        this.o.log.warn(`${this.o.chainName}: ${what} failed (attempt ${attempt}): ${(e as Error).message}; retrying in ${wait / 1000} s`);
        await sleep(wait);
        if (this.stopping) throw e;
      }
    }
  }

  /** Awaits `p`, warning every 15 s that start-up is still waiting on `what`, so a stall is never silent. */
  private async slowStep<T>(what: string, p: Promise<T>): Promise<T> {
    const t0 = Date.now();
    const timer = setInterval(() => {
      this.o.log.warn(`${this.o.chainName}: start-up still ${what} after ${Math.round((Date.now() - t0) / 1000)} s`);
    }, SLOW_START_WARN_MS);
    try {
      return await p;
    } finally {
      clearInterval(timer);
    }
  }

  pause(partition: number): void {
    try {
      this.consumer.pause([{ topic: this.o.inputTopic, partitions: [partition] }]);
    } catch {
      /* not subscribed at the moment (rebalancing): the next batch of it pauses it again */
    }
  }

  resume(partition: number): void {
    try {
      this.consumer.resume([{ topic: this.o.inputTopic, partitions: [partition] }]);
    } catch {
      /* rebalancing: a new assignment fetches anyway */
    }
  }

  seek(partition: number, offset: string): void {
    try {
      this.consumer.seek({ topic: this.o.inputTopic, partition, offset });
    } catch {
      /* the consumer is rebalancing; it will fetch from the committed offset */
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.consumer.disconnect().catch(() => undefined);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

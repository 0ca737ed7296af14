/**
 * One assigned input partition of one stage: its transactional producer
 * (transactional id = <group>.<topic>.<partition>, so whoever owns the
 * partition next fences this one with the InitProducerId of its first
 * transaction), its processor with restored
 * state, and a mutex that serializes batches and timer ticks.
 *
 * A task is disposable: after any failure inside a transaction it is closed
 * and a fresh one is built (fence, restore, re-read from the committed
 * offset) — the one path for "someone else may own this partition now".
 */
import type { Kafka, Producer } from 'kafkajs';
import type { PartitionProcessor } from '../api/stage.js';

export class PartitionTask {
  readonly producer: Producer;
  /** Offset check done after fencing: the next input offset to process, or null before it ran. */
  positionChecked = false;
  closed = false;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    kafka: Kafka,
    readonly partition: number,
    readonly transactionalId: string,
    readonly processor: PartitionProcessor,
    transactionTimeoutMs: number,
    /** Fused mode: the processors of the downstream stages, same partition number, in chain order. */
    readonly downstream: PartitionProcessor[] = [],
  ) {
    this.producer = kafka.producer({
      transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: transactionTimeoutMs,
      allowAutoTopicCreation: false,
      // The coordinator answers CONCURRENT_TRANSACTIONS to the next
      // transaction's first request while it still writes the previous
      // one's markers (a few ms). kafkajs's default first backoff of 300 ms
      // made every transaction ~280 ms; 5 ms makes it ~20 ms (measured).
      retry: { initialRetryTime: 5, maxRetryTime: 2_000, retries: 25 },
    });
  }

  /** Connects the producer (kafkajs fences a previous owner only at the first transaction's InitProducerId: the runner opens an empty one). */
  async open(): Promise<void> {
    await this.producer.connect();
  }

  /** Runs `fn` after every earlier call on this task has finished. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => undefined);
    return next;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.producer.disconnect().catch(() => undefined);
  }
}

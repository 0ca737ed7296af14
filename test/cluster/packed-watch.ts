/**
 * Watches `rollout.packed` (read_committed) while a failure test runs and
 * notes when each record became readable, so a test can assert that packed
 * groups kept arriving while a broker was down, and measure the longest gap.
 */
import { randomUUID } from 'node:crypto';
import type { Consumer, Kafka } from 'kafkajs';

export interface Arrival {
  key: string;
  at: number;
}

export class PackedWatch {
  readonly arrivals: Arrival[] = [];
  private consumer: Consumer;
  private failure: Error | null = null;

  constructor(kafka: Kafka, readonly topic: string) {
    this.consumer = kafka.consumer({ groupId: `watch.${randomUUID()}`, readUncommitted: false, maxWaitTimeInMs: 200, sessionTimeout: 10_000 });
  }

  async start(): Promise<void> {
    await this.consumer.connect();
    await this.consumer.subscribe({ topic: this.topic, fromBeginning: true });
    this.consumer.on(this.consumer.events.CRASH, (e) => {
      if (!e.payload.restart) this.failure = e.payload.error;
    });
    await this.consumer.run({
      eachMessage: async ({ message }) => void this.arrivals.push({ key: message.key?.toString() ?? '', at: Date.now() }),
    });
  }

  /** Distinct packed groups that arrived in [from, to). */
  groupsBetween(from: number, to: number): number {
    return new Set(this.arrivals.filter((a) => a.at >= from && a.at < to).map((a) => a.key)).size;
  }

  /** The longest time in [from, to] with no packed record arriving (ms). */
  longestGap(from: number, to: number): number {
    const times = [from, ...this.arrivals.map((a) => a.at).filter((t) => t > from && t < to), to];
    let gap = 0;
    for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i]! - times[i - 1]!);
    return gap;
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect().catch(() => undefined);
    if (this.failure) throw new Error(`the packed watcher stopped: ${this.failure.message}`);
  }
}

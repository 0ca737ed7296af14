/**
 * The record limit of each topic a process writes (docs/design-chunked-records.md
 * §2): the topic's `max.message.bytes` as the broker reports it
 * (describeConfigs; a topic without its own value reports the broker's
 * `message.max.bytes` default), read once per topic and kept. Where the
 * broker will not say — a user without DescribeConfigs on the topic, or a
 * config it does not report — the limit is `kafka.max_message_bytes`, with
 * one log line per topic. `forget` makes the next use read it again (after a
 * send the broker refused as too large: someone lowered the limit).
 */
import { RolloutStreamError } from '../../errors/index.js';
import type { KafkaAdmin } from '../kafka/types.js';
import { chunkBudget } from './chunk-writer.js';

export interface RecordLimitsOptions {
  /** The admin to ask (connected; RecordLimits does not close it). */
  admin: () => Pick<KafkaAdmin, 'topicConfigs'> | Promise<Pick<KafkaAdmin, 'topicConfigs'>>;
  /** `kafka.max_message_bytes`: the limit of a topic whose own cannot be read. */
  fallbackBytes: number;
  log: (line: string) => void;
}

export class RecordLimits {
  private readonly known = new Map<string, number>();
  private readonly loading = new Map<string, Promise<void>>();

  constructor(private readonly o: RecordLimitsOptions) {}

  /** Reads the limits of those of `topics` not known yet (one describeConfigs for them all). */
  async load(topics: Iterable<string>): Promise<void> {
    const missing = [...new Set(topics)].filter((t) => !this.known.has(t));
    if (missing.length === 0) return;
    const waiting = missing.map((t) => this.loading.get(t)).filter((p): p is Promise<void> => p !== undefined);
    const ask = missing.filter((t) => !this.loading.has(t));
    if (ask.length > 0) {
      const p = this.read(ask).finally(() => {
        for (const t of ask) if (this.loading.get(t) === p) this.loading.delete(t);
      });
      for (const t of ask) this.loading.set(t, p);
      waiting.push(p);
    }
    await Promise.all(waiting);
  }

  private async read(topics: string[]): Promise<void> {
    let configs: Map<string, Record<string, string>>;
    try {
      configs = await (await this.o.admin()).topicConfigs(topics, ['max.message.bytes']);
    } catch (e) {
      if (!(e instanceof RolloutStreamError && e.code === 'authorization_failed')) throw e;
      for (const t of topics) this.fallBack(t, `not authorized to describe its configs: ${e.message}`);
      return;
    }
    for (const t of topics) {
      const value = configs.get(t)?.['max.message.bytes'];
      const n = value === undefined ? NaN : Number(value);
      if (Number.isSafeInteger(n) && n > 0) this.known.set(t, n);
      else this.fallBack(t, value === undefined ? 'the broker did not report max.message.bytes' : `max.message.bytes ${JSON.stringify(value)} is not a byte count`);
    }
  }

  private fallBack(topic: string, why: string): void {
    this.known.set(topic, this.o.fallbackBytes);
    this.o.log(`record limit of ${topic} unreadable (${why}); using kafka.max_message_bytes = ${this.o.fallbackBytes}`);
  }

  /** The topic's limit (`max.message.bytes`), loaded before; throws for a topic never loaded (a bug). */
  limit(topic: string): number {
    const n = this.known.get(topic);
    if (n === undefined) throw new Error(`RecordLimits: the limit of ${topic} was not loaded`);
    return n;
  }

  /** The payload bytes per chunk for a record with `keyAndHeaders` (its key and headers) on `topic`. */
  chunkBudget(topic: string, keyAndHeaders: Parameters<typeof chunkBudget>[1] = { key: null }): number {
    return chunkBudget(this.limit(topic), keyAndHeaders);
  }

  /** Drops what is known of `topics` (every topic when absent): the next `load` asks again. */
  forget(topics?: Iterable<string>): void {
    if (topics === undefined) this.known.clear();
    else for (const t of topics) this.known.delete(t);
  }
}

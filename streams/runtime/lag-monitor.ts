/**
 * Consumer lag of this instance and the stall warning: end offsets minus the
 * group's committed offsets over the input partitions assigned to this
 * instance only (each instance reports its own share, so the gauges sum to
 * the group's lag and one instance does not warn of another's backlog).
 * Behind on its own partitions with nothing committed for `stall_warn_ms`
 * is `stalled` on /healthz and a warning in the log (at most that often). A
 * partition the consumer has read to its end with nothing in hand is not
 * behind: what lies past the committed offset there held nothing to process
 * (the aborted records of an upstream transaction that failed, markers), so
 * there is nothing to commit.
 */
import type { KafkaAdmin } from '../kafka/types.js';
import type { HealthTracker } from './health.js';
import type { Logger } from './logger.js';
import type { RuntimeMetrics } from './metrics.js';

export interface LagMonitorOptions {
  admin: KafkaAdmin;
  chainName: string;
  inputTopic: string;
  groupId: string;
  stallWarnMs: number;
  metrics: RuntimeMetrics;
  health: HealthTracker;
  log: Logger;
  /** This instance's partitions now. */
  assigned: () => ReadonlySet<number>;
  /** For the warning: the tasks, e.g. `0`, `2 closed`. */
  describeTasks: () => string[];
  /** Whether the consumer has read `partition` to `highWatermark` with nothing in hand (consumer-loop.ts): idle, not behind. */
  caughtUp?: (partition: number, highWatermark: string) => boolean;
}

export class LagMonitor {
  /** When the runner last committed a transaction (or started). */
  private lastProgressAt = Date.now();
  private lastWarnAt = 0;

  constructor(private readonly o: LagMonitorOptions) {}

  /** A transaction committed. */
  progressed(): void {
    this.lastProgressAt = Date.now();
    this.o.health.setStalled(null);
  }

  async measure(): Promise<void> {
    try {
      let lag = 0n;
      // A transactional writer leaves a commit marker after its records: one
      // unconsumed offset may be only that; two or more hold a record.
      let behind = false;
      const behindOn: number[] = [];
      const assigned = this.o.assigned();
      const [ends, committed] = await Promise.all([this.o.admin.topicOffsets(this.o.inputTopic), this.o.admin.committedOffsets(this.o.groupId, this.o.inputTopic)]);
      for (const e of ends) {
        if (!assigned.has(e.partition)) continue;
        // From the committed offset (the log start where there is none) to the high watermark.
        const n = BigInt(e.high) - BigInt(committed.get(e.partition) ?? e.low);
        lag += n;
        if (n >= 2n && !this.o.caughtUp?.(e.partition, e.high)) {
          behind = true;
          behindOn.push(e.partition);
        }
      }
      this.o.metrics.consumerLag.set({ stage: this.o.chainName }, Number(lag));
      const now = Date.now();
      const stalled = behind && now - this.lastProgressAt > this.o.stallWarnMs;
      const idleS = Math.round((now - this.lastProgressAt) / 1000);
      this.o.health.setStalled(stalled ? `${lag} input records behind and nothing committed for ${idleS} s` : null, behindOn.sort((a, b) => a - b));
      if (stalled && now - this.lastWarnAt > this.o.stallWarnMs) {
        this.lastWarnAt = now;
        this.o.log.warn(
          `${this.o.chainName}: ${lag} input records behind and nothing committed for ${idleS} s ` +
            `(assigned partitions [${[...assigned].sort().join(',')}], tasks [${this.o.describeTasks().join(', ')}])`,
        );
      }
    } catch {
      /* the broker is unavailable; the next round retries */
    }
  }
}

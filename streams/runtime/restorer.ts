/**
 * Restores fresh tasks before they process anything (Kafka Streams' state
 * restorer): for every node of the chain that keeps state, its changelog
 * partitions (only the tasks' own partitions are read), then the input
 * records the changelog references read back from the node's input
 * partitions, handed to its processors. A
 * processor that cannot apply a record is told apart from the cluster
 * failing the read: it comes out as a ProcessingFailure (error policy).
 */
import type { ChangelogRecord, PartitionProcessor, Stage } from '../api/stage.js';
import { RolloutStreamError } from '../../errors/index.js';
import type { PartitionRange, ScanRecord, ScanResult } from '../kafka/types.js';
import type { RestoreStats } from './changelog-restore.js';
import { crashPoint } from './crash-points.js';
import { ProcessingFailure } from './error-policy.js';
import type { Logger } from './logger.js';
import type { RuntimeMetrics } from './metrics.js';
import type { StreamTask } from './stream-task.js';

export interface RestorerOptions {
  /** Reads changelog partitions from their start to their end (changelog-restore.ts). */
  readChangelog: (topic: string, partitions: number[], onRecord: (partition: number, record: ChangelogRecord) => Promise<void>) => Promise<RestoreStats>;
  /** Reads input ranges read_committed (`KafkaClient.scan`). */
  scan: (ranges: PartitionRange[], onRecord: (r: ScanRecord) => void) => Promise<ScanResult>;
  /** The chain's stages in order (one unless fused): every one with a changelog is restored. */
  stages: readonly Stage[];
  chainName: string;
  metrics: RuntimeMetrics;
  log: Logger;
}

export class Restorer {
  constructor(private readonly o: RestorerOptions) {}

  /** Restores every node of the fresh tasks' chains that keeps state, in chain order. */
  async restore(fresh: StreamTask[]): Promise<void> {
    if (fresh.length === 0) return;
    for (let i = 0; i < this.o.stages.length; i++) await this.restoreNode(fresh, i);
  }

  private async restoreNode(fresh: StreamTask[], node: number): Promise<void> {
    const stage = this.o.stages[node]!;
    const { changelogTopic } = stage;
    if (!changelogTopic) return;
    const byPartition = new Map(fresh.map((t) => [t.partition, t.processors[node]!]));
    let applyError: ProcessingFailure | null = null;
    const stats = await this.o.readChangelog(changelogTopic, [...byPartition.keys()], async (p, record) => {
      if (applyError) return;
      try {
        await byPartition.get(p)!.restore!(record);
      } catch (e) {
        applyError = new ProcessingFailure(stage.name, [], e);
      }
      crashPoint('restore.during');
    });
    if (applyError) throw applyError;
    this.o.log.info(
      `${this.o.chainName}: restored partitions [${[...byPartition.keys()].join(',')}] from ${changelogTopic}: ` +
        `${stats.records} records, ${(stats.bytes / 1e6).toFixed(1)} MB in ${stats.ms} ms`,
    );
    this.o.metrics.restoreSeconds.observe({ stage: this.o.chainName }, stats.ms / 1000);
    await this.readBackInputs(stage, byPartition);
  }

  /**
   * Second half of a restore: the changelog references pending records by
   * their offset in the node's input topic, so read those records back (one
   * bounded read_committed scan over every restored partition) and hand them
   * to the processors.
   */
  private async readBackInputs(stage: Stage, processors: Map<number, PartitionProcessor>): Promise<void> {
    const inputTopic = stage.inputTopic;
    const needs = new Map<number, Set<string>>();
    const ranges: PartitionRange[] = [];
    for (const [partition, processor] of processors) {
      const offsets = processor.restoreNeeds?.() ?? [];
      if (offsets.length === 0) continue;
      needs.set(partition, new Set(offsets));
      let lo = BigInt(offsets[0]!);
      let hi = lo;
      for (const o of offsets) {
        const v = BigInt(o);
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
      ranges.push({ topic: inputTopic, partition, start: lo.toString(), end: (hi + 1n).toString() });
    }
    const found = new Map<number, Map<string, Buffer>>();
    if (ranges.length > 0) {
      const t0 = Date.now();
      const scan = await this.o.scan(ranges, (r) => {
        if (r.value && needs.get(r.partition)?.has(r.offset)) {
          let m = found.get(r.partition);
          if (!m) found.set(r.partition, (m = new Map()));
          m.set(r.offset, Buffer.from(r.value));
        }
      });
      if (!scan.complete) throw new RolloutStreamError('restore_stalled', `reading back pending rows from ${inputTopic} stalled on ${scan.unfinished.join(', ')}`);
      this.o.log.info(`${this.o.chainName}: read back ${scan.records} input records for ${[...needs.values()].reduce((n, x) => n + x.size, 0)} pending rows in ${Date.now() - t0} ms`);
    }
    for (const [partition, processor] of processors) {
      if (!processor.finishRestore) continue;
      let missing: number;
      try {
        ({ missing } = await processor.finishRestore(found.get(partition) ?? new Map()));
      } catch (e) {
        throw new ProcessingFailure(stage.name, [], e);
      }
      if (missing > 0) {
        this.o.log.warn(
          `${this.o.chainName}: partition ${partition}: ${missing} pending rows are no longer in ${inputTopic} ` +
            `(its retention is shorter than groups stay open); their groups will dead-letter as incomplete`,
        );
      }
    }
  }
}

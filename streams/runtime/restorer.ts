/**
 * Restores fresh tasks before they process anything (Kafka Streams' state
 * restorer): for every node of the chain that keeps state, its changelog
 * partitions (only the tasks' own partitions are read), then the input
 * records the changelog references read back from the node's input
 * partitions by their offsets (the offset reader: what is fetched grows with
 * the pending records, not with the input range they span), handed to its
 * processors. A
 * processor that cannot apply a record is told apart from the cluster
 * failing the read: it comes out as a ProcessingFailure (error policy).
 */
import type { ChangelogRecord, PartitionProcessor, Stage } from '../api/stage.js';
import type { Offset, OffsetReader } from '../kafka/types.js';
import type { RestoreStats } from './changelog-restore.js';
import { crashPoint } from './crash-points.js';
import { ProcessingFailure } from './error-policy.js';
import type { Logger } from './logger.js';
import type { RuntimeMetrics } from './metrics.js';
import type { StreamTask } from './stream-task.js';

export interface RestorerOptions {
  /** Reads changelog partitions from their start to their end (changelog-restore.ts). */
  readChangelog: (topic: string, partitions: number[], onRecord: (partition: number, record: ChangelogRecord) => Promise<void>) => Promise<RestoreStats>;
  /** Reads input records at chosen offsets, read_committed (the process's row reader). */
  reader: Pick<OffsetReader, 'read'>;
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
   * their offset in the node's input topic, so read exactly those records
   * back (the reader skips the gaps between them; a record gone by
   * retention is absent) and hand them to the processors.
   */
  private async readBackInputs(stage: Stage, processors: Map<number, PartitionProcessor>): Promise<void> {
    const inputTopic = stage.inputTopic;
    const needs = new Map<number, Offset[]>();
    for (const [partition, processor] of processors) {
      const offsets = [...new Set(processor.restoreNeeds?.() ?? [])];
      if (offsets.length > 0) needs.set(partition, offsets);
    }
    const found = new Map<number, Map<string, Buffer>>();
    if (needs.size > 0) {
      const t0 = Date.now();
      let records = 0;
      let bytes = 0;
      await Promise.all(
        [...needs].map(async ([partition, offsets]) => {
          const m = new Map<string, Buffer>();
          for (const [offset, r] of await this.o.reader.read(inputTopic, partition, offsets)) {
            if (!r.value) continue;
            m.set(offset, Buffer.from(r.value)); // not a view of the fetch
            records++;
            bytes += r.value.length;
          }
          found.set(partition, m);
        }),
      );
      const wanted = [...needs.values()].reduce((n, x) => n + x.length, 0);
      this.o.log.info(`${this.o.chainName}: read back ${records} input records (${(bytes / 1e6).toFixed(1)} MB) for ${wanted} pending rows in ${Date.now() - t0} ms`);
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

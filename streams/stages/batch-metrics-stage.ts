/**
 * The batch-metrics aggregator (SPEC §4.8, batch scope): consumes the
 * internal batch-progress topic (keyed by batch id, so one instance sees a
 * whole batch) and, once a batch is complete — every input partition closed
 * it and every emitted group reported its metric rows or its failure —
 * writes one `scope: "batch"` record to rollout.metrics, computed over the
 * rows of the emitted groups in group-index order with the same code as the
 * group metrics. State is the progress records themselves, logged to a
 * compacted changelog and tombstoned once the batch is reported.
 */
import { computeBatchMetrics, type MetricRow, type ResolvedPostprocessConfig } from '../../processors/postprocess.js';
import { batchOfKey, decodeProgress, encodeProgress, progressKey, type BatchProgress } from './batch-progress.js';
import type { TopicCodec } from '../codecs/codec.js';
import { emptyOutput, type ChangelogRecord, type InputRecord, type PartitionProcessor, type Stage, type StageOutput } from '../api/stage.js';
import { recordHeaders } from '../api/headers.js';
import type { TopicNames } from '../topics/names.js';

export interface BatchMetricsStageDeps {
  topics: TopicNames;
  config: ResolvedPostprocessConfig;
  metricsCodec: TopicCodec<'metrics'>;
}

interface BatchState {
  closed: Map<number, string[]>;
  partitions: number;
  rows: Map<string, { group_index: number; rows: MetricRow[] }>;
  failed: Set<string>;
  keys: Set<string>;
}

export function batchMetricsStage(deps: BatchMetricsStageDeps): Stage {
  return {
    name: 'batch-metrics',
    inputTopic: deps.topics.batchProgress,
    changelogTopic: deps.topics.batchMetricsChangelog,
    outputTopics: [deps.topics.metrics],
    createProcessor: () => new BatchMetricsProcessor(deps),
  };
}

class BatchMetricsProcessor implements PartitionProcessor {
  private readonly batches = new Map<string, BatchState>();

  constructor(private readonly deps: BatchMetricsStageDeps) {}

  async restore(record: ChangelogRecord): Promise<void> {
    if (record.value === null) {
      const batchId = batchOfKey(record.key);
      this.batches.get(batchId)?.keys.delete(record.key);
      if (this.batches.get(batchId)?.keys.size === 0) this.batches.delete(batchId);
      return;
    }
    this.apply(decodeProgress(record.value));
  }

  async process(records: InputRecord[], nowMs: number): Promise<StageOutput> {
    const out = emptyOutput();
    const touched = new Set<string>();
    for (const r of records) {
      if (!r.value) continue;
      let p: BatchProgress;
      try {
        p = decodeProgress(r.value);
      } catch {
        continue; // internal topic: nothing else writes it
      }
      this.apply(p);
      out.changelog.push({ key: progressKey(p), value: encodeProgress(p) });
      touched.add(p.batch_id);
    }
    for (const batchId of touched) this.emitIfComplete(batchId, out, nowMs);
    return out;
  }

  gauges(): Record<string, number> {
    return { open_batches: this.batches.size };
  }

  private apply(p: BatchProgress): void {
    let b = this.batches.get(p.batch_id);
    if (!b) {
      b = { closed: new Map(), partitions: 0, rows: new Map(), failed: new Set(), keys: new Set() };
      this.batches.set(p.batch_id, b);
    }
    b.keys.add(progressKey(p));
    if (p.type === 'partition_closed') {
      b.closed.set(p.partition, p.emitted);
      b.partitions = p.partitions;
    } else if (p.type === 'group_rows') {
      b.rows.set(p.group_id, { group_index: p.group_index, rows: p.rows });
    } else {
      b.failed.add(p.group_id);
    }
  }

  private emitIfComplete(batchId: string, out: StageOutput, nowMs: number): void {
    const b = this.batches.get(batchId);
    if (!b || b.partitions === 0 || b.closed.size < b.partitions) return;
    const emitted = [...b.closed.values()].flat();
    if (!emitted.every((g) => b.rows.has(g) || b.failed.has(g))) return;
    const groups = emitted.flatMap((g) => (b.rows.has(g) ? [b.rows.get(g)!] : []));
    if (groups.length > 0) {
      const rows = groups.sort((x, y) => x.group_index - y.group_index).flatMap((g) => g.rows);
      out.messages.push({
        topic: this.deps.topics.metrics,
        key: batchId,
        headers: recordHeaders(batchId),
        value: this.deps.metricsCodec.encode({
          scope: 'batch',
          group_id: null,
          batch_id: batchId,
          values: computeBatchMetrics(rows, this.deps.config),
          produced_at: nowMs,
        }),
      });
    }
    for (const key of b.keys) out.changelog.push({ key, value: null });
    this.batches.delete(batchId);
  }
}

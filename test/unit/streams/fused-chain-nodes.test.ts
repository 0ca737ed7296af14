/**
 * A fused chain treats every node alike (issue 13 defect: fused mode
 * restored, ticked and gauged only its first stage while writing every
 * stage's changelog): a stateful, ticking stage second in the chain is
 * restored from its own changelog, its tick's output is written (in a
 * transaction of the task's sink), and its gauges are reported. Runs on the
 * in-memory cluster.
 */
import { describe, expect, test } from 'vitest';
import { emptyOutput, type ChangelogRecord, type PartitionProcessor, type Stage } from '../../../streams/api/stage.js';
import { TopicCodec } from '../../../streams/codecs/codec.js';
import { RuntimeMetrics } from '../../../streams/runtime/metrics.js';
import { RecordPolicy } from '../../../streams/runtime/record-policy.js';
import { Restorer } from '../../../streams/runtime/restorer.js';
import { StreamTask } from '../../../streams/runtime/stream-task.js';
import { TransactionWriter } from '../../../streams/runtime/transaction-writer.js';
import { MemoryCluster } from '../../../streams/testing/memory-cluster.js';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** The second node: keeps what it restored, emits it on a tick, reports a gauge. */
function statefulStage(restored: ChangelogRecord[]): Stage {
  return {
    name: 'postprocess',
    inputTopic: 'mid',
    changelogTopic: 'second.changelog',
    outputTopics: ['out'],
    createProcessor: (): PartitionProcessor => ({
      restore: async (r) => void restored.push(r),
      process: async () => emptyOutput(),
      tick: async () => ({ ...emptyOutput(), messages: restored.map((r) => ({ topic: 'out', key: r.key, value: Buffer.from('ticked') })) }),
      gauges: () => ({ open_groups: restored.length }),
    }),
  };
}

const first: Stage = {
  name: 'accumulate',
  inputTopic: 'in',
  outputTopics: ['mid'],
  createProcessor: () => ({ process: async () => emptyOutput() }),
};

describe('every node of a fused chain', () => {
  test('the second node is restored from its changelog, ticked, and gauged', async () => {
    const cluster = new MemoryCluster();
    for (const t of ['in', 'mid', 'out', 'dl', 'second.changelog']) cluster.createTopic(t, 1);
    const restored: ChangelogRecord[] = [];
    const second = statefulStage(restored);
    const metrics = new RuntimeMetrics();
    const policy = new RecordPolicy({ policy: 'dead-letter', attempts: 3, backoff_ms: 0 }, 'accumulate', 'accumulate+postprocess', quiet);
    const writer = new TransactionWriter({ chainName: 'accumulate+postprocess', deadLetterTopic: 'dl', deadLetterCodec: new TopicCodec('deadLetter', 'dl-value', null as never), maxMessageBytes: 1 << 20, metrics });
    const sink = cluster.transactionalSink('g.in.0');
    const chain = [
      { stage: first, groupId: 'g' },
      { stage: second, groupId: 'g2' },
    ];
    const task = new StreamTask(0, sink, chain, chain.map((n) => n.stage.createProcessor(0)), writer, policy);
    await task.open();

    const changelog: Record<string, ChangelogRecord[]> = { 'second.changelog': [{ key: 'g-1', value: Buffer.from('state') }] };
    const restorer = new Restorer({
      readChangelog: async (topic, _partitions, onRecord) => {
        for (const r of changelog[topic] ?? []) await onRecord(0, r);
        return { records: changelog[topic]?.length ?? 0, bytes: 0, ms: 0 };
      },
      reader: { read: async () => new Map() },
      stages: chain.map((n) => n.stage),
      chainName: 'accumulate+postprocess',
      metrics,
      log: quiet,
    });
    await restorer.restore([task]);
    expect(restored.map((r) => r.key)).toEqual(['g-1']);

    expect(task.ticks).toBe(true);
    expect(await task.tick(0, policy.context(0))).toBe(true);
    expect(cluster.committedRecords('out').map((r) => [r.key?.toString(), r.value?.toString()])).toEqual([['g-1', 'ticked']]);
    expect(task.gauges()).toEqual({ open_groups: 1 });
  });
});

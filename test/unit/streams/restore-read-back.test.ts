/**
 * The second half of a restore (streams/runtime/restorer.ts): the
 * changelog names each pending row by its offset in rollout.row-completed,
 * and the restorer reads exactly those records back through the offset
 * reader, so what it fetches grows with the pending rows, not with the
 * input range between the oldest and the newest of them. Counted at the
 * read seams of the in-memory cluster (KafkaClient.scan, OffsetReader.read)
 * on the topology driver.
 */
import { afterEach, describe, expect, test, vi } from 'vitest';
import { configSchema } from '../../../config/schema.js';
import { generateEvents } from '../../../loadgen/index.js';
import type { RolloutRow } from '../../../processors/types.js';
import type { RecordTypes } from '../../../streams/codecs/codec.js';
import type { Offset, OffsetReader, ScanCallback } from '../../../streams/kafka/types.js';
import { MemoryConnection } from '../../../streams/testing/memory-cluster.js';
import { TopologyTestDriver } from '../../../streams/testing/topology-driver.js';

const config = configSchema.parse({ accumulate: { batch_end_grace_ms: 0 } });

let driver: TopologyTestDriver | null = null;
afterEach(async () => {
  vi.restoreAllMocks();
  await driver?.close();
  driver = null;
});

/** Records and bytes each connection (by name) was handed from each topic by scans and offset reads. */
function countReads(): Map<string, { records: number; bytes: number }> {
  const counts = new Map<string, { records: number; bytes: number }>();
  const add = (conn: string, topic: string, value: Buffer | null) => {
    const c = counts.get(`${conn}/${topic}`) ?? { records: 0, bytes: 0 };
    c.records += 1;
    c.bytes += value?.length ?? 0;
    counts.set(`${conn}/${topic}`, c);
  };
  const scan = MemoryConnection.prototype.scan;
  vi.spyOn(MemoryConnection.prototype, 'scan').mockImplementation(function (this: MemoryConnection, ranges, onRecord: ScanCallback, options) {
    return scan.call(this, ranges, (r) => (add(this.name, r.topic, r.value), onRecord(r)), options);
  });
  const offsetReader = MemoryConnection.prototype.offsetReader;
  vi.spyOn(MemoryConnection.prototype, 'offsetReader').mockImplementation(function (this: MemoryConnection) {
    const reader = offsetReader.call(this);
    const read = reader.read.bind(reader);
    const name = this.name;
    return Object.assign(reader, {
      read: async (topic: string, partition: number, offsets: Offset[]) => {
        const found = await read(topic, partition, offsets);
        for (const r of found.values()) add(name, topic, r.value);
        return found;
      },
    } satisfies Pick<OffsetReader, 'read'>);
  });
  return counts;
}

const asRecords = (rows: RolloutRow[]): Array<RecordTypes['rowCompleted']> => rows.map((row) => ({ kind: 'row', row }));

describe('restoring accumulate', () => {
  test('reads back only its pending rows, not the input range between them', async () => {
    const rows = [...generateEvents({ batches: 1, groupsPerBatch: 62, generations: 4, seed: 5, profile: 'small', reorderWindowGroups: 0 })].flatMap((e) => (e.kind === 'row' ? [e.row] : []));
    const of = (g: number) => rows.filter((r) => r.group_index === g);
    // Groups 0 and 1 stay open with one row each, the first and the last record of the partition; 60 groups complete between them (no BatchEnd).
    const first = [of(0)[0]!, ...rows.filter((r) => r.group_index >= 2), of(1)[0]!];
    const d = (driver = await TopologyTestDriver.create({ partitions: 1, config, stages: ['accumulate'] }));
    const b = await d.startInstance('b');
    d.produce('rowCompleted', asRecords(first));
    await d.runUntilIdle();
    expect(d.pipelineOf(b).runners[0]!.gauges().open_groups).toBe(2);
    await d.stopInstance(b);

    const reads = countReads();
    const a = await d.startInstance('a');
    await d.waitFor(() => a.logs.some((l) => l.includes('read back')), 'the restore read-back');
    expect(d.pipelineOf(a).runners[0]!.gauges().open_groups).toBe(2);
    const pending = d.committedRecords('rowCompleted').filter((r) => r.offset === '0' || r.offset === String(first.length - 1));
    expect(reads.get(`a/${d.topics.rowCompleted}`), `read from ${d.topics.rowCompleted} of ${first.length} records`).toEqual({
      records: 2,
      bytes: pending.reduce((n, r) => n + r.value!.length, 0),
    });

    // The restored rows are whole: the open groups complete with their other rows.
    d.produce('rowCompleted', asRecords([...of(0).slice(1), ...of(1).slice(1)]));
    await d.runUntilIdle();
    expect(new Set(d.committedRecords('groupComplete').map((r) => r.key!.toString())).size).toBe(62);
    expect(d.committedRecords('deadLetter')).toEqual([]);
  });
});

/**
 * Switching from fused to separate stages (streams/runtime/mode-guard.ts
 * `settleFusedTransactions`, run by pipeline.ts before separate postprocess
 * and pack runners join): a separate runner reads its group's committed
 * offset when it is given a partition, and the offsets a fused transaction
 * sends for the postprocess and pack groups count only once it commits
 * (kafkajs's OffsetFetch has no require_stable, KIP-447). A fused
 * transaction still unresolved when the separate runner reads them — its
 * process died after asking for the commit, whose markers the coordinator
 * is still writing, or it was paused past its session and resumes — commits
 * afterwards, and the separate runner processes again what the fused step
 * already did. On the topology driver: the fused instance stops dead at
 * `tx.after-offsets`, and the test completes that commit (the coordinator)
 * after the separate instance joined, data markers before the offsets.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { configSchema } from '../../../config/schema.js';
import { generateEvents } from '../../../loadgen/index.js';
import type { RecordTypes } from '../../../streams/codecs/codec.js';
import { HEADER_BYTES } from '../../../streams/codecs/wire-format.js';
import { fusedTransactionalId } from '../../../streams/runtime/mode-guard.js';
import type { Txn } from '../../../streams/testing/memory-cluster.js';
import { TopologyTestDriver } from '../../../streams/testing/topology-driver.js';
import { asRecords, offlinePacked } from './driver-fixtures.js';

const config = configSchema.parse({ accumulate: { batch_end_grace_ms: 0 } });
const PARTITIONS = 2;

let driver: TopologyTestDriver | null = null;
afterEach(async () => {
  await driver?.close();
  driver = null;
});

const events = () => [...generateEvents({ batches: 2, groupsPerBatch: 5, generations: 4, seed: 47, profile: 'small', runId: 'fs' })];

/** Index of the record that completes a group, from the middle on (processing it alone writes downstream records and offsets). */
function completingRow(rs: Array<RecordTypes['rowCompleted']>): number {
  const size = new Map<string, number>();
  for (const r of rs) if (r.kind === 'row') size.set(r.row.group_id, r.row.num_generations);
  const seen = new Map<string, number>();
  for (let i = 0; i < rs.length; i++) {
    const r = rs[i]!;
    if (r.kind !== 'row') continue;
    const n = (seen.get(r.row.group_id) ?? 0) + 1;
    seen.set(r.row.group_id, n);
    if (i >= rs.length / 2 && n === size.get(r.row.group_id)) return i;
  }
  throw new Error('no group completes in the second half');
}

const groupOf = (d: TopologyTestDriver, stage: string) => `${d.config.topics.prefix}rollout-stream.${stage}`;

/** Every group once on each intermediate topic and on packed, packed byte-equal to the offline runner, and no dead letter. */
function expectEachGroupOnce(d: TopologyTestDriver, want: Map<string, Buffer>): void {
  for (const topic of ['groupComplete', 'penalized', 'packed'] as const) {
    const keys = d.committedRecords(topic).map((r) => r.key!.toString());
    expect(keys.filter((k, i) => keys.indexOf(k) !== i), `groups written to ${topic} more than once`).toEqual([]);
    expect([...keys].sort(), `groups in ${topic}`).toEqual([...want.keys()].sort());
  }
  for (const r of d.committedRecords('packed')) expect(r.value!.subarray(HEADER_BYTES).equals(want.get(r.key!.toString())!), `packed bytes of ${r.key}`).toBe(true);
  expect(d.committedRecords('deadLetter')).toEqual([]);
}

describe('switching from fused to separate stages', () => {
  test('a separate postprocess and pack started while a fused transaction is unresolved never process what it commits again', async () => {
    const rs = asRecords(events());
    const want = await offlinePacked(events(), config);
    const at = completingRow(rs);
    const d = (driver = await TopologyTestDriver.create({ partitions: PARTITIONS, config }));
    const f = await d.startInstance('f', { fused: true });
    d.produce('rowCompleted', rs.slice(0, at));
    await d.runUntilIdle();
    // The fused step of the completing row writes the group downstream, sends every group's offsets and stops dead before its commit.
    f.crashAt('tx.after-offsets');
    d.produce('rowCompleted', [rs[at]!]);
    await d.waitFor(() => f.crashedAt === 'tx.after-offsets', 'the fused instance stopping at tx.after-offsets');
    const ids = [...Array(PARTITIONS).keys()].map((p) => fusedTransactionalId(groupOf(d, 'accumulate'), d.topics.rowCompleted, p));
    const [open] = d.cluster.openTransactions();
    expect(ids, 'the fused task holds the transactional id the switch settles').toContain(open);
    const txn = (d.cluster as unknown as { openTxns: Map<string, Txn> }).openTxns.get(open!)!;
    expect(txn.offsets.map((o) => o.groupId).sort()).toEqual([groupOf(d, 'accumulate'), groupOf(d, 'pack'), groupOf(d, 'postprocess')]);

    // Separate postprocess and pack start; once they have joined, the coordinator completes the fused commit as a broker
    // does: the data partitions' markers first (the records become readable), the offsets' marker after (until it is
    // written, a non-stable OffsetFetch, the only one kafkajs sends, answers the old offset).
    const starting = d.startInstance('s', { fused: false, stages: ['postprocess', 'pack'] });
    const joined = () => ['postprocess', 'pack'].every((s) => d.cluster.group(groupOf(d, s)).members.length > 0);
    await Promise.race([starting, d.waitFor(joined, 'the separate runners joining')]);
    await new Promise((r) => setTimeout(r, 50));
    if (txn.state === 'open') {
      const offsets = txn.offsets.splice(0);
      d.cluster.endTxn(txn, 'committed');
      await new Promise((r) => setTimeout(r, 200));
      for (const o of offsets) d.cluster.group(o.groupId).committed.set(`${o.topic}/${o.partition}`, o.offset);
      d.cluster.notify();
    }
    await starting;

    // Then a separate accumulate, and the rest of the rows.
    await d.startInstance('a', { fused: false, stages: ['accumulate'] });
    d.produce('rowCompleted', rs.slice(at + 1));
    await d.runUntilIdle();
    expectEachGroupOnce(d, want);
  });

  test('a separate postprocess is refused while a fused runner is still a member of the accumulate group, even once its guards are gone', async () => {
    const d = (driver = await TopologyTestDriver.create({ partitions: PARTITIONS, config }));
    const f = await d.startInstance('f', { fused: true });
    d.produce('rowCompleted', asRecords(events()).slice(0, 10));
    await d.runUntilIdle();
    // Its guards' sessions ran out first (they joined first); its accumulate member is still there.
    d.crash(f, { keepSession: true });
    for (const s of ['postprocess', 'pack']) for (const m of [...d.cluster.group(groupOf(d, s)).members]) d.cluster.leave(groupOf(d, s), m.id);
    expect(d.cluster.group(groupOf(d, 'accumulate')).members).toHaveLength(1);
    const refused = await d.startInstance('s', { fused: false, stages: ['postprocess', 'pack'] }).then(
      () => null,
      (e: Error & { code?: string }) => e,
    );
    expect(refused?.code).toBe('mode_conflict');
    expect(refused?.message).toContain(groupOf(d, 'accumulate'));
  });
});

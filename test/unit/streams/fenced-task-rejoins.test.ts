/**
 * A fenced task rejoins the group (issue 25 item 3.2), as Kafka Streams
 * does on a task-migrated error, instead of initializing its transactional
 * id again within ~100 ms and fencing the partition's new owner back.
 *
 * Instance a is paused past its session timeout: the coordinator drops its
 * members, a does not notice and keeps fetching its old partitions (a
 * zombie, MemoryGroupSource.expire unnoticed). b joins, is given every
 * partition and fences a's producers. a's next transaction is fenced: it
 * aborts, drops the task's state, gives the partition up and rejoins, and
 * initializes a producer only for what the new assignment gives it. b, the
 * new owner, is never fenced back: it initializes each transactional id
 * once. Every group is packed exactly once, byte-equal to the offline run.
 */
import { afterEach, expect, test } from 'vitest';
import { configSchema, type Config } from '../../../config/schema.js';
import { generateEvents } from '../../../loadgen/index.js';
import { HEADER_BYTES } from '../../../streams/codecs/wire-format.js';
import { TopologyTestDriver } from '../../../streams/testing/topology-driver.js';
import { asRecords, offlinePacked } from './driver-fixtures.js';

const config: Config = configSchema.parse({
  accumulate: { batch_end_grace_ms: 0 },
  runtime: { poison: { attempts: 2, backoff_ms: 0 } },
});

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let driver: TopologyTestDriver | null = null;
afterEach(async () => {
  await driver?.close();
  driver = null;
});

test.each([
  ['fused', true],
  ['separate', false],
])('%s: an instance fenced after a pause past its session gives its partitions up and rejoins, never fencing the new owner back', async (_mode, fused) => {
  const events = [...generateEvents({ batches: 3, groupsPerBatch: 4, generations: 4, seed: 48, profile: 'small', runId: 'fence48' })];
  const want = await offlinePacked(events, config);
  const records = asRecords(events);
  const wave = Math.ceil(records.length / 4);
  const d = (driver = await TopologyTestDriver.create({ partitions: 2, config }));
  const a = await d.startInstance('a', { fused });
  d.produce('rowCompleted', records.slice(0, wave));
  await d.runUntilIdle();

  d.expireSession(a, { unnoticed: true });
  const b = await d.startInstance('b', { fused });
  // Rows keep coming in waves: each one is fetched by both, the zombie a and the new owner b. Between
  // waves there is time for whatever a does after being fenced (before: initialize the id again 100 ms
  // later, fencing b), so that b's next transaction shows it.
  for (let i = 1; i * wave < records.length; i++) {
    d.produce('rowCompleted', records.slice(i * wave, (i + 1) * wave));
    await d.runUntilIdle();
    await sleep(400);
  }

  const keys = d.committedRecords('packed').map((r) => r.key!.toString());
  expect(keys.filter((k, i) => keys.indexOf(k) !== i), 'groups packed more than once').toEqual([]);
  expect([...keys].sort()).toEqual([...want.keys()].sort());
  for (const r of d.committedRecords('packed')) expect(r.value!.subarray(HEADER_BYTES).equals(want.get(r.key!.toString())!), `packed bytes of ${r.key}`).toBe(true);
  expect(d.committedRecords('deadLetter')).toEqual([]);

  // Who initialized each transactional id, in order.
  const byId = new Map<string, string[]>();
  for (const { transactionalId, by } of d.cluster.inits) byId.set(transactionalId, [...(byId.get(transactionalId) ?? []), by]);
  expect(byId.size).toBeGreaterThan(0);
  for (const [id, who] of byId) {
    const since = who.slice(who.indexOf('b'));
    // b took over (its start-up may init an id more than once) and was never fenced back into initializing it again after a did.
    const aAgain = since.indexOf('a');
    expect(aAgain < 0 || !since.slice(aAgain).includes('b'), `${id}: ${who.join(' → ')}`).toBe(true);
    // After b's takeover a initialized the id at most once: for the partition the rejoin gave it.
    expect(since.filter((w) => w === 'a').length, `${id}: ${who.join(' → ')}`).toBeLessThanOrEqual(1);
  }
  expect(b.logs.filter((l) => l.includes('fenced by a newer owner')), "b, the new owner, fenced back").toEqual([]);
  expect(a.logs.some((l) => /fenced by a newer owner.*rejoining/.test(l)), `a's log:\n${a.logs.slice(-15).join('\n')}`).toBe(true);
  // a rejoined: both share the partitions again, and both are healthy.
  expect(d.cluster.group('ttd.rollout-stream.accumulate').members.filter((m) => m.takesPartitions)).toHaveLength(2);
  expect(d.health(a).status).toBe(200);
  expect(d.health(b).status).toBe(200);
});

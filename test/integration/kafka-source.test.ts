/**
 * The kafkajs GroupSource against the real broker: the runtime pulls
 * batches, a partition has at most one batch out until it is released,
 * a release with no progress fetches the same records again, seek moves the
 * next fetch, and a second member splits the partitions with both members'
 * listeners told.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, test } from 'vitest';
import { KafkajsGroupSource } from '../../streams/kafka/kafkajs/source.js';
import type { FetchedBatch, RebalanceListener } from '../../streams/kafka/types.js';
import { topicNames } from '../../streams/topics/names.js';
import { testEnv, type TestEnv } from './helpers.js';

let env: TestEnv | undefined;
const sources: KafkajsGroupSource[] = [];
afterEach(async () => {
  for (const s of sources.splice(0)) await s.stop();
  await env?.close();
  env = undefined;
});

function listener(log: string[]): RebalanceListener {
  return {
    onAssigned: async (ps) => void log.push(`+${ps.join(',')}`),
    onRevoked: async (ps) => void log.push(`-${ps.join(',')}`),
    onLost: (e) => void log.push(`lost ${String(e)}`),
  };
}

/** Polls until `until` holds or `ms` passed, releasing with `decide`. */
async function drive(s: KafkajsGroupSource, ms: number, decide: (b: FetchedBatch) => string | null, until: () => boolean): Promise<void> {
  const deadline = Date.now() + ms;
  while (!until() && Date.now() < deadline) for (const b of await s.poll(200)) s.release(b, decide(b));
}

describe('kafkajs group source', () => {
  test('pull, one batch per partition until released, re-fetch, seek, and a rebalance', async () => {
    env = await testEnv('source');
    const e = env;
    const topic = topicNames(e.prefix).metrics;
    const producer = e.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    // Twenty sends: several record batches per partition, so a small fetch returns only part of each.
    for (let s = 0; s < 20; s++) {
      await producer.send({ topic, messages: [...Array(10).keys()].map((j) => s * 10 + j).map((i) => ({ partition: i % 4, key: `k${i}`, value: Buffer.from(String(i)) })) });
    }
    await producer.disconnect();

    const groupId = `${e.prefix}group.${randomUUID()}`;
    const log: string[] = [];
    const a = new KafkajsGroupSource(e.kafka, { groupId, topic, sessionTimeoutMs: 6000, maxBytes: 256 });
    sources.push(a);
    await a.start(listener(log));

    // The first batches: hold them and see that their partitions fetch nothing more meanwhile.
    let first: FetchedBatch[] = [];
    for (let i = 0; i < 50 && first.length === 0; i++) first = await a.poll(200);
    expect(first.length).toBeGreaterThan(0);
    expect(log[0]).toBe('+0,1,2,3');
    const heldParts = new Set(first.map((b) => b.partition));
    const during = await a.poll(1500);
    expect(during.filter((b) => heldParts.has(b.partition)), 'no second batch of a partition whose batch is out').toEqual([]);
    // Nothing consumed: the same first records come again.
    const firstOffsets = new Map(first.map((b) => [b.partition, b.records[0]!.offset]));
    for (const b of [...first, ...during]) a.release(b, null);
    const again = new Map<number, string>();
    await drive(a, 10_000, (b) => {
      if (!again.has(b.partition)) again.set(b.partition, b.records[0]!.offset);
      return null;
    }, () => [...firstOffsets.keys()].every((p) => again.has(p)));
    for (const [p, off] of firstOffsets) expect(again.get(p)).toBe(off);

    // Consume everything once; partition 3 is moved back to offset 40 once by a seek, after it read past 45.
    const seen = new Map<string, number>();
    let sought = false;
    await drive(
      a,
      20_000,
      (b) => {
        for (const r of b.records) seen.set(`${r.partition}/${r.offset}`, (seen.get(`${r.partition}/${r.offset}`) ?? 0) + 1);
        const next = (BigInt(b.records[b.records.length - 1]!.offset) + 1n).toString();
        if (b.partition === 3 && !sought && BigInt(next) > 46n) {
          sought = true;
          a.seek(3, '40');
        }
        return next;
      },
      () => seen.size >= 200 && sought && (seen.get('3/45') ?? 0) >= 2,
    );
    expect(seen.size).toBe(200);
    expect(seen.get('3/45'), 'the seek made partition 3 read offset 45 again').toBe(2);
    expect(seen.get('2/10'), 'other partitions once').toBe(1);

    // A second member: the group splits the partitions, both listeners hear of it.
    const logB: string[] = [];
    const b = new KafkajsGroupSource(e.kafka, { groupId, topic, sessionTimeoutMs: 6000, maxBytes: 1024 * 1024 });
    sources.push(b);
    await b.start(listener(logB));
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && (a.assignment().size + b.assignment().size !== 4 || b.assignment().size === 0)) {
      for (const s of [a, b]) for (const x of await s.poll(100)) s.release(x, null);
    }
    expect(a.assignment().size + b.assignment().size).toBe(4);
    expect([...a.assignment()].some((p) => b.assignment().has(p))).toBe(false);
    expect(log.some((l) => l.startsWith('-')), `first member told of its revoked partitions: ${log.join(' ')}`).toBe(true);
    expect(logB[0]?.startsWith('+')).toBe(true);
  });
});

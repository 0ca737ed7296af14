/**
 * The changelog restore reads only the task's own partitions: a restore of
 * one partition of a four-partition changelog fetches that one (the reader's
 * group member is assigned it alone), gets every record of it up to the end
 * (transaction markers included in the range), and leaves no group behind.
 */
import '../../streams/kafka/kafkajs/speedups.js'; // before kafkajs loads: createKafka refuses a kafkajs without the send-retry fix
import { AssignerProtocol } from 'kafkajs';
import { afterEach, describe, expect, test } from 'vitest';
import { KafkajsClient } from '../../streams/kafka/kafkajs/adapter.js';
import { KafkajsAdmin } from '../../streams/kafka/kafkajs/admin.js';
import { restoreChangelog } from '../../streams/runtime/changelog-restore.js';
import { topicNames } from '../../streams/topics/names.js';
import { testEnv, type TestEnv } from './helpers.js';
import { sleep } from './stage-processes.js';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** Groups named `rollout-stream.restore.*` with a member assigned partitions of `topic`, with those partitions. */
async function restoreAssignments(e: TestEnv, topic: string): Promise<Map<string, number[]>> {
  const { groups } = await e.admin.listGroups();
  const ids = groups.map((g) => g.groupId).filter((id) => id.startsWith('rollout-stream.restore.'));
  const out = new Map<string, number[]>();
  if (ids.length === 0) return out;
  const described = await e.admin.describeGroups(ids);
  for (const g of described.groups) {
    for (const m of g.members) {
      const a = m.memberAssignment.length > 0 ? AssignerProtocol.MemberAssignment.decode(m.memberAssignment) : null;
      const parts = a?.assignment[topic];
      if (parts) out.set(g.groupId, [...(out.get(g.groupId) ?? []), ...parts].sort((x, y) => x - y));
    }
  }
  return out;
}

describe('changelog restore', () => {
  test('restoring one of four filled partitions fetches only that one, to its end, and deletes its group', async () => {
    env = await testEnv('restore-own', [[['topics', 'partitions'], 4]]);
    const e = env;
    const topic = topicNames(e.prefix).accumulateChangelog;
    // Transactional writes, as the stages make them: every partition ends with a commit marker.
    const producer = e.kafka.producer({ transactionalId: `${e.prefix}writer`, idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    for (let round = 0; round < 3; round++) {
      const tx = await producer.transaction();
      await tx.send({ topic, messages: [0, 1, 2, 3].flatMap((p) => [0, 1].map((i) => ({ partition: p, key: `p${p}-r${round}-${i}`, value: Buffer.from(`v${p}.${round}.${i}`) }))) });
      await tx.commit();
    }
    await producer.disconnect();

    const seen: Array<[number, string]> = [];
    let assignment: Map<string, number[]> | null = null;
    const stats = await restoreChangelog(
      new KafkajsClient(e.kafka),
      KafkajsAdmin.over(e.admin),
      topic,
      [2],
      async (partition, record) => {
        // While the first record is in hand the reader's group is live: look at what it was given.
        if (assignment === null) {
          for (let i = 0; i < 50 && (assignment === null || assignment.size === 0); i++) {
            assignment = await restoreAssignments(e, topic);
            if (assignment.size === 0) await sleep(100);
          }
        }
        seen.push([partition, record.key]);
      },
      1024 * 1024,
    );
    expect([...(assignment ?? new Map()).values()]).toEqual([[2]]);
    expect(seen).toEqual([0, 1, 2].flatMap((round) => [0, 1].map((i): [number, string] => [2, `p2-r${round}-${i}`])));
    expect(stats.records).toBe(6);
    // No group left behind once the restore is over.
    expect((await restoreAssignments(e, topic)).size).toBe(0);
  });
});

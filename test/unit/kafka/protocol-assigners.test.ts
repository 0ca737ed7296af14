/**
 * The assignment protocols of the mode guard (streams/runtime/mode-guard.ts)
 * as the kafkajs adapter announces and computes them: each name is its own
 * protocol; partitions go round robin to the members that take partitions,
 * and a guard member gets an empty assignment whatever the group holds. The
 * platformatic adapter computes the same (streams/kafka/platformatic/assigner.ts).
 */
import { AssignerProtocol } from 'kafkajs';
import { describe, expect, test } from 'vitest';
import { protocolAssigners } from '../../../streams/kafka/kafkajs/adapter.js';
import { roundRobinAssigner } from '../../../streams/kafka/platformatic/assigner.js';
import { FUSED_PROTOCOL, GUARD_PROTOCOLS, protocolsOf, SEPARATE_PROTOCOL } from '../../../streams/runtime/mode-guard.js';

const cluster = { findTopicPartitionMetadata: (topic: string) => (topic === 't' ? [3, 0, 2, 1, 4].map((partitionId) => ({ partitionId })) : []) };

function assignerOf(protocols: Parameters<typeof protocolAssigners>[0]) {
  const [make] = protocolAssigners(protocols);
  return make!({ cluster } as never);
}

/** A member's subscription as its own assigner announces it. */
function member(memberId: string, protocols: Parameters<typeof protocolAssigners>[0]) {
  return { memberId, memberMetadata: assignerOf(protocols).protocol({ topics: ['t'] }).metadata };
}

async function assign(members: Array<{ memberId: string; memberMetadata: Buffer }>) {
  const out = await assignerOf(protocolsOf('fused')).assign({ members, topics: ['t'], groupId: 'g' } as never);
  return Object.fromEntries(out.map((a) => [a.memberId, AssignerProtocol.MemberAssignment.decode(a.memberAssignment)!.assignment['t'] ?? []]));
}

describe('mode protocols (kafkajs adapter)', () => {
  test('fused and separate runners announce different protocol names; a guard announces fused', () => {
    expect(assignerOf(protocolsOf('fused')).name).toBe(FUSED_PROTOCOL);
    expect(assignerOf(protocolsOf('separate')).name).toBe(SEPARATE_PROTOCOL);
    expect(assignerOf(GUARD_PROTOCOLS).name).toBe(FUSED_PROTOCOL);
    expect(FUSED_PROTOCOL).not.toBe(SEPARATE_PROTOCOL);
  });

  test('partitions go round robin to the members that take them; guards get none', async () => {
    const got = await assign([member('b-worker', protocolsOf('fused')), member('a-guard', GUARD_PROTOCOLS), member('c-worker', protocolsOf('fused'))]);
    expect(got).toEqual({ 'a-guard': [], 'b-worker': [0, 2, 4], 'c-worker': [1, 3] });
  });

  test('a group of guards only assigns nothing (and fails nothing)', async () => {
    expect(await assign([member('g1', GUARD_PROTOCOLS), member('g2', GUARD_PROTOCOLS)])).toEqual({ g1: [], g2: [] });
  });

  test('the platformatic adapter computes the same assignment from the same subscriptions', () => {
    const sub = (m: { memberMetadata: Buffer }) => ({ metadata: AssignerProtocol.MemberMetadata.decode(m.memberMetadata)!.userData });
    const members = new Map(
      [member('b-worker', protocolsOf('fused')), member('a-guard', GUARD_PROTOCOLS), member('c-worker', protocolsOf('fused'))].map((m) => [m.memberId, sub(m)]),
    );
    const out = roundRobinAssigner('b-worker', members as never, new Set(['t']), { topics: new Map([['t', { partitionsCount: 5 }]]) } as never);
    expect(Object.fromEntries(out.map((a) => [a.memberId, a.assignments.get('t')?.partitions ?? []]))).toEqual({ 'a-guard': [], 'b-worker': [0, 2, 4], 'c-worker': [1, 3] });
  });
});

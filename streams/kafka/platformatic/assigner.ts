/**
 * The assignment the group's leader computes for our protocol names, as the
 * kafkajs adapter's (streams/kafka/kafkajs/adapter.ts `protocolAssigners`):
 * round robin over the members that take partitions, in member-id order; a
 * guard member (user data `guard`) gets nothing. Same wire format, so a
 * group's members agree whichever adapter leads.
 */
import type { ClusterMetadata, ExtendedGroupProtocolSubscription, GroupPartitionsAssignments } from '@platformatic/kafka';

const GUARD = Buffer.from('guard');

export function roundRobinAssigner(
  _current: string,
  members: Map<string, ExtendedGroupProtocolSubscription>,
  topics: Set<string>,
  metadata: ClusterMetadata,
): GroupPartitionsAssignments[] {
  const takers = [...members]
    .filter(([, m]) => !(m.metadata !== undefined && Buffer.from(m.metadata as Buffer).equals(GUARD)))
    .map(([id]) => id)
    .sort();
  const out = new Map<string, GroupPartitionsAssignments>([...members.keys()].map((id) => [id, { memberId: id, assignments: new Map() }]));
  let i = 0;
  for (const topic of [...topics].sort()) {
    const count = metadata.topics.get(topic)?.partitionsCount ?? 0;
    for (let p = 0; p < count && takers.length > 0; p++) {
      const a = out.get(takers[i++ % takers.length]!)!.assignments;
      (a.get(topic) ?? a.set(topic, { topic, partitions: [] }).get(topic)!).partitions.push(p);
    }
  }
  return [...out.values()];
}

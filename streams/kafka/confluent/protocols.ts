/**
 * What a group member announces, in librdkafka's terms.
 *
 * librdkafka (2.15.1) cannot run a custom assignor: `partition.assignment.strategy`
 * accepts only its builtin `range`, `roundrobin` and `cooperative-sticky`
 * (src/rdkafka_assignor.c `rd_kafka_assignors_init`: "Unsupported
 * partition.assignment.strategy"; `rd_kafka_assignor_add` is internal, and
 * the node binding exposes neither), and the JoinGroup protocol names are
 * those assignors' names. So this adapter cannot announce our protocol names
 * (`rollout-stream.fused/1`, streams/runtime/mode-guard.ts). The closest
 * faithful stand-in: each of our names maps to a distinct builtin assignor,
 * so the coordinator still refuses a member of the other mode with
 * INCONSISTENT_GROUP_PROTOCOL (`mode_conflict`), whatever the timing:
 *
 * - fused → `roundrobin`: round robin over the members subscribed to the
 *   topic, in member-id order (rdkafka_roundrobin_assignor.c), as our own
 *   assigner;
 * - separate → `range`: each member, in member-id order, a contiguous range
 *   of partitions (as balanced, a different partition-to-member map);
 * - no protocols asked for → `roundrobin`.
 *
 * A guard member (`takesPartitions: false`) cannot put `guard` in its
 * subscription's user data either (the builtin assignors write their own),
 * and a member subscribed to no existing topic never joins (librdkafka waits
 * for "matching topics"). It subscribes to `__consumer_offsets` instead of
 * the group's topic: the assignor gives the topic's partitions only to the
 * members subscribed to it, so the guard takes none of them; it is handed
 * partitions of `__consumer_offsets`, which it never assigns locally.
 *
 * Consequence: a confluent member and a kafkajs or @platformatic/kafka member
 * never share a group (their protocol names differ: the coordinator refuses
 * the later one as `mode_conflict`). Every process of one topic prefix must
 * run the same `kafka.client`; switching clients means stopping them all.
 */
import { RolloutStreamError } from '../../../errors/index.js';
import type { MemberProtocols } from '../types.js';

/** Our protocol names (streams/runtime/mode-guard.ts) and the builtin assignor that stands in for each. */
export const STAND_INS: Readonly<Record<string, 'roundrobin' | 'range'>> = {
  'rollout-stream.fused/1': 'roundrobin',
  'rollout-stream.separate/1': 'range',
};

/** The topic a guard member subscribes to: exists in every cluster with a consumer group, and no stage reads it. */
export const GUARD_TOPIC = '__consumer_offsets';

export interface Subscription {
  /** `partition.assignment.strategy`. */
  strategy: string;
  /** The topic this member subscribes to. */
  topic: string;
  /** False for a guard member: it assigns nothing locally. */
  takesPartitions: boolean;
}

/** The subscription of a member of `topic` announcing `protocols`; throws `usage` for a name without a stand-in. */
export function subscriptionOf(topic: string, protocols: MemberProtocols | undefined): Subscription {
  if (!protocols) return { strategy: 'roundrobin', topic, takesPartitions: true };
  const strategies = protocols.names.map((name) => {
    const s = STAND_INS[name];
    if (!s) {
      throw new RolloutStreamError(
        'usage',
        `the confluent client cannot announce assignment protocol ${name}: librdkafka runs only its builtin assignors (range, roundrobin, cooperative-sticky), and this adapter has stand-ins for ${Object.keys(STAND_INS).join(', ')} only`,
      );
    }
    return s;
  });
  const takesPartitions = protocols.takesPartitions !== false;
  return { strategy: [...new Set(strategies)].join(','), topic: takesPartitions ? topic : GUARD_TOPIC, takesPartitions };
}

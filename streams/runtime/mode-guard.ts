/**
 * Fused and separate runners must never process one prefix at once (the
 * separate stages would process the fused steps' outputs a second time).
 * The broker enforces it: in the classic group protocol the coordinator
 * refuses a member whose assignment protocols share none with the members
 * already in the group (INCONSISTENT_GROUP_PROTOCOL, our `mode_conflict`).
 * Separate runners announce `rollout-stream.separate/1`, fused ones
 * `rollout-stream.fused/1`; a fused process also holds a guard membership
 * (announcing fused/1, taking no partition) in the postprocess and pack
 * groups, taken before its accumulate runner processes anything and kept
 * until it stops. The coordinator serializes joins, so of two processes
 * starting together in the two modes exactly one gets in, whatever the
 * timing. Drain runners (postprocess and pack run separately by the first
 * fused process, pipeline.ts) announce fused/1 and take partitions.
 */
import { RolloutStreamError } from '../../errors/index.js';
import type { GroupSource, KafkaClient, MemberProtocols } from '../kafka/types.js';

export const SEPARATE_PROTOCOL = 'rollout-stream.separate/1';
export const FUSED_PROTOCOL = 'rollout-stream.fused/1';

export type RunMode = 'fused' | 'separate';

/** What a runner of `mode` announces. */
export function protocolsOf(mode: RunMode): MemberProtocols {
  return { names: [mode === 'fused' ? FUSED_PROTOCOL : SEPARATE_PROTOCOL] };
}

/** A guard member of a fused process: holds the group against separate runners, takes no partition. */
export const GUARD_PROTOCOLS: MemberProtocols = { names: [FUSED_PROTOCOL], takesPartitions: false };

export interface Guards {
  stop(): Promise<void>;
}

/**
 * Joins every group of `groups` as a guard member. Rejects with
 * `mode_conflict` (naming the group) when one holds separate runners; a guard
 * lost later (its session expired and a separate runner got in) calls
 * `onLost`: the fused process must stop.
 */
export async function holdGuards(
  client: KafkaClient,
  groups: Array<{ groupId: string; topic: string }>,
  sessionTimeoutMs: number,
  onLost: (e: RolloutStreamError) => void,
): Promise<Guards> {
  const held: GroupSource[] = [];
  const stopAll = () => Promise.all(held.map((g) => g.stop().catch(() => undefined))).then(() => undefined);
  let stopping = false;
  try {
    for (const g of groups) {
      const source = client.groupSource({ groupId: g.groupId, topic: g.topic, sessionTimeoutMs, maxBytes: 1024, protocols: GUARD_PROTOCOLS });
      held.push(source);
      await source.start({
        onAssigned: async () => undefined,
        onRevoked: async () => undefined,
        onLost: (e) => {
          if (stopping) return;
          onLost(new RolloutStreamError('mode_conflict', `the fused runner lost its guard membership in group ${g.groupId}: ${(e as Error).message}`, { cause: e }));
        },
      });
    }
  } catch (e) {
    await stopAll();
    throw e;
  }
  return {
    async stop() {
      stopping = true;
      await stopAll();
    },
  };
}

/** Whether `e` is the coordinator refusing a member of the other mode. */
export function isModeConflict(e: unknown): boolean {
  return e instanceof RolloutStreamError && e.code === 'mode_conflict';
}

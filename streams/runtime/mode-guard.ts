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
 *
 * Switching back, a separate process first settles the fused transactions
 * (`settleFusedTransactions`), so that no separate runner reads an offset a
 * fused transaction has yet to commit.
 */
import { RolloutStreamError } from '../../errors/index.js';
import type { GroupSource, KafkaAdmin, KafkaClient, MemberProtocols } from '../kafka/types.js';
import type { Logger } from './logger.js';

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

/**
 * The transactional id of the fused task of `partition`: the accumulate
 * task's (task-manager.ts `newTask`: `<group>.<input topic>.<partition>`),
 * which the fused chain uses too, so that either fences the other.
 */
export function fusedTransactionalId(accumulateGroup: string, rowTopic: string, partition: number): string {
  return `${accumulateGroup}.${rowTopic}.${partition}`;
}

/**
 * Before a separate process's runners join their groups. A separate
 * postprocess or pack reads its group's committed offset when it is given a
 * partition (again for its first batch); a fused transaction sends offsets
 * for those groups too, and they count only once it commits. kafkajs's
 * OffsetFetch (v4, no KIP-447 `require_stable`) answers the last committed
 * offset while such a transaction is open, or committing: its data markers
 * can be readable before its offsets' marker is (the fused process died
 * after asking for the commit; or it was paused past its session and
 * resumes). The separate runner would then process again what the fused
 * steps did. So, in the accumulate group (which the fused runner is a member of):
 *
 * - a fused member: `mode_conflict` (its guards may be gone first: they
 *   joined first, so their sessions end first);
 * - no member: every fused transactional id (one per `rowTopic` partition)
 *   is initialized here and closed. InitProducerId returns only once the
 *   id's previous transaction is complete — an open one aborted, a commit's
 *   markers all written, offsets included — and fences its producer, which
 *   can commit nothing more. Nobody holds those ids: no accumulate runs;
 * - separate members: nothing. The first of them joined an empty group, so
 *   its process settled before it joined (every separate process does,
 *   pipeline.ts), and they hold the ids now.
 */
export async function settleFusedTransactions(o: {
  client: KafkaClient;
  admin: KafkaAdmin;
  accumulateGroup: string;
  rowTopic: string;
  transactionTimeoutMs: number;
  log: Logger;
}): Promise<void> {
  const group = await o.admin.describeGroup(o.accumulateGroup);
  if (group.members > 0 && group.protocol === FUSED_PROTOCOL) {
    throw new RolloutStreamError('mode_conflict', `a fused runner is a member of group ${o.accumulateGroup} (protocol ${FUSED_PROTOCOL})`);
  }
  if (group.members > 0) return;
  const partitions = await o.admin.partitionCount(o.rowTopic);
  const t0 = Date.now();
  await Promise.all(
    [...Array(partitions).keys()].map(async (p) => {
      const sink = o.client.transactionalSink(fusedTransactionalId(o.accumulateGroup, o.rowTopic, p), {
        transactionTimeoutMs: o.transactionTimeoutMs,
        partitionsOf: (topic) => o.admin.partitionCount(topic),
      });
      try {
        await sink.init();
      } finally {
        await sink.close().catch(() => undefined);
      }
    }),
  );
  o.log.info(`separate stages: no accumulate runs; settled the fused transactional ids of ${partitions} partitions in ${Date.now() - t0} ms before joining`);
}

/** Whether `e` is the coordinator refusing a member of the other mode. */
export function isModeConflict(e: unknown): boolean {
  return e instanceof RolloutStreamError && e.code === 'mode_conflict';
}

/**
 * The pack stage (penalized → packed): record_to_train_batch and
 * pack_payload per group (SPEC §5). A group that cannot be packed (a
 * `PackError`, the one error `packGroup` throws) becomes a `processing_error`
 * dead letter carrying the input record; any other exception is a bug, not a
 * verdict on the group, and goes to the runtime's error policy. Its one
 * state is the ledger of groups packed (pack-ledger.ts): a group packed
 * again to the same bytes is an idempotent replay (counted, logged, nothing
 * written); to other bytes, a `group_already_packed` dead letter.
 */
import type { PackConfig } from '../../config/schema.js';
import { packGroup } from '../../processors/pack.js';
import { PackError } from '../../processors/pack-error.js';
import { SlabPool } from '../../processors/slab.js';
import type { DeadLetterReason, PenalizedGroup } from '../../processors/types.js';
import type { DeadLetterRecord, SourceRecord } from '../api/dead-letter-record.js';
import type { TopicCodec } from '../codecs/codec.js';
import { emptyOutput, type ChangelogRecord, type InputRecord, type Stage, type StageOutput } from '../api/stage.js';
import { HEADER_BYTES } from '../codecs/wire-format.js';
import { ledgerKey, packedDigest, PackLedger } from './pack-ledger.js';
import { recordHeaders } from '../api/headers.js';
import { forEachDecoded } from './decode-input.js';
import type { TopicNames } from '../topics/names.js';
import { penalizedReferences, type RowResolver } from '../codecs/row-resolver.js';

export interface PackStageDeps {
  topics: TopicNames;
  config: PackConfig;
  penalizedCodec: TopicCodec<'penalized'>;
  packedCodec: TopicCodec<'packed'>;
  /** Output memory of every partition of this stage (default: one pool of PACK_SLAB_POOL_BYTES per stage, i.e. per process). */
  slabPool?: SlabPool;
  /** Reads back the rows of penalized records written by reference (always needed to read such records). */
  rows?: RowResolver;
  /** Groups remembered per partition by the ledger (default PACK_LEDGER_GROUPS). */
  ledgerGroups?: number;
  /** Says what the ledger kept from being packed again. */
  log?: (message: string) => void;
}

/**
 * The most free output memory the pack stage keeps for reuse, for all its
 * partitions together (README "Sizing"); one group's value up to this size
 * is recycled. Values still held by the producer are not counted here.
 */
export const PACK_SLAB_POOL_BYTES = 512 * 1024 * 1024;

/** The pack stage, and the hook that gives a packed value's memory back once the producer let go of it. */
export interface PackStage extends Stage {
  /**
   * Call once the transaction that carried `value` (an `out.messages[i].value`
   * of this stage) committed or aborted with its sends acknowledged: its
   * buffer then goes back to the pool for a later group. Not calling it is
   * safe (the GC frees the buffer, the next group takes fresh memory);
   * calling it early is not. A second or stale call is ignored.
   * @returns whether the buffer came back.
   */
  release(value: Buffer): boolean;
}

/** A dead letter of one whole penalized group, carrying its input record. */
function groupLetter(reason: DeadLetterReason, message: string, group: PenalizedGroup, source: SourceRecord, nowMs: number): DeadLetterRecord {
  return {
    reason,
    message,
    stage: 'pack',
    group_id: group.group_id,
    batch_id: group.batch_id,
    row_indices: group.rows.map((x) => x.row_index),
    missing_row_indices: [],
    records: [source],
    produced_at: nowMs,
    weight_version: group.weight_version,
  };
}

export function packStage(deps: PackStageDeps): PackStage {
  const { topics } = deps;
  // Output memory is recycled between groups: fresh pages cost more than
  // the packing itself (bench/README.md). The packer writes each group
  // straight into its framed value (packFramed), in a buffer from one pool
  // for every partition of the process, lent to the producer until release().
  const pool = deps.slabPool ?? new SlabPool(PACK_SLAB_POOL_BYTES);
  return {
    release: (value) => pool.settle(value),
    name: 'pack',
    inputTopic: topics.penalized,
    outputTopics: [topics.packed, topics.deadLetter, topics.packLedger],
    changelogTopic: topics.packLedger,
    createProcessor: () => {
      const ledger = new PackLedger(deps.ledgerGroups);
      return {
        async restore(record: ChangelogRecord): Promise<void> {
          ledger.restore(record);
        },
        gauges: () => ({ pack_ledger_groups: ledger.size }),
        async process(records: InputRecord[], nowMs: number): Promise<StageOutput> {
          const out = emptyOutput();
          let replays = 0;
          await forEachDecoded(records, deps.penalizedCodec, 'pack', out, nowMs, (group, source) => {
            let value;
            try {
              value = deps.packedCodec.packValue((memory) => packGroup(group, deps.config, memory), pool);
            } catch (e) {
              if (!(e instanceof PackError)) throw e;
              out.deadLetters.push(groupLetter('processing_error', `pack failed for group ${group.group_id}: ${e.message}`, group, source, nowMs));
              return;
            }
            const key = ledgerKey(group.batch_id, group.group_id);
            const digest = packedDigest(value.subarray(HEADER_BYTES));
            const verdict = ledger.check(key, digest);
            if (verdict !== 'new') {
              pool.give(value.buffer as ArrayBuffer);
              if (verdict === 'same') {
                replays++;
                deps.log?.(`pack: group ${group.group_id} of batch ${group.batch_id} (${source.topic}/${source.partition}@${source.offset}) was packed already; not packed again`);
                return;
              }
              out.deadLetters.push(
                groupLetter(
                  'group_already_packed',
                  `group ${group.group_id} of batch ${group.batch_id} was packed already, from different content; the version packed first stands ` +
                    `(a trainer never gets two versions of one group)`,
                  group,
                  source,
                  nowMs,
                ),
              );
              return;
            }
            pool.lend(value);
            out.messages.push({
              topic: topics.packed,
              key: group.group_id,
              value,
              headers: recordHeaders(group.batch_id, group.weight_version),
              // The ledger holds the group only if its packed record is written (not dead-lettered as too large).
              changelog: ledger.record(key, digest),
              dropped: () => ledger.forget(key),
            });
          }, deps.rows ? { resolver: penalizedReferences(deps.rows) } : undefined);
          if (replays > 0) out.counters = { ...out.counters, already_packed: replays };
          return out;
        },
      };
    },
  };
}

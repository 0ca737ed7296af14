/**
 * The pack stage (penalized → packed): stateless; record_to_train_batch and
 * pack_payload per group (SPEC §5). A group that cannot be packed (a
 * `PackError`, the one error `packGroup` throws) becomes a `processing_error`
 * dead letter carrying the input record; any other exception is a bug, not a
 * verdict on the group, and goes to the runtime's error policy.
 */
import type { PackConfig } from '../../config/schema.js';
import { packGroup } from '../../processors/pack.js';
import { PackError } from '../../processors/pack-error.js';
import { SlabPool } from '../../processors/slab.js';
import type { TopicCodec } from '../codecs/codec.js';
import { emptyOutput, type InputRecord, type Stage, type StageOutput } from '../api/stage.js';
import { forEachDecoded } from './decode-input.js';
import type { TopicNames } from '../topics/names.js';

export interface PackStageDeps {
  topics: TopicNames;
  config: PackConfig;
  penalizedCodec: TopicCodec<'penalized'>;
  packedCodec: TopicCodec<'packed'>;
  /** Output memory of every partition of this stage (default: one pool of PACK_SLAB_POOL_BYTES per stage, i.e. per process). */
  slabPool?: SlabPool;
}

/** The most free output memory the pack stage keeps for reuse, for all its partitions together (README "Sizing"). */
export const PACK_SLAB_POOL_BYTES = 256 * 1024 * 1024;

export function packStage(deps: PackStageDeps): Stage {
  const { topics } = deps;
  // Output memory is recycled between groups: fresh pages cost more than
  // the packing itself (bench/README.md). One pool for every partition of
  // the process: a group's slab is taken and released without an await in
  // between (encode() copies), so partitions never hold a slab at once.
  const pool = deps.slabPool ?? new SlabPool(PACK_SLAB_POOL_BYTES);
  return {
    name: 'pack',
    inputTopic: topics.penalized,
    outputTopics: [topics.packed, topics.deadLetter],
    createProcessor: () => {
      return {
        async process(records: InputRecord[], nowMs: number): Promise<StageOutput> {
          const out = emptyOutput();
          await forEachDecoded(records, deps.penalizedCodec, 'pack', out, nowMs, (group, source) => {
            let packed;
            try {
              packed = packGroup(group, deps.config, pool.source);
            } catch (e) {
              if (!(e instanceof PackError)) throw e;
              out.deadLetters.push({
                reason: 'processing_error',
                message: `pack failed for group ${group.group_id}: ${e.message}`,
                stage: 'pack',
                group_id: group.group_id,
                batch_id: group.batch_id,
                row_indices: group.rows.map((x) => x.row_index),
                missing_row_indices: [],
                records: [source],
                produced_at: nowMs,
              });
              return;
            }
            const value = deps.packedCodec.encode(packed);
            pool.release(packed);
            out.messages.push({ topic: topics.packed, key: group.group_id, value });
          });
          return out;
        },
      };
    },
  };
}

/**
 * The pack stage (penalized → packed): stateless; record_to_train_batch and
 * pack_payload per group (SPEC §5). A group that cannot be packed becomes a
 * `processing_error` dead letter carrying the input record.
 */
import type { PackConfig } from '../../config/schema.js';
import { packGroup } from '../../processors/pack.js';
import { SlabPool } from '../../processors/slab.js';
import type { TopicCodec } from '../codec.js';
import { emptyOutput, type InputRecord, type Stage, type StageOutput } from '../stage.js';
import { forEachDecoded } from './decode-input.js';
import type { TopicNames } from '../topics.js';

export interface PackStageDeps {
  topics: TopicNames;
  config: PackConfig;
  penalizedCodec: TopicCodec<'penalized'>;
  packedCodec: TopicCodec<'packed'>;
}

export function packStage(deps: PackStageDeps): Stage {
  const { topics } = deps;
  return {
    name: 'pack',
    inputTopic: topics.penalized,
    outputTopics: [topics.packed, topics.deadLetter],
    createProcessor: () => {
      // Output memory is recycled between groups: fresh pages cost more than
      // the packing itself (bench/README.md). encode() copies, so a group's
      // slab is released right after its record is encoded.
      const pool = new SlabPool(256 * 1024 * 1024);
      return {
        async process(records: InputRecord[], nowMs: number): Promise<StageOutput> {
          const out = emptyOutput();
          await forEachDecoded(records, deps.penalizedCodec, 'pack', out, nowMs, (group, source) => {
            let packed;
            try {
              packed = packGroup(group, deps.config, pool.source);
            } catch (e) {
              out.deadLetters.push({
                reason: 'processing_error',
                message: `pack failed for group ${group.group_id}: ${(e as Error).message}`,
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

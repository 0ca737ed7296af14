/**
 * The postprocess stage (group-complete → penalized + metrics): stateless;
 * each group is postprocessed on its own (SPEC §4). Group metrics go to
 * `rollout.metrics` keyed by batch id. A group the processor rejects is a
 * dead letter (its decision); an exception goes to the runtime's error
 * policy (runtime.poison), as in the offline runner.
 */
import { postprocessGroup, type ResolvedPostprocessConfig } from '../../processors/postprocess.js';
import { encodeProgress, type BatchProgress } from './batch-progress.js';
import type { TopicCodec } from '../codecs/codec.js';
import { deadLetterRecord } from '../api/dead-letters.js';
import { emptyOutput, type InputRecord, type Stage, type StageOutput } from '../api/stage.js';
import { recordHeaders } from '../api/headers.js';
import { forEachDecoded } from './decode-input.js';
import type { TopicNames } from '../topics/names.js';
import { asWritten } from '../codecs/row-refs.js';
import { groupReferences, type RowResolver } from '../codecs/row-resolver.js';

export interface PostprocessStageDeps {
  topics: TopicNames;
  config: ResolvedPostprocessConfig;
  groupCodec: TopicCodec<'groupComplete'>;
  penalizedCodec: TopicCodec<'penalized'>;
  metricsCodec: TopicCodec<'metrics'>;
  /** Reads back the rows of group-complete records written by reference (always needed to read such records). */
  rows?: RowResolver;
  /** `runtime.intermediate_records: reference`: penalized records carry the group's row references instead of its message logs. */
  references?: boolean;
}

export function postprocessStage(deps: PostprocessStageDeps): Stage {
  const { topics } = deps;
  return {
    name: 'postprocess',
    inputTopic: topics.groupComplete,
    outputTopics: [topics.penalized, topics.metrics, topics.deadLetter, topics.batchProgress],
    createProcessor: () => ({
      async process(records: InputRecord[], nowMs: number): Promise<StageOutput> {
        const out = emptyOutput();
        const failed = (group: { batch_id: string; group_id: string }) =>
          out.messages.push({
            topic: topics.batchProgress,
            key: group.batch_id,
            value: encodeProgress({ type: 'group_failed', batch_id: group.batch_id, group_id: group.group_id }),
            headers: recordHeaders(group.batch_id),
          });
        const references = deps.rows ? { resolver: groupReferences(deps.rows), onGone: failed } : undefined;
        await forEachDecoded(records, deps.groupCodec, 'postprocess', out, nowMs, (group, source) => {
          const result = postprocessGroup(group, deps.config);
          const weightVersion = group.rows[0]?.weight_version ?? null;
          const progress = (p: BatchProgress) => out.messages.push({ topic: topics.batchProgress, key: group.batch_id, value: encodeProgress(p), headers: recordHeaders(group.batch_id) });
          if (!result.ok) {
            out.deadLetters.push({ ...deadLetterRecord(result.deadLetter, 'postprocess', [source], nowMs), weight_version: weightVersion });
            failed(group);
            return;
          }
          progress({ type: 'group_rows', batch_id: group.batch_id, group_id: group.group_id, group_index: group.group_index, rows: result.metricRows });
          const headers = recordHeaders(group.batch_id, result.penalized.weight_version);
          // The record as written is also what the next node gets in process (fused): the rows' fields and, by reference,
          // the references with the fingerprint of the ingest config that derived the rows (the group's, passed on).
          const written = asWritten(result.penalized, deps.references ? (group.row_refs ?? null) : null, group.ingest_fingerprint ?? null);
          out.messages.push({ topic: topics.penalized, key: group.group_id, value: deps.penalizedCodec.encode(written), decoded: written, headers });
          out.messages.push({
            topic: topics.metrics,
            key: group.batch_id,
            headers,
            value: deps.metricsCodec.encode({
              scope: 'group',
              group_id: group.group_id,
              batch_id: group.batch_id,
              values: result.metrics,
              produced_at: nowMs,
            }),
          });
        }, references);
        return out;
      },
      async poisoned(record: InputRecord): Promise<StageOutput> {
        // Batch metrics wait for every group of a batch: tell them this one failed.
        const out = emptyOutput();
        const group = record.value ? await deps.groupCodec.decode(record.value).catch(() => null) : null;
        if (group) {
          out.messages.push({
            topic: topics.batchProgress,
            key: group.batch_id,
            value: encodeProgress({ type: 'group_failed', batch_id: group.batch_id, group_id: group.group_id }),
            headers: recordHeaders(group.batch_id),
          });
        }
        return out;
      },
    }),
  };
}

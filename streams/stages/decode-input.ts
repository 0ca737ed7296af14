/**
 * The common shape of a stateless stage's batch: decode each input record
 * with the stage's codec; an undecodable one (no value, not ours, corrupt)
 * becomes an `undecodable` dead letter carrying the original bytes, and the
 * rest go to `handle` in offset order.
 */
import type { RecordKind } from '../../schemas/index.js';
import type { RecordTypes, TopicCodec } from '../codecs/codec.js';
import type { SourceRecord } from '../api/dead-letter-record.js';
import { undecodableRecord } from '../api/dead-letters.js';
import { sourceOf, type InputRecord, type StageOutput } from '../api/stage.js';
import { UndecodableError } from '../codecs/wire-format.js';

export async function forEachDecoded<K extends RecordKind>(
  records: InputRecord[],
  codec: TopicCodec<K>,
  stage: string,
  out: StageOutput,
  nowMs: number,
  handle: (value: RecordTypes[K], source: SourceRecord) => void,
): Promise<void> {
  for (const r of records) {
    const source = sourceOf(r);
    let value: RecordTypes[K];
    try {
      if (!r.value) throw new UndecodableError('record has no value');
      // Fused: the upstream node's own object, equal to decoding these bytes.
      value = r.decoded !== undefined ? (r.decoded as RecordTypes[K]) : await codec.decode(r.value);
    } catch (e) {
      if (!(e instanceof UndecodableError)) throw e;
      out.deadLetters.push(undecodableRecord(stage, source, e.message, nowMs));
      continue;
    }
    handle(value, source);
  }
}

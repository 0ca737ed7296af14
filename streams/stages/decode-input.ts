/**
 * The common shape of a stateless stage's batch: decode each input record
 * with the stage's codec; an undecodable one (no value, not ours, corrupt)
 * becomes an `undecodable` dead letter carrying the original bytes, and the
 * rest go to `handle` in offset order. A reference record (row-refs.ts) is
 * handed over with its rows read back: `resolve` reads a chunk of records'
 * rows at once (bounded by RESOLVE_CHUNK_ROWS rows in memory), and a record
 * whose rows are gone becomes an `incomplete_group` dead letter. A chunk
 * set the chunk reader could not hand on whole (streams/chunks/) becomes an
 * `incomplete_record` dead letter, a chunk whose header does not parse an
 * `undecodable` one, and a skipped set nothing at all: each is committed
 * past in the same transaction.
 */
import type { RecordKind } from '../../schemas/index.js';
import type { DeadLetterRecord } from '../api/dead-letter-record.js';
import type { RecordTypes, TopicCodec } from '../codecs/codec.js';
import type { SourceRecord } from '../api/dead-letter-record.js';
import { deadLetterRecord, undecodableRecord } from '../api/dead-letters.js';
import { sourceOf, type InputRecord, type StageOutput } from '../api/stage.js';
import { UndecodableError } from '../codecs/wire-format.js';
import type { RowRefFields } from '../codecs/row-refs.js';
import type { ReferenceResolver } from '../codecs/row-resolver.js';

/** Rows of reference records held at once while resolving: a chunk of records is resolved, handled and dropped. */
export const RESOLVE_CHUNK_ROWS = 256;

/**
 * What becomes of a record the chunk reader marked: the dead letter it is
 * (`incomplete_record` for a set not read whole, `undecodable` for a chunk
 * whose header does not parse), 'skip' for a set skipped unread, or null for
 * a record to decode (whole, or reassembled).
 */
export function chunkOutcome(stage: string, r: InputRecord, nowMs: number): DeadLetterRecord | 'skip' | null {
  const c = r.chunk;
  if (!c || c.kind === 'record') return null;
  if (c.kind === 'skipped') return 'skip';
  const source = sourceOf(r);
  if (c.kind === 'undecodable') return undecodableRecord(stage, source, c.message, nowMs);
  return deadLetterRecord(
    {
      reason: 'incomplete_record',
      message: `chunk set ${c.setId} at ${r.topic} ${r.partition}@${r.offset}..${c.lastOffset} cannot be read whole: ${incompleteWhy(c.detail)} (${c.have} of ${c.count} chunks read)`,
      group_id: r.key ? r.key.toString('utf8') : null,
      batch_id: null,
      row_indices: [],
      missing_row_indices: [],
      payloads: [],
    },
    stage,
    [{ ...source, value: null }],
    nowMs,
  );
}

function incompleteWhy(detail: string): string {
  switch (detail) {
    case 'headless':
      return 'its first chunk is before where reading started';
    case 'log_start':
      return 'its first chunk is below the log start (deleted by retention)';
    case 'inconsistent':
      return 'a chunk does not continue the set';
    case 'crc_mismatch':
      return 'the reassembled value does not match its checksum or length';
    case 'timeout':
      return 'no chunk came for kafka.chunk_wait_ms and nothing is left to fetch';
    case 'memory_cap':
      return 'open sets passed runtime.max_inflight_bytes';
    default:
      return detail;
  }
}

interface Decoded<T> {
  value: T;
  source: SourceRecord;
}

export async function forEachDecoded<K extends RecordKind>(
  records: InputRecord[],
  codec: TopicCodec<K>,
  stage: string,
  out: StageOutput,
  nowMs: number,
  handle: (value: RecordTypes[K], source: SourceRecord) => void,
  references?: {
    resolver: ReferenceResolver<RecordTypes[K]>;
    /** Called after a record's `incomplete_group` dead letter was written (e.g. to tell batch metrics). */
    onGone?: (value: RecordTypes[K], source: SourceRecord) => void;
  },
): Promise<void> {
  let chunk: Decoded<RecordTypes[K]>[] = [];
  let chunkRows = 0;
  const flush = async () => {
    const pending = chunk.filter((d) => (d.value as RowRefFields).unresolved);
    const answers = pending.length > 0 && references ? await references.resolver.resolve(pending.map((d) => d.value)) : [];
    const byRecord = new Map(pending.map((d, i) => [d, answers[i]!]));
    for (const d of chunk) {
      const answer = byRecord.get(d);
      if (answer === undefined) {
        handle(d.value, d.source);
      } else if (answer.ok) {
        handle(references!.resolver.withRows(d.value, answer.rows), d.source);
      } else {
        const g = d.value as unknown as { group_id: string; batch_id: string; group_index: number; num_generations: number; row_refs: unknown[] };
        const first = g.group_index * g.num_generations;
        out.deadLetters.push(
          deadLetterRecord(
            {
              reason: 'incomplete_group',
              message: answer.message,
              group_id: g.group_id,
              batch_id: g.batch_id,
              row_indices: g.row_refs.map((_, i) => first + i),
              missing_row_indices: answer.missing,
              payloads: [],
            },
            stage,
            [d.source],
            nowMs,
          ),
        );
        references!.onGone?.(d.value, d.source);
      }
    }
    chunk = [];
    chunkRows = 0;
  };
  for (const r of records) {
    const outcome = chunkOutcome(stage, r, nowMs);
    if (outcome === 'skip') continue;
    if (outcome) {
      out.deadLetters.push(outcome);
      continue;
    }
    const source = sourceOf(r);
    let value: RecordTypes[K];
    try {
      if (!r.value) throw new UndecodableError('record has no value');
      // Fused: the upstream node's own object, equal to decoding these bytes (rows in place).
      value = r.decoded !== undefined ? (r.decoded as RecordTypes[K]) : await codec.decode(r.value);
      const refs = (value as RowRefFields).unresolved ? (value as RowRefFields).row_refs : undefined;
      if (refs && !references) throw new UndecodableError(`${stage} reads ${codec.kind} records with row references, but has no reader of their rows`);
      chunkRows += refs?.length ?? 0;
    } catch (e) {
      if (!(e instanceof UndecodableError)) throw e;
      out.deadLetters.push(undecodableRecord(stage, source, e.message, nowMs));
      continue;
    }
    chunk.push({ value, source });
    if (chunkRows >= RESOLVE_CHUNK_ROWS) await flush();
  }
  await flush();
}

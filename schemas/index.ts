/**
 * The Avro schemas of SPEC §1, one per topic value, loaded from the `.avsc`
 * files beside this module (the files are the source of truth; the Python
 * client reads the same files).
 */
import { readFileSync } from 'node:fs';

export type RecordKind = 'rowCompleted' | 'groupComplete' | 'penalized' | 'packed' | 'deadLetter' | 'metrics';

const FILES: Record<RecordKind, string> = {
  rowCompleted: 'row-completed.avsc',
  groupComplete: 'group-complete.avsc',
  penalized: 'penalized.avsc',
  packed: 'packed.avsc',
  deadLetter: 'dead-letter.avsc',
  metrics: 'metrics.avsc',
};

const cache = new Map<RecordKind, object>();

/** The parsed Avro schema (JSON) of a record kind. */
export function avroSchema(kind: RecordKind): object {
  let schema = cache.get(kind);
  if (!schema) {
    schema = JSON.parse(readFileSync(new URL(FILES[kind], import.meta.url), 'utf8')) as object;
    cache.set(kind, schema);
  }
  return schema;
}

export const RECORD_KINDS = Object.keys(FILES) as RecordKind[];

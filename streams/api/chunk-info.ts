/**
 * What the chunk readers (streams/chunks/) say of a record they handed on:
 * shared by the Kafka seams (FetchedRecord) and the stages (InputRecord).
 */
type Offset = string;

/** What a chunk reader says of a record it handed on (absent on a record that was never chunked). */
export type ChunkInfo =
  /** Reassembled from `chunks` records, the last at `lastOffset`. */
  | { kind: 'record'; lastOffset: Offset; chunks: number }
  /** A set that cannot be handed on whole (`value` is null): an `incomplete_record` dead letter. */
  | { kind: 'incomplete'; lastOffset: Offset; setId: string; have: number; count: number; detail: string }
  /** A value starting with the chunk magic byte whose header does not parse (`value` holds its bytes): an `undecodable` dead letter. */
  | { kind: 'undecodable'; lastOffset: Offset; message: string }
  /** A set dropped from its first chunk's headers without being read (`value` is null): only its offsets move on. */
  | { kind: 'skipped'; lastOffset: Offset; chunks: number };

/**
 * An OffsetReader that answers with whole records (docs/design-chunked-records.md
 * §3): by-reference rows and the restore read-back name a record by its
 * offset, which for a chunked record is its first chunk's. A named offset
 * holding a later chunk is not the record its reference names, and is absent
 * from the answer (the callers' existing "gone" path). From a first chunk the
 * reader reads forward to the set's last chunk, passing over the records of
 * other sets and whole records between them without keeping them; a set that
 * does not complete (a chunk missing, a CRC mismatch) is absent too.
 */
import type { FetchedRecord, Offset, OffsetReader } from '../kafka/types.js';
import { isChunk, parseChunk } from './chunk-format.js';
import { toFetchedRecord, type ChunkReaderOptions } from './chunked-group-source.js';
import { Reassembler } from './reassembler.js';

/** Windows of offsets with no record at all in a row after which a set is given up (aborted data and markers only there). */
const MAX_EMPTY_WINDOWS = 32;
/** The largest window of offsets one forward read asks for. */
const MAX_WINDOW = 4096;

export class ChunkedOffsetReader<R extends OffsetReader = OffsetReader> implements OffsetReader {
  constructor(
    readonly inner: R,
    private readonly o: ChunkReaderOptions,
  ) {}

  async read(topic: string, partition: number, offsets: Offset[]): Promise<Map<Offset, FetchedRecord>> {
    const found = await this.inner.read(topic, partition, offsets);
    const out = new Map<Offset, FetchedRecord>();
    for (const [offset, r] of found) {
      if (!isChunk(r.value)) {
        out.set(offset, r);
        continue;
      }
      const whole = await this.readSet(topic, partition, r);
      if (whole) out.set(offset, whole);
    }
    return out;
  }

  /** The whole record whose first chunk is `first`; null when `first` is no first chunk or its set does not complete. */
  private async readSet(topic: string, partition: number, first: FetchedRecord): Promise<FetchedRecord | null> {
    let head;
    try {
      head = parseChunk(first.value!, this.o.maxValueBytes);
    } catch {
      return null; // undecodable: the caller's decode would fail on it too, and it is no row either
    }
    if (head.index !== 0) return null;
    const id = head.setId.toString('hex');
    const re = new Reassembler({ start: first.offset, trusted: true, maxHeldBytes: Number.MAX_SAFE_INTEGER, chunkWaitMs: Number.MAX_SAFE_INTEGER, ...(this.o.maxValueBytes !== undefined ? { maxValueBytes: this.o.maxValueBytes } : {}) });
    re.push(first, 0);
    let at = BigInt(first.offset) + 1n;
    let have = 1;
    let window = head.count - 1;
    for (let empty = 0; empty < MAX_EMPTY_WINDOWS; ) {
      // Never past the set's last chunk: the remaining chunks lie at `at + (count - have) - 1` or later.
      const ask = Array.from({ length: window }, (_, i) => (at + BigInt(i)).toString());
      const got = await this.inner.read(topic, partition, ask);
      at += BigInt(window);
      if (got.size === 0) {
        empty++;
        window = Math.min(window * 2, MAX_WINDOW);
        continue;
      }
      empty = 0;
      for (const o of ask) {
        const r = got.get(o);
        if (!r || !isChunk(r.value)) continue;
        let c;
        try {
          c = parseChunk(r.value!, this.o.maxValueBytes);
        } catch {
          continue;
        }
        if (c.setId.toString('hex') !== id) continue; // another set's chunk: passed over
        re.push(r, 0);
        have++;
        const done = re.take()[0];
        if (done) return done.kind === 'record' ? toFetchedRecord(done) : null;
      }
      window = head.count - have;
      if (window <= 0) return null;
    }
    return null;
  }

  /** The inner reader's request counter, where it has one (what tests and benchmarks look at). */
  get fetches(): number {
    return (this.inner as { fetches?: number }).fetches ?? 0;
  }

  get reads(): number {
    return (this.inner as { reads?: number }).reads ?? 0;
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

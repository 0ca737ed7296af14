/**
 * A scan that hands on whole records only (docs/design-chunked-records.md
 * §3): one Reassembler per partition range over the client's own scan. A
 * range's start is trusted (`trustedStarts`: a committed offset) or not
 * (`--from-offset`, `--from-time`, a tail from the log start); a set that
 * began before an untrusted start, or is still open at the end of its range,
 * is not handed on whole: it goes to `onChunkSet` when given (the edge
 * reports it on stderr) and is otherwise handed on as an `incomplete` record.
 * `raw` scans (the changelogs, which never hold chunks) pass straight through.
 */
import type { ChunkSetReport, FetchedRecord, Offset, PartitionRange, ScanCallback, ScanOptions, ScanRecord, ScanResult } from '../kafka/types.js';
import type { ChunkReaderOptions } from './chunked-group-source.js';
import { toFetchedRecord } from './chunked-group-source.js';
import { Reassembler, type Reassembled } from './reassembler.js';

export type ScanFn = (ranges: PartitionRange[], onRecord: ScanCallback, options?: ScanOptions) => Promise<ScanResult>;

/** The log start of a partition now (for a headless set under a trusted start). */
export type LogStartOf = (topic: string, partition: number) => Promise<Offset>;

/** What the edge prints for a set it did not hand on. */
export function describeChunkSet(r: ChunkSetReport): string {
  const where = `${r.topic} ${r.partition}@${r.firstOffset}..${r.lastOffset}`;
  switch (r.detail) {
    case 'headless':
      return `skipped incomplete set ${r.setId} at ${where}: its first chunk is before the start`;
    case 'log_start':
      return `skipped incomplete set ${r.setId} at ${where}: its first chunk is below the log start (deleted by retention)`;
    case 'open_at_end':
      return `skipped incomplete set ${r.setId} at ${where}: ${r.have} of ${r.count} chunks before the end of the range`;
    default:
      return `skipped incomplete set ${r.setId} at ${where}: ${r.detail} (${r.have} of ${r.count} chunks)`;
  }
}

export function reportOf(r: Reassembled & { kind: 'incomplete' }, detail = r.incomplete.detail as string): ChunkSetReport {
  const i = r.incomplete;
  return { topic: r.topic, partition: r.partition, setId: i.setId, firstOffset: i.firstOffset, lastOffset: i.lastOffset, have: i.have, count: i.count, detail };
}

function toScanRecord(r: Reassembled): ScanRecord {
  const f = toFetchedRecord(r);
  return { ...f, timestamp: String(f.timestamp) };
}

/**
 * Builds a chunk-reading scan over `scan`. Whole records keep their order
 * within a partition (first-chunk order); the result's `records` counts what
 * reached `onRecord`.
 */
export function chunkedScan(scan: ScanFn, logStartOf: LogStartOf, o: ChunkReaderOptions): ScanFn {
  return async (ranges, onRecord, options = {}) => {
    if (options.raw) return scan(ranges, onRecord, options);
    const trusted = options.trustedStarts === true;
    const states = new Map<string, Reassembler>();
    for (const r of ranges) {
      states.set(`${r.topic}/${r.partition}`, new Reassembler({ start: r.start, trusted, maxHeldBytes: o.maxHeldBytes, chunkWaitMs: o.chunkWaitMs, ...(o.maxValueBytes !== undefined ? { maxValueBytes: o.maxValueBytes } : {}) }));
    }
    let delivered = 0;
    let stopped = false;
    const hand = async (ready: Reassembled[], atEnd = false): Promise<boolean> => {
      for (const r of ready) {
        if (r.kind === 'skipped') continue;
        if (r.kind === 'incomplete' && options.onChunkSet) {
          options.onChunkSet(reportOf(r, atEnd && r.incomplete.detail === 'timeout' ? 'open_at_end' : r.incomplete.detail));
          continue;
        }
        delivered++;
        if ((await onRecord(toScanRecord(r))) === false) {
          stopped = true;
          return false;
        }
      }
      return true;
    };
    const result = await scan(
      ranges,
      async (rec) => {
        if (stopped) return false;
        const key = `${rec.topic}/${rec.partition}`;
        let re = states.get(key);
        if (!re) {
          re = new Reassembler({ start: rec.offset, trusted, maxHeldBytes: o.maxHeldBytes, chunkWaitMs: o.chunkWaitMs });
          states.set(key, re);
        }
        const fetched: FetchedRecord = { ...rec, timestamp: Number(rec.timestamp) };
        const question = re.push(fetched, Date.now());
        if (question) re.answerLogStart(await logStartOf(rec.topic, rec.partition));
        return hand(re.take());
      },
      options,
    );
    if (stopped) return { ...result, records: delivered, complete: false };
    // A set still open where its range ended: given up (the records held behind it follow).
    for (const re of states.values()) {
      if (re.openSets === 0) continue;
      re.expire(Number.MAX_SAFE_INTEGER, { fetchedTo: '0', lastStable: '0', highWatermark: '0' });
      if (!(await hand(re.take(), true))) return { ...result, records: delivered, complete: false };
    }
    return { ...result, records: delivered };
  };
}

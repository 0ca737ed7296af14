/**
 * The chunk readers applied to a whole client (docs/design-chunked-records.md
 * §3): `chunkedClient` for the runtime's KafkaClient (group sources and
 * scans; sinks and the admin pass through), `chunkedOpsClient` for the
 * edge's OpsClient (scans and tails). The factories apply them, so nothing
 * above streams/kafka ever sees a chunk.
 */
import type { ChunkSetReport, GroupSource, GroupSourceOptions, KafkaAdmin, KafkaClient, OpsClient, ScanRecord, TailOptions, TopicTail } from '../kafka/types.js';
import type { Logger } from '../runtime/logger.js';
import { ChunkedGroupSource, toFetchedRecord, type ChunkReaderOptions } from './chunked-group-source.js';
import { chunkedScan, describeChunkSet, reportOf, type LogStartOf } from './chunked-scan.js';
import { Reassembler } from './reassembler.js';

/** `runtime.max_inflight_bytes`' and `kafka.chunk_wait_ms`' defaults, for factories given no config of them. */
export const DEFAULT_CHUNK_READER: ChunkReaderOptions = { maxHeldBytes: 256 * 1024 * 1024, chunkWaitMs: 120_000 };

/** The chunk readers' options from a config (`runtime.max_inflight_bytes` when given, `kafka.chunk_wait_ms`). */
export function chunkReaderOptions(kafka: { chunk_wait_ms: number }, runtime?: { max_inflight_bytes: number }): ChunkReaderOptions {
  return { maxHeldBytes: runtime?.max_inflight_bytes ?? DEFAULT_CHUNK_READER.maxHeldBytes, chunkWaitMs: kafka.chunk_wait_ms };
}

export interface ChunkedClientOptions extends ChunkReaderOptions {
  log?: Logger;
}

function logStartVia(admin: () => Promise<KafkaAdmin>): LogStartOf {
  return async (topic, partition) => {
    const a = await admin();
    try {
      return (await a.topicOffsets(topic)).find((x) => x.partition === partition)?.low ?? '0';
    } finally {
      await a.close().catch(() => undefined);
    }
  };
}

/** `inner` with group sources and scans that hand on whole records only. */
export function chunkedClient<C extends KafkaClient>(inner: C, o: ChunkedClientOptions = DEFAULT_CHUNK_READER): C {
  const scan = chunkedScan((r, cb, opts) => inner.scan(r, cb, opts), logStartVia(() => inner.admin()), o);
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === 'groupSource') {
        return (so: GroupSourceOptions): GroupSource =>
          new ChunkedGroupSource(target.groupSource(so), { ...o, groupId: so.groupId, topic: so.topic, admin: () => target.admin() });
      }
      if (prop === 'scan') return scan;
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** A report line on stderr: what an edge reader says of a set it did not print. */
export function reportOnStderr(r: ChunkSetReport): void {
  process.stderr.write(`${describeChunkSet(r)}\n`);
}

/**
 * `inner` with scans and tails that hand on whole records only. Their starts
 * are untrusted: a set that began before one is reported (`onChunkSet`, by
 * default a line on stderr), never handed on.
 */
export function chunkedOpsClient<C extends OpsClient>(inner: C, o: ChunkReaderOptions = DEFAULT_CHUNK_READER): C {
  const scan = chunkedScan((r, cb, opts) => inner.scan(r, cb, opts), logStartVia(() => inner.admin()), o);
  const tail = async (topics: string[], onRecord: (r: ScanRecord) => void | Promise<void>, t: TailOptions = {}): Promise<TopicTail> => {
    const report = t.onChunkSet ?? reportOnStderr;
    const states = new Map<string, Reassembler>();
    return inner.tail(
      topics,
      async (rec) => {
        const key = `${rec.topic}/${rec.partition}`;
        let re = states.get(key);
        if (!re) {
          // A tail reads from the log start: a set whose head is gone is reported, never printed.
          re = new Reassembler({ start: rec.offset, trusted: false, maxHeldBytes: o.maxHeldBytes, chunkWaitMs: o.chunkWaitMs, ...(o.maxValueBytes !== undefined ? { maxValueBytes: o.maxValueBytes } : {}) });
          states.set(key, re);
        }
        re.push({ ...rec, timestamp: Number(rec.timestamp) }, Date.now());
        for (const r of re.take()) {
          if (r.kind === 'skipped') continue;
          if (r.kind === 'incomplete') report(reportOf(r));
          else {
            const f = toFetchedRecord(r);
            await onRecord({ ...f, timestamp: String(f.timestamp) });
          }
        }
      },
      t,
    );
  };
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === 'scan') {
        return (ranges: Parameters<OpsClient['scan']>[0], cb: Parameters<OpsClient['scan']>[1], opts: Parameters<OpsClient['scan']>[2] = {}) =>
          scan(ranges, cb, { onChunkSet: reportOnStderr, ...opts });
      }
      if (prop === 'tail') return tail;
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/**
 * The chunk readers on a real broker: chunk sets written transactionally by
 * the test helper (streams/testing/chunk-sets.ts) into row-completed and
 * dead-letter on a fresh prefix. The pipeline, as the ops tests run it,
 * packs the chunked rows byte-equal to `offline all`; `replay`, `trace` and
 * `dlq list` show each chunked record once; a `replay --from-offset` inside
 * a set reports it on stderr and prints nothing of it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseDlqArgs, runDlq } from '../../cli/dlq.js';
import { captureIo } from '../../cli/io.js';
import { parseReplayArgs, runReplay } from '../../cli/replay.js';
import { formatTrace, runTrace } from '../../cli/trace.js';
import { formatJsonLine } from '../../json-form/form.js';
import { generateEvents, type LoadgenEvent } from '../../loadgen/index.js';
import type { RolloutRow } from '../../processors/types.js';
import type { DeadLetterRecord } from '../../streams/api/dead-letter-record.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { HEADER_BYTES } from '../../streams/codecs/wire-format.js';
import { createClient } from '../../streams/kafka/clients.js';
import type { OutgoingRecord, TransactionalSink } from '../../streams/kafka/types.js';
import { writeChunkSets, type SetPosition } from '../../streams/testing/chunk-sets.js';
import { subjectOf } from '../../streams/topics/names.js';
import { offlineOutputs } from '../unit/streams/driver-fixtures.js';
import { opsEnv, type OpsEnv } from './ops-fixture.js';

/** Rows of the small profile are a few kilobytes: each becomes several chunks. */
const PAYLOAD = 512;

let env: OpsEnv;
let events: LoadgenEvent[];
let rowPositions: SetPosition[];
/** The row each written record holds (null for a BatchEnd), by the index of its position. */
let rowAt: Array<RolloutRow | null>;
let deadLetter: DeadLetterRecord;
let sink: TransactionalSink;
let closeClient: () => Promise<void>;

beforeAll(async () => {
  env = await opsEnv('chunked-readers');
  events = [...generateEvents({ batches: 1, groupsPerBatch: 4, generations: 4, seed: 61, profile: 'small', runId: `${env.prefix}c` })];
  const rowCodec = await new TopicCodec('rowCompleted', subjectOf(env.names.rowCompleted), env.registry).init();
  const partitions = env.config.topics.partitions;
  const records: OutgoingRecord[] = events.flatMap((e): OutgoingRecord[] => {
    if (e.kind === 'row') return [{ topic: env.names.rowCompleted, key: e.row.group_id, value: rowCodec.encode({ kind: 'row', row: e.row }) }];
    if (e.kind === 'batch_end') {
      const value = rowCodec.encode({ kind: 'batch_end', end: e.end });
      return Array.from({ length: partitions }, (_, p) => ({ topic: env.names.rowCompleted, key: e.end.batch_id, value, partition: p }));
    }
    return [];
  });
  const client = await createClient(env.config.kafka, 'chunk-writer');
  closeClient = () => client.close();
  sink = client.transactionalSink(`${env.prefix}chunk-writer`, { transactionTimeoutMs: 30_000, partitionsOf: async () => partitions });
  await sink.init();
  rowAt = events.flatMap((e) => (e.kind === 'row' ? [e.row] : e.kind === 'batch_end' ? Array.from({ length: partitions }, () => null) : []));
  rowPositions = await writeChunkSets(sink, records, { payloadBytes: PAYLOAD, partitionsOf: () => partitions });
  // A chunked dead letter, written as a stage would write a large one.
  const dlCodec = await new TopicCodec('deadLetter', subjectOf(env.names.deadLetter), env.registry).init();
  deadLetter = {
    reason: 'processing_error',
    message: 'x'.repeat(3000),
    stage: 'postprocess',
    group_id: `${env.prefix}dl-group`,
    batch_id: 'b000009',
    row_indices: [0, 1],
    missing_row_indices: [],
    records: [],
    produced_at: Date.now(),
  };
  await writeChunkSets(sink, [{ topic: env.names.deadLetter, key: deadLetter.group_id, value: dlCodec.encode(deadLetter) }], { payloadBytes: PAYLOAD, partitionsOf: () => partitions });
});

afterAll(async () => {
  await sink?.close();
  await closeClient?.();
  await env?.stop();
});

const rowsOf = (es: LoadgenEvent[]) => es.flatMap((e) => (e.kind === 'row' ? [e.row] : []));

describe('chunk sets on a real broker', () => {
  test('the pipeline packs rows written as chunk sets byte-equal to offline all', async () => {
    expect(rowPositions.filter((p) => p.chunks > 1)).toHaveLength(rowsOf(events).length);
    const want = (await offlineOutputs(events, env.config)).packed;
    const { packed } = await env.settle(want.size, 0);
    const got = new Map(packed.map((r) => [r.key, r.value.subarray(HEADER_BYTES)]));
    expect(packed).toHaveLength(want.size);
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
    for (const [k, v] of want) expect(got.get(k)!.equals(v), `packed bytes of ${k}`).toBe(true);
  });

  test('replay prints each chunked row once, and a --from-offset inside a set reports it on stderr and prints nothing of it', async () => {
    const io = captureIo();
    await runReplay(parseReplayArgs(['--quiet', '--topic', 'rollout.row-completed']), env.config, process.cwd(), io);
    const rowLines = io.lines().filter((l) => l.startsWith('{"batch_id"') && l.includes('"row_index"'));
    expect(rowLines.sort()).toEqual(rowsOf(events).map((row) => formatJsonLine({ kind: 'row', record: row })).sort());

    // Start one past the first chunk of the partition's first set.
    const i = rowPositions.findIndex((p) => p.chunks > 1);
    const first = rowPositions[i]!;
    const from = (BigInt(first.offset) + 1n).toString();
    const io2 = captureIo();
    await runReplay(parseReplayArgs(['--quiet', '--topic', 'rollout.row-completed', '--from-offset', from]), env.config, process.cwd(), io2);
    expect(io2.stderr()).toMatch(new RegExp(`skipped incomplete set [0-9a-f]{32} at ${env.names.rowCompleted.replace(/\./g, '\\.')} ${first.partition}@${from}\\.\\.\\d+: its first chunk is before the start`));
    const printed = io2.lines().filter((l) => l.startsWith('{"batch_id"') && l.includes('"row_index"'));
    expect(printed.length).toBeLessThan(rowLines.length);
    expect(printed).not.toContain(formatJsonLine({ kind: 'row', record: rowAt[i]! }));
  });

  test('trace shows a chunked row once, as offsets a–b (n chunks)', async () => {
    const groupId = rowsOf(events)[0]!.group_id;
    const report = await runTrace(groupId, env.config);
    const rows = report.records.filter((r) => r.role === 'rowCompleted');
    expect(rows).toHaveLength(rowsOf(events).filter((r) => r.group_id === groupId).length);
    for (const r of rows) {
      const at = rowPositions.find((p) => p.partition === r.partition && p.offset === r.offset)!;
      expect(r).toMatchObject({ lastOffset: at.lastOffset, chunks: at.chunks });
    }
    const text = formatTrace(report);
    const r0 = rows[0]!;
    expect(text).toContain(`offsets ${r0.offset}–${r0.lastOffset} (${r0.chunks} chunks)`);
  });

  test('dlq list shows a chunked dead letter once, whole, and the pipeline wrote none', async () => {
    const io = captureIo();
    const result = await runDlq(parseDlqArgs(['list']), env.config, io);
    expect(result.entries.map((e) => e.record)).toEqual([deadLetter]);
    expect(io.stderr()).not.toMatch(/undecodable|incomplete/);
  });
});

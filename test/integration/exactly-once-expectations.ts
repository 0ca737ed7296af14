/**
 * What a run must produce, computed without Kafka (the offline runner on the
 * same rows), and the check every failure test ends with: every expected
 * group in rollout.packed exactly once and byte-equal to the offline result,
 * every expected dead letter exactly once.
 */
import { expect } from 'vitest';
import type { Kafka } from 'kafkajs';
import { runOffline } from '../../cli/offline.js';
import type { Config } from '../../config/schema.js';
import { collectExpectations, type LoadgenEvent } from '../../loadgen/index.js';
import { formatJsonLine, parseJsonLine } from '../../json-form/form.js';
import { AvroBodyCodec, TopicCodec } from '../../streams/codecs/codec.js';
import type { SchemaRegistryClient } from '../../streams/codecs/schema-registry.js';
import { subjectOf, topicNames } from '../../streams/topics/names.js';
import { HEADER_BYTES } from '../../streams/codecs/wire-format.js';
import { readTopic } from './topic-reader.js';

export interface ExpectedRun {
  packed: Map<string, Buffer>;
  deadLetters: string[];
}

export async function expectedRun(config: Config, events: LoadgenEvent[]): Promise<ExpectedRun> {
  const lines: string[] = [];
  const input = events
    .filter((e) => e.kind !== 'garbage')
    .map((e) => (e.kind === 'row' ? formatJsonLine({ kind: 'row', record: e.row }) : formatJsonLine({ kind: 'batch_end', end: e.end })));
  await runOffline('all', config, input, (l) => void lines.push(l));
  const body = new AvroBodyCodec('packed');
  const packed = new Map<string, Buffer>();
  for (const l of lines.map(parseJsonLine)) if (l.kind === 'packed') packed.set(l.packed.group_id, body.encodeFramed(l.packed, 0).subarray(HEADER_BYTES));
  const deadLetters = collectExpectations(events).deadLetters.map((e) => `${e.reason}:${e.group_id}`).sort();
  return { packed, deadLetters };
}

/** Reads the packed and dead-letter topics (read_committed) and asserts exactly-once equality. */
export async function assertExactlyOnce(kafka: Kafka, registry: SchemaRegistryClient, prefix: string, want: ExpectedRun, timeoutMs = 180_000): Promise<void> {
  const names = topicNames(prefix);
  const packed = await readTopic(kafka, names.packed, (rs) => new Set(rs.map((r) => r.key)).size >= want.packed.size, { timeoutMs, settleMs: 3000 });
  const counts = new Map<string, number>();
  for (const r of packed) counts.set(r.key, (counts.get(r.key) ?? 0) + 1);
  const duplicates = [...counts].filter(([, n]) => n > 1).map(([k]) => k);
  expect(duplicates, 'groups packed more than once').toEqual([]);
  expect([...counts.keys()].sort()).toEqual([...want.packed.keys()].sort());
  for (const r of packed) {
    expect(r.value.subarray(HEADER_BYTES).equals(want.packed.get(r.key)!), `packed bytes of ${r.key} equal the offline result`).toBe(true);
  }
  const dl = new TopicCodec('deadLetter', subjectOf(names.deadLetter), registry);
  const dead = await readTopic(kafka, names.deadLetter, (rs) => rs.length >= want.deadLetters.length, { timeoutMs: 60_000, settleMs: 2000 });
  const got = (await Promise.all(dead.map((r) => dl.decode(r.value)))).map((d) => `${d.reason}:${d.group_id}`).sort();
  expect(got).toEqual(want.deadLetters);
}

/**
 * Intermediate records by reference (issue 16): accumulate → postprocess →
 * pack through their stage processors, records passed as bytes (separate
 * mode) over an in-memory row-completed topic. Reference mode packs the same
 * bytes as full mode while group-complete and penalized shrink to a few
 * hundred bytes; rows that are gone or not where their reference says
 * dead-letter the group once, as incomplete_group with its row indices.
 */
import { describe, expect, test } from 'vitest';
import { configSchema, PIPELINE_STAGES } from '../../../config/schema.js';
import { generateEvents } from '../../../loadgen/generate-events.js';
import { gymResultFromRow } from '../../../loadgen/gym-result.js';
import { resolveIngestConfig, type ResolvedIngestConfig } from '../../../processors/ingest-config.js';
import { ingestFingerprint } from '../../../processors/ingest-fingerprint.js';
import { packStage } from '../../../streams/stages/pack-stage.js';
import { RolloutStreamError } from '../../../errors/index.js';
import { classify, ProcessingFailure } from '../../../streams/runtime/error-policy.js';
import { resolvePostprocessConfig } from '../../../processors/postprocess.js';
import type { RolloutRow } from '../../../processors/types.js';
import { avroSchema, type RecordKind } from '../../../schemas/index.js';
import type { InputRecord, OutputMessage, StageOutput } from '../../../streams/api/stage.js';
import { TopicCodec } from '../../../streams/codecs/codec.js';
import { RowResolver } from '../../../streams/codecs/row-resolver.js';
import type { SchemaRegistryClient } from '../../../streams/codecs/schema-registry.js';
import { RESOLVE_CHUNK_ROWS } from '../../../streams/stages/decode-input.js';
import { postprocessStage } from '../../../streams/stages/postprocess-stage.js';
import { topicNames } from '../../../streams/topics/names.js';
import { buildStages, STAGE_REGISTRY } from '../../../streams/stages/registry.js';
import { MemoryCluster } from '../../../streams/testing/memory-cluster.js';

const KINDS: RecordKind[] = ['rowCompleted', 'groupComplete', 'penalized', 'packed', 'metrics', 'deadLetter'];
// A registry stand-in for the codecs: one id per kind.
const registry = {
  register: async (_subject: string, schema: unknown) => 1 + KINDS.findIndex((k) => avroSchema(k) === schema),
  schemaById: async (id: number) => avroSchema(KINDS[id - 1]!),
} as unknown as SchemaRegistryClient;

const topics = topicNames('t.');
const config = configSchema.parse({});
const ingest = resolveIngestConfig(config.ingest, { configDir: '.', postprocessTokenizerPath: null });
const PARTITIONS = 2;

function rowsOf(groups: number, generations = 4, seed = 7): RolloutRow[] {
  const rows: RolloutRow[] = [];
  for (const e of generateEvents({ batches: 1, groupsPerBatch: groups, generations, seed })) if (e.kind === 'row') rows.push(e.row);
  return rows;
}

async function codecs() {
  const codec = <K extends RecordKind>(kind: K) => new TopicCodec(kind, `${kind}-value`, registry).init();
  return {
    row: await codec('rowCompleted'),
    group: await codec('groupComplete'),
    penalized: await codec('penalized'),
    packed: await codec('packed'),
    metrics: await codec('metrics'),
  };
}

type Codecs = Awaited<ReturnType<typeof codecs>>;

/** Writes rows (or their GymResults) to row-completed in the cluster, keyed by group. */
function publish(cluster: MemoryCluster, c: Codecs, rows: RolloutRow[], gym = false): void {
  cluster.createTopic(topics.rowCompleted, PARTITIONS);
  cluster.append(
    rows.map((row) => ({ topic: topics.rowCompleted, key: row.group_id, value: c.row.encode(gym ? { kind: 'gym_result', result: gymResultFromRow(row) } : { kind: 'row', row }) })),
    null,
  );
}

/** Output messages of `topic` as the next stage's input records (bytes only, as in separate mode). */
function asInputs(outs: StageOutput[], topic: string): InputRecord[] {
  return outs
    .flatMap((o) => o.messages)
    .filter((m: OutputMessage) => m.topic === topic)
    .map((m, i) => ({ topic, partition: 0, offset: String(i), key: typeof m.key === 'string' ? Buffer.from(m.key) : m.key, value: m.value, timestamp: 0 }));
}

interface Chain {
  groupComplete: InputRecord[];
  penalized: InputRecord[];
  packed: InputRecord[];
  deadLetters: StageOutput['deadLetters'];
  progress: OutputMessage[];
  reads: number;
}

async function runChain(cluster: MemoryCluster, c: Codecs, references: boolean, between?: () => void): Promise<Chain> {
  const reader = cluster.offsetReader();
  const rows = new RowResolver({ topic: topics.rowCompleted, reader, rowCodec: c.row, ingest });
  // The stages a process builds (streams/stages/registry.ts), over the cluster's partitions.
  const stages = await buildStages(PIPELINE_STAGES, {
    topics,
    config: configSchema.parse({ topics: { partitions: PARTITIONS } }),
    configDir: '.',
    ingest,
    codec: (kind) => new TopicCodec(kind, `${kind}-value`, registry).init(),
    rows,
    references,
  });
  const stage = (name: string) => stages.find((s) => s.name === name)!;
  const acc = stage('accumulate');
  const accOuts: StageOutput[] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    const inputs = cluster.readCommitted(topics.rowCompleted, p, 0n, 1e9).records.map((r) => ({ ...r, timestamp: 0 }));
    accOuts.push(await acc.createProcessor(p).process(inputs, 0));
  }
  between?.();
  const post = stage('postprocess');
  const groupComplete = asInputs(accOuts, topics.groupComplete);
  const postOut = await post.createProcessor(0).process(groupComplete, 0);
  const pack = stage('pack');
  const penalized = asInputs([postOut], topics.penalized);
  const packOut = await pack.createProcessor(0).process(penalized, 0);
  return {
    groupComplete,
    penalized,
    packed: asInputs([packOut], topics.packed),
    deadLetters: [...accOuts.flatMap((o) => o.deadLetters), ...postOut.deadLetters, ...packOut.deadLetters],
    progress: postOut.messages.filter((m) => m.topic === topics.batchProgress),
    reads: reader.reads,
  };
}

/** A postprocess stage reading references from `cluster`. */
function postprocessOver(cluster: MemoryCluster, c: Codecs, references: boolean) {
  return postprocessStage({
    topics,
    config: resolvePostprocessConfig(config.postprocess, { configDir: '.' }),
    groupCodec: c.group,
    penalizedCodec: c.penalized,
    metricsCodec: c.metrics,
    rows: new RowResolver({ topic: topics.rowCompleted, reader: cluster.offsetReader(), rowCodec: c.row, ingest }),
    references,
  });
}

/** A postprocess stage and a pack stage reading references from `cluster` with the ingest config `cfg`. */
function readersWith(cluster: MemoryCluster, c: Codecs, cfg: ResolvedIngestConfig) {
  const rows = new RowResolver({ topic: topics.rowCompleted, reader: cluster.offsetReader(), rowCodec: c.row, ingest: cfg });
  const post = postprocessStage({
    topics,
    config: resolvePostprocessConfig(config.postprocess, { configDir: '.' }),
    groupCodec: c.group,
    penalizedCodec: c.penalized,
    metricsCodec: c.metrics,
    rows,
    references: true,
  });
  const pack = packStage({ topics, config: config.pack, penalizedCodec: c.penalized, packedCodec: c.packed, rows });
  return { post: post.createProcessor(0), pack: pack.createProcessor(0) };
}

/** Another ingest configuration: other thinking tags (the conversion's malformed-thinking flag reads them). */
const otherIngest = resolveIngestConfig(configSchema.parse({ ingest: { thinking_tags: ['<reason>', '</reason>'] } }).ingest, { configDir: '.', postprocessTokenizerPath: null });

const bytes = (records: InputRecord[]) => records.reduce((n, r) => n + (r.value?.length ?? 0), 0);
const keyed = (records: InputRecord[]) => new Map(records.map((r) => [r.key!.toString(), r.value!.toString('base64')]));

describe('intermediate records by reference', () => {
  test.each([
    ['RolloutRows', false],
    ['GymResults', true],
  ])('packed output from %s is byte-identical to full mode; group-complete and penalized carry no rows', async (_name, gym) => {
    const c = await codecs();
    const rows = rowsOf(6);
    const full = new MemoryCluster();
    publish(full, c, rows, gym);
    const ref = new MemoryCluster();
    publish(ref, c, rows, gym);
    const a = await runChain(full, c, false);
    const b = await runChain(ref, c, true);
    expect(a.deadLetters).toEqual([]);
    expect(b.deadLetters).toEqual([]);
    expect(b.packed).toHaveLength(6);
    expect(keyed(b.packed)).toEqual(keyed(a.packed));
    // Full records carry the rows; references are a few bytes per row.
    expect(bytes(b.groupComplete)).toBeLessThan(bytes(a.groupComplete) / 20);
    expect(bytes(b.penalized)).toBeLessThan(bytes(a.penalized) / 10);
    const decoded = await c.group.decode(b.groupComplete[0]!.value!);
    expect(decoded.rows).toEqual([]);
    expect(decoded.unresolved).toBe(true);
    expect(decoded.row_refs).toHaveLength(4);
    const pen = await c.penalized.decode(b.penalized[0]!.value!);
    expect(pen.unresolved).toBe(true);
    expect(pen.prompt).toEqual([]);
    expect(pen.rows.every((r) => r.message_log.length === 0)).toBe(true);
  });

  test('a full-mode reader takes reference records and writes full ones (a config change between runs)', async () => {
    const c = await codecs();
    const cluster = new MemoryCluster();
    publish(cluster, c, rowsOf(3));
    const refChain = await runChain(cluster, c, true);
    const post = postprocessOver(cluster, c, false);
    const out = await post.createProcessor(0).process(refChain.groupComplete, 0);
    const penalized = out.messages.filter((m) => m.topic === topics.penalized);
    expect(penalized).toHaveLength(3);
    for (const m of penalized) {
      const p = await c.penalized.decode(m.value!);
      expect(p.row_refs).toBeUndefined();
      expect(p.rows.every((r) => r.message_log.length > 0)).toBe(true);
    }
  });

  test('rows deleted from row-completed before postprocess read them: each such group dead-letters once as incomplete_group with its row indices', async () => {
    const c = await codecs();
    const cluster = new MemoryCluster();
    const rows = rowsOf(8);
    publish(cluster, c, rows);
    const chain = await runChain(cluster, c, true, () => cluster.deleteRecords(topics.rowCompleted, 0, 5n));
    // The groups with a row at offsets 0..4 of partition 0.
    const hit = new Set(cluster.readCommitted(topics.rowCompleted, 0, 0n, 5).records.map((r) => r.key!.toString()));
    expect(hit.size).toBeGreaterThan(0);
    expect(chain.packed.map((r) => r.key!.toString()).sort()).toEqual(rows.map((r) => r.group_id).filter((g, i, a) => a.indexOf(g) === i && !hit.has(g)).sort());
    expect(chain.deadLetters.map((d) => d.group_id).sort()).toEqual([...hit].sort());
    for (const d of chain.deadLetters) {
      const gi = rows.find((r) => r.group_id === d.group_id)!.group_index;
      expect(d).toMatchObject({ reason: 'incomplete_group', stage: 'postprocess', row_indices: [0, 1, 2, 3].map((i) => gi * 4 + i) });
      expect(d.missing_row_indices.length).toBeGreaterThan(0);
      expect(d.message).toMatch(/cannot be read back: t\.rollout\.row-completed\[0\]@[0-4] is gone/);
      expect(d.records).toHaveLength(1);
    }
    // Batch metrics hear that the group failed.
    const failed = await Promise.all(chain.progress.map(async (m) => JSON.parse(m.value!.toString())));
    expect(failed.filter((p) => p.type === 'group_failed').map((p) => p.group_id).sort()).toEqual([...hit].sort());
  });

  test('a reference to another row (the topic recreated, offsets reused) is no row of the group', async () => {
    const c = await codecs();
    const cluster = new MemoryCluster();
    publish(cluster, c, rowsOf(2, 4));
    const chain = await runChain(cluster, c, true);
    const group = await c.group.decode(chain.groupComplete[0]!.value!);
    const wrong = { ...group, row_refs: [...group.row_refs!].reverse() };
    delete wrong.unresolved;
    const post = postprocessOver(cluster, c, true);
    const out = await post.createProcessor(0).process([{ ...chain.groupComplete[0]!, value: c.group.encode(wrong) }], 0);
    expect(out.deadLetters).toHaveLength(1);
    const first = group.group_index * 4;
    expect(out.deadLetters[0]).toMatchObject({ reason: 'incomplete_group', missing_row_indices: [first, first + 1, first + 2, first + 3] });
    expect(out.deadLetters[0]!.message).toContain(`holds row ${first + 3} of group ${group.group_id}, not row ${first} of`);
  });

  test(`a batch holding more than ${RESOLVE_CHUNK_ROWS} referenced rows is read in chunks, output in input order`, async () => {
    const c = await codecs();
    const cluster = new MemoryCluster();
    const groups = Math.ceil((RESOLVE_CHUNK_ROWS * 2.5) / 4);
    publish(cluster, c, rowsOf(groups, 4, 11));
    const chain = await runChain(cluster, c, true);
    expect(chain.deadLetters).toEqual([]);
    expect(chain.packed.map((r) => r.key!.toString())).toEqual(chain.groupComplete.map((r) => r.key!.toString()));
    // postprocess and pack: 3 chunks each, one read per partition per chunk.
    expect(chain.reads).toBeGreaterThanOrEqual(2 * 3 * 1);
    expect(chain.reads).toBeLessThanOrEqual(2 * 3 * PARTITIONS);
  });

  test('a penalized record without references that lacks its message logs is undecodable, not a group with empty rows', async () => {
    const c = await codecs();
    const cluster = new MemoryCluster();
    publish(cluster, c, rowsOf(1));
    const chain = await runChain(cluster, c, true);
    const p = await c.penalized.decode(chain.penalized[0]!.value!);
    const { row_refs: _r, unresolved: _u, ...noRefs } = p;
    // Written "by reference" but with the references dropped: null message logs, no refs.
    const broken = c.penalized.encode({ ...noRefs, row_refs: [] } as typeof p);
    await expect(c.penalized.decode(broken)).rejects.toThrow(/row references/);
  });

  test('GymResult rows written by reference carry the fingerprint of the ingest config that derived them, in process and on the wire', async () => {
    const c = await codecs();
    const cluster = new MemoryCluster();
    publish(cluster, c, rowsOf(2), true);
    const chain = await runChain(cluster, c, true);
    const mine = ingestFingerprint(ingest);
    expect(mine).toMatch(/^ingest1:[0-9a-f]{8}(\.[0-9a-f]{8}){4}$/);
    for (const r of chain.groupComplete) expect((await c.group.decode(r.value!)).ingest_fingerprint).toBe(mine);
    for (const r of chain.penalized) expect((await c.penalized.decode(r.value!)).ingest_fingerprint).toBe(mine);
    // Full records re-derive nothing and carry none.
    const full = await runChain(cluster, c, false);
    expect((await c.group.decode(full.groupComplete[0]!.value!)).ingest_fingerprint).toBeUndefined();
    expect((await c.penalized.decode(full.penalized[0]!.value!)).ingest_fingerprint).toBeUndefined();
  });

  test('a reader with another ingest config refuses GymResult rows written by reference with ingest_config_mismatch, naming both fingerprints and the keys that differ', async () => {
    const c = await codecs();
    const cluster = new MemoryCluster();
    publish(cluster, c, rowsOf(2), true);
    const chain = await runChain(cluster, c, true);
    const other = readersWith(cluster, c, otherIngest);
    const [theirs, mine] = [ingestFingerprint(ingest), ingestFingerprint(otherIngest)];
    expect(theirs).not.toBe(mine);
    for (const refuse of [() => other.post.process(chain.groupComplete, 0), () => other.pack.process(chain.penalized, 0)]) {
      const e = await refuse().then(
        () => null,
        (err: unknown) => err,
      );
      expect(e, 'the reader refused').toBeInstanceOf(RolloutStreamError);
      expect((e as RolloutStreamError).code).toBe('ingest_config_mismatch');
      expect((e as Error).message).toContain(theirs);
      expect((e as Error).message).toContain(mine);
      expect((e as Error).message).toContain('ingest.thinking_tags');
      expect((e as Error).message).not.toContain('ingest.routed_experts_dtype');
      // The runtime stops the process on it (fatal), not dead-lettering group after group.
      expect(classify(new ProcessingFailure('postprocess', [], e))).toEqual({ kind: 'fatal', code: 'ingest_config_mismatch' });
    }
    // The same config reads them.
    const same = readersWith(cluster, c, resolveIngestConfig(config.ingest, { configDir: '.', postprocessTokenizerPath: null }));
    expect((await same.post.process(chain.groupComplete, 0)).deadLetters).toEqual([]);
  });

  test('rows that need no conversion (RolloutRows), and reference records written before fingerprints, are read under any ingest config', async () => {
    const c = await codecs();
    const plain = new MemoryCluster();
    publish(plain, c, rowsOf(2));
    const chain = await runChain(plain, c, true);
    const out = await readersWith(plain, c, otherIngest).post.process(chain.groupComplete, 0);
    expect(out.deadLetters).toEqual([]);
    expect(out.messages.filter((m) => m.topic === topics.penalized)).toHaveLength(2);
    // GymResult references without a fingerprint (an earlier version wrote them): nothing to compare, read as before.
    const gym = new MemoryCluster();
    publish(gym, c, rowsOf(2), true);
    const gymChain = await runChain(gym, c, true);
    const old = await Promise.all(
      gymChain.groupComplete.map(async (r) => {
        const { ingest_fingerprint: _f, unresolved: _u, ...g } = await c.group.decode(r.value!);
        return { ...r, value: c.group.encode(g) };
      }),
    );
    expect((await c.group.decode(old[0]!.value)).ingest_fingerprint).toBeUndefined();
    const read = await readersWith(gym, c, otherIngest).post.process(old, 0);
    expect(read.deadLetters).toEqual([]);
    expect(read.messages.filter((m) => m.topic === topics.penalized)).toHaveLength(2);
  });

  test('the stage registry builds, for each name runtime.stages takes, its stages and those that run beside it', async () => {
    const ctx = { topics, config, configDir: '.', ingest, codec: <K extends RecordKind>(kind: K) => new TopicCodec(kind, `${kind}-value`, registry).init(), references: true };
    const built = await Promise.all(PIPELINE_STAGES.map(async (name) => [name, (await STAGE_REGISTRY[name](ctx)).map((s) => `${s.name}<${s.inputTopic}`)] as const));
    expect(Object.fromEntries(built)).toEqual({
      accumulate: [`accumulate<${topics.rowCompleted}`],
      postprocess: [`postprocess<${topics.groupComplete}`, `batch-metrics<${topics.batchProgress}`],
      pack: [`pack<${topics.penalized}`],
    });
  });
});

/**
 * `replay --rerun-postprocess`: postprocess group-complete records again
 * with another configuration into a sandbox prefix (penalized, metrics and
 * dead-letter topics, created if needed), then compare rewards and metrics
 * with what the production run wrote for the same groups.
 */
import type { Config } from '../config/schema.js';
import { postprocessGroup, type ResolvedPostprocessConfig } from '../processors/postprocess.js';
import type { PromptGroup } from '../processors/types.js';
import { TopicCodec } from '../streams/codecs/codec.js';
import { deadLetterRecord } from '../streams/api/dead-letters.js';
import type { SchemaRegistryClient } from '../streams/codecs/schema-registry.js';
import { partitionRanges, type ScanRecord } from '../streams/ops/topic-scan.js';
import type { OpsClient, OutgoingRecord } from '../streams/kafka/types.js';
import { subjectOf, topicNames, topicSpecs, type TopicNames } from '../streams/topics/names.js';
import { createMissingTopics } from '../streams/topics/create.js';
import { UndecodableError } from '../streams/codecs/wire-format.js';
import { formatTable } from './table.js';
import { RecordDecoder } from './topic-records.js';

export interface RewardComparison {
  group_id: string;
  row_index: number;
  /** Null when the production run has no penalized record for the group (e.g. it was dead-lettered). */
  before: number | null;
  /** Null when the re-run dead-lettered the group. */
  after: number | null;
}

export interface MetricComparison {
  name: string;
  /** Groups whose value differs (or exists on one side only). */
  groupsChanged: number;
  meanBefore: number | null;
  meanAfter: number | null;
}

export interface RerunReport {
  sandboxPrefix: string;
  groups: number;
  penalized: number;
  deadLetters: Array<{ group_id: string | null; reason: string; message: string }>;
  rewards: RewardComparison[];
  /** Only the metrics that changed somewhere. */
  metrics: MetricComparison[];
}

/** Creates the sandbox's penalized, metrics and dead-letter topics if needed (their schemas are registered by the codecs that write them). */
export async function ensureSandboxTopics(kafka: OpsClient, config: Config, sandboxPrefix: string): Promise<TopicNames> {
  const sandbox = { ...config, topics: { ...config.topics, prefix: sandboxPrefix } };
  const names = topicNames(sandboxPrefix);
  const wanted = new Set([names.penalized, names.metrics, names.deadLetter]);
  const admin = await kafka.admin();
  try {
    await createMissingTopics(admin, topicSpecs(sandbox).filter((s) => wanted.has(s.topic)), config.topics);
  } finally {
    await admin.close();
  }
  return names;
}

/** Groups read from group-complete, with where each came from (for the sandbox dead letters). */
export interface SourcedGroup {
  group: PromptGroup;
  source: ScanRecord;
}

/**
 * Re-runs postprocess on `groups` into the sandbox prefix and compares with
 * the production penalized/metrics records under `sourcePrefix`.
 */
export async function rerunPostprocess(o: {
  kafka: OpsClient;
  registry: SchemaRegistryClient;
  config: Config;
  postprocess: ResolvedPostprocessConfig;
  groups: SourcedGroup[];
  sourcePrefix: string;
  sandboxPrefix: string;
}): Promise<RerunReport> {
  const sandbox = await ensureSandboxTopics(o.kafka, o.config, o.sandboxPrefix);
  const penalizedCodec = await new TopicCodec('penalized', subjectOf(sandbox.penalized), o.registry).init();
  const metricsCodec = await new TopicCodec('metrics', subjectOf(sandbox.metrics), o.registry).init();
  const deadLetterCodec = await new TopicCodec('deadLetter', subjectOf(sandbox.deadLetter), o.registry).init();

  const report: RerunReport = { sandboxPrefix: o.sandboxPrefix, groups: o.groups.length, penalized: 0, deadLetters: [], rewards: [], metrics: [] };
  const after = new Map<string, { rewards: Map<number, number>; metrics: Record<string, number> } | null>();
  const out: Array<{ topic: string; messages: OutgoingRecord[] }> = [
    { topic: sandbox.penalized, messages: [] },
    { topic: sandbox.metrics, messages: [] },
    { topic: sandbox.deadLetter, messages: [] },
  ];
  const now = Date.now();
  for (const { group, source } of o.groups) {
    const result = postprocessGroup(group, o.postprocess);
    if (!result.ok) {
      const d = deadLetterRecord(
        result.deadLetter,
        'postprocess',
        [{ topic: source.topic, partition: source.partition, offset: source.offset, key: source.key, value: source.value }],
        now,
      );
      out[2]!.messages.push({ topic: sandbox.deadLetter, key: group.group_id, value: deadLetterCodec.encode(d) });
      report.deadLetters.push({ group_id: d.group_id, reason: d.reason, message: d.message });
      after.set(group.group_id, null);
      continue;
    }
    report.penalized++;
    out[0]!.messages.push({ topic: sandbox.penalized, key: group.group_id, value: penalizedCodec.encode(result.penalized) });
    out[1]!.messages.push({
      topic: sandbox.metrics,
      key: group.batch_id,
      value: metricsCodec.encode({ scope: 'group', group_id: group.group_id, batch_id: group.batch_id, values: result.metrics, produced_at: now }),
    });
    after.set(group.group_id, { rewards: new Map(result.penalized.rows.map((r) => [r.row_index, r.total_reward])), metrics: result.metrics });
  }
  const sink = await o.kafka.chunkingSink();
  try {
    const records = out.flatMap((t) => t.messages);
    if (records.length > 0) await sink.send(records);
  } finally {
    await sink.close();
  }

  const before = await readProduction(o.kafka, o.registry, o.sourcePrefix, new Set(after.keys()));
  for (const { group } of o.groups) {
    const b = before.get(group.group_id);
    const a = after.get(group.group_id);
    for (const row of group.rows) {
      report.rewards.push({
        group_id: group.group_id,
        row_index: row.row_index,
        before: b?.rewards.get(row.row_index) ?? null,
        after: a?.rewards.get(row.row_index) ?? null,
      });
    }
  }
  report.metrics = compareMetrics(
    o.groups.map(({ group }) => group.group_id),
    (id) => before.get(id)?.metrics ?? null,
    (id) => after.get(id)?.metrics ?? null,
  );
  return report;
}

/** The production run's rewards (penalized) and group metrics for `groupIds`. */
async function readProduction(kafka: OpsClient, registry: SchemaRegistryClient, prefix: string, groupIds: Set<string>) {
  const names = topicNames(prefix);
  const decoder = new RecordDecoder(registry);
  const found = new Map<string, { rewards: Map<number, number>; metrics: Record<string, number> }>();
  const entry = (id: string) => {
    let e = found.get(id);
    if (!e) found.set(id, (e = { rewards: new Map(), metrics: {} }));
    return e;
  };
  const admin = await kafka.admin();
  let ranges;
  try {
    ranges = [
      ...(await partitionRanges(admin, names.penalized, { kind: 'beginning' })),
      ...(await partitionRanges(admin, names.metrics, { kind: 'beginning' })),
    ];
  } finally {
    await admin.close();
  }
  await kafka.scan(ranges, async (r) => {
    const value = r.value;
    if (!value) return;
    try {
      await note(r, value);
    } catch (e) {
      // A foreign record on a production topic is not ours to judge here.
      if (!(e instanceof UndecodableError)) throw e;
    }
  });
  return found;

  async function note(r: ScanRecord, value: Buffer): Promise<void> {
    if (r.topic === names.penalized) {
      if (!groupIds.has(r.key?.toString() ?? '')) return;
      const d = await decoder.decode('penalized', value);
      if (d.role !== 'penalized') return;
      const e = entry(d.value.group_id);
      for (const row of d.value.rows) e.rewards.set(row.row_index, row.total_reward);
    } else {
      const d = await decoder.decode('metrics', value);
      if (d.role !== 'metrics' || d.value.scope !== 'group' || d.value.group_id === null || !groupIds.has(d.value.group_id)) return;
      entry(d.value.group_id).metrics = d.value.values;
    }
  }
}

const same = (a: number | null | undefined, b: number | null | undefined) => a === b || (Number.isNaN(a) && Number.isNaN(b));

/** Per metric name: how many groups changed and the means over the groups that have it, for the changed metrics only. */
export function compareMetrics(
  groupIds: string[],
  before: (id: string) => Record<string, number> | null,
  after: (id: string) => Record<string, number> | null,
): MetricComparison[] {
  const names = new Set<string>();
  for (const id of groupIds) for (const m of [before(id), after(id)]) for (const k of Object.keys(m ?? {})) names.add(k);
  const mean = (xs: number[]) => (xs.length === 0 ? null : xs.reduce((s, x) => s + x, 0) / xs.length);
  const out: MetricComparison[] = [];
  for (const name of [...names].sort()) {
    let changed = 0;
    const bs: number[] = [];
    const as: number[] = [];
    for (const id of groupIds) {
      const b = before(id)?.[name];
      const a = after(id)?.[name];
      if (b !== undefined) bs.push(b);
      if (a !== undefined) as.push(a);
      if (!same(b, a)) changed++;
    }
    if (changed > 0) out.push({ name, groupsChanged: changed, meanBefore: mean(bs), meanAfter: mean(as) });
  }
  return out;
}

const num = (x: number | null) => (x === null ? '-' : Number.isInteger(x) ? String(x) : x.toFixed(4));

/** The side-by-side report: every row's reward before and after (changed ones marked), then the metrics that changed. */
export function formatRerunReport(r: RerunReport, sourcePrefix: string): string {
  const changed = r.rewards.filter((x) => !same(x.before, x.after)).length;
  const parts = [
    `re-ran postprocess on ${r.groups} groups into prefix '${r.sandboxPrefix}': ${r.penalized} penalized, ${r.deadLetters.length} dead letters`,
    `rewards: before = '${sourcePrefix}rollout.penalized', after = '${r.sandboxPrefix}rollout.penalized'`,
    formatTable(
      ['group', 'row', 'before', 'after', ''],
      r.rewards.map((x) => [x.group_id, x.row_index, num(x.before), num(x.after), same(x.before, x.after) ? '' : 'changed']),
      [1, 2, 3],
    ).trimEnd(),
    `${changed} of ${r.rewards.length} rewards changed`,
  ];
  if (r.metrics.length > 0) {
    parts.push(
      'metrics that changed (mean over groups):',
      formatTable(
        ['metric', 'groups changed', 'before', 'after'],
        r.metrics.map((m) => [m.name, m.groupsChanged, num(m.meanBefore), num(m.meanAfter)]),
        [1, 2, 3],
      ).trimEnd(),
    );
  } else {
    parts.push('no metric changed');
  }
  for (const d of r.deadLetters) parts.push(`dead letter: ${d.group_id} ${d.reason}: ${d.message}`);
  return parts.join('\n') + '\n';
}

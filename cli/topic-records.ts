/**
 * Our topics as the operations commands see them: a `--topic` argument
 * resolved to a full name and its role, any record decoded with the
 * registry, the group/batch it belongs to, and its JSON line (SPEC §9).
 */
import { UsageError } from '../tools/command.js';
import { deadLetterToJson, formatJsonLine } from '../json-form/form.js';
import { TopicCodec, type RecordTypes } from '../streams/codecs/codec.js';
import type { DeadLetterRecord } from '../streams/api/dead-letter-record.js';
import type { SchemaRegistryClient } from '../streams/codecs/schema-registry.js';
import { BASE_TOPIC_NAMES, subjectOf, topicNames, type TopicRole } from '../streams/topics/names.js';
import { groupReferences, penalizedReferences, RowResolver, type ReferenceResolver } from '../streams/codecs/row-resolver.js';
import { UndecodableError } from '../streams/codecs/wire-format.js';
import { createRowReader } from '../streams/kafka/kafkajs/offset-reader.js';
import { resolveIngestConfig } from '../processors/ingest-config.js';
import type { Config } from '../config/schema.js';

export interface ResolvedTopic {
  topic: string;
  role: TopicRole;
  /** The prefix the topic lives under (its sibling topics share it). */
  prefix: string;
}

/**
 * `rollout.packed` → `<configPrefix>rollout.packed`; a full name ending in
 * one of our base names (`sandbox.rollout.packed`) is taken as is. Throws a
 * UsageError for anything else.
 */
export function resolveTopic(arg: string, configPrefix: string): ResolvedTopic {
  const roles = Object.entries(BASE_TOPIC_NAMES) as Array<[TopicRole, string]>;
  for (const [role, base] of roles) {
    if (arg === base) return { topic: `${configPrefix}${base}`, role, prefix: configPrefix };
  }
  for (const [role, base] of roles) {
    if (arg.endsWith(base)) return { topic: arg, role, prefix: arg.slice(0, arg.length - base.length) };
  }
  throw new UsageError(`--topic ${arg} is not one of ours; expected one of ${Object.values(BASE_TOPIC_NAMES).join(', ')} (optionally with a prefix)`);
}

export type DecodedRecord = { [K in TopicRole]: { role: K; value: RecordTypes[K] } }[TopicRole];

/** The group and batch a decoded record belongs to (null where it has none: a BatchEnd has no group). */
export function recordIdentity(d: DecodedRecord): { group_id: string | null; batch_id: string | null } {
  switch (d.role) {
    case 'rowCompleted':
      switch (d.value.kind) {
        case 'row':
          return { group_id: d.value.row.group_id, batch_id: d.value.row.batch_id };
        case 'gym_result':
          return { group_id: d.value.result.group_id, batch_id: d.value.result.batch_id };
        case 'batch_end':
          return { group_id: null, batch_id: d.value.end.batch_id };
      }
      break;
    case 'groupComplete':
    case 'penalized':
    case 'packed':
    case 'metrics':
    case 'deadLetter':
      return { group_id: d.value.group_id, batch_id: d.value.batch_id };
  }
}

export interface RecordFilter {
  groupId?: string | undefined;
  batchId?: string | undefined;
}

/** True when the record belongs to the filter's group and batch (an absent criterion matches everything). */
export function matchesFilter(id: { group_id: string | null; batch_id: string | null }, f: RecordFilter): boolean {
  if (f.groupId !== undefined && id.group_id !== f.groupId) return false;
  if (f.batchId !== undefined && id.batch_id !== f.batchId) return false;
  return true;
}

/**
 * Whether a record can be skipped from its key alone, without decoding:
 * every topic but metrics is keyed by group id (BatchEnds and metrics by
 * batch id), so with a group filter a different key cannot match.
 */
export function skipByKey(role: TopicRole, key: string | null, f: RecordFilter): boolean {
  if (f.groupId === undefined || role === 'metrics') return false;
  return key !== f.groupId;
}

/** The dead letter's JSON line: the SPEC §9 fields plus stage, batch and the source coordinates. */
export function deadLetterLine(d: DeadLetterRecord): string {
  return JSON.stringify({
    dead_letter: {
      ...deadLetterToJson({ ...d, payloads: [] }),
      stage: d.stage,
      batch_id: d.batch_id,
      produced_at: d.produced_at,
      records: d.records.map((r) => ({
        topic: r.topic,
        partition: r.partition,
        offset: r.offset,
        key: r.key === null ? null : r.key.toString('utf8'),
        value_bytes: r.value === null ? null : r.value.length,
      })),
    },
  });
}

/** One JSON line (no newline) of the SPEC §9 form for a decoded record. */
export function recordJsonLine(d: DecodedRecord): string {
  switch (d.role) {
    case 'rowCompleted':
      switch (d.value.kind) {
        case 'row':
          return formatJsonLine({ kind: 'row', record: d.value.row });
        case 'gym_result':
          return formatJsonLine({ kind: 'gym_result', record: d.value.result });
        case 'batch_end':
          return formatJsonLine({ kind: 'batch_end', end: d.value.end });
      }
      break;
    case 'groupComplete':
      return formatJsonLine({ kind: 'group', group: d.value });
    case 'penalized':
      return formatJsonLine({ kind: 'penalized', group: d.value });
    case 'packed':
      return formatJsonLine({ kind: 'packed', packed: d.value });
    case 'metrics':
      return formatJsonLine({ kind: 'metrics', metrics: d.value });
    case 'deadLetter':
      return deadLetterLine(d.value);
  }
}

/** Registry-backed decoding of any of our topics' values (reader side only: nothing is registered). */
export class RecordDecoder {
  private readonly codecs = new Map<TopicRole, TopicCodec<TopicRole>>();

  /** `rows`: reference records (row-refs.ts) come back with their rows read from row-completed; without it, as written (identity only). */
  constructor(
    private readonly registry: SchemaRegistryClient,
    private readonly rows?: RowResolver,
  ) {}

  /** Decodes `value` as a `role` record; throws UndecodableError (a RolloutStreamError) for foreign bytes, and for a reference record whose rows are gone. */
  async decode(role: TopicRole, value: Buffer): Promise<DecodedRecord> {
    let codec = this.codecs.get(role);
    if (!codec) {
      // The subject is only used to register, which a reader never does.
      codec = new TopicCodec(role, subjectOf(BASE_TOPIC_NAMES[role]), this.registry);
      this.codecs.set(role, codec);
    }
    const decoded = { role, value: await codec.decode(value) } as DecodedRecord;
    if (this.rows && (decoded.role === 'groupComplete' || decoded.role === 'penalized') && decoded.value.unresolved) {
      const refs = decoded.role === 'groupComplete' ? groupReferences(this.rows) : penalizedReferences(this.rows);
      const [answer] = await (refs as ReferenceResolver<typeof decoded.value>).resolve([decoded.value]);
      if (!answer!.ok) throw new UndecodableError(answer!.message);
      decoded.value = (refs as ReferenceResolver<typeof decoded.value>).withRows(decoded.value, answer!.rows);
    }
    return decoded;
  }
}

/**
 * A reader of the rows reference records name, in `prefix`'s row-completed
 * topic, for the operations commands (close it when done). GymResults are
 * converted with the config's ingest settings, as accumulate did.
 */
export function openRowResolver(config: Config, configDir: string, registry: SchemaRegistryClient, prefix: string): { rows: RowResolver; close: () => Promise<void> } {
  const reader = createRowReader(config.kafka);
  const topic = topicNames(prefix).rowCompleted;
  const ingest = resolveIngestConfig(config.ingest, { configDir, postprocessTokenizerPath: config.postprocess.reward_penalties?.tokenizer_path ?? null });
  const rows = new RowResolver({ topic, reader, rowCodec: new TopicCodec('rowCompleted', subjectOf(topic), registry), ingest });
  return { rows, close: () => reader.close() };
}

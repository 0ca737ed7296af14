/**
 * Reads the rows a reference record names back from `rollout.row-completed`
 * (row-refs.ts): one read per partition for a whole set of groups, each
 * record decoded with the row codec and, for a NeMo-Gym result, converted by
 * the same pure conversion accumulate ran (SPEC §2.1), so a resolved group
 * equals the group accumulate closed. A row that is not where its reference
 * says — deleted by retention, or another record at that offset — makes its
 * group `gone`: the caller dead-letters it as `incomplete_group`.
 *
 * A GymResult row is converted only under the ingest config that derived
 * it: a record carrying another config's fingerprint (row-refs.ts
 * `ingest_fingerprint`) makes `resolve` throw `ingest_config_mismatch`
 * (fatal: the reader's config must change, not the record), naming both
 * fingerprints and the keys that differ. Plain RolloutRows need no
 * conversion, and records without a fingerprint (written before them) are
 * read as before.
 */
import { ingestGymResult } from '../../processors/gym-ingest.js';
import type { ResolvedIngestConfig } from '../../processors/ingest-config.js';
import { ingestFingerprint, ingestFingerprintDifferences } from '../../processors/ingest-fingerprint.js';
import { RolloutStreamError } from '../../errors/index.js';
import type { RolloutRow } from '../../processors/types.js';
import type { TopicCodec } from './codec.js';
import { groupWithRows, penalizedWithRows, type GroupRecord, type PenalizedRecord, type RowRef } from './row-refs.js';
import { UndecodableError } from './wire-format.js';

/** Rows of a group, or the row indices whose references led nowhere, and why. */
export type Resolution = { ok: true; rows: RolloutRow[] } | { ok: false; missing: number[]; message: string };

/** The references of one group; its i-th reference is its row with row_index `firstRowIndex + i`. */
export interface GroupRefs {
  group_id: string;
  firstRowIndex: number;
  refs: RowRef[];
  /** The fingerprint of the ingest config that derived the rows; null: unknown (written before fingerprints). */
  fingerprint: string | null;
}

/** Reads back the rows of reference records of one kind; answers in the order asked. */
export interface ReferenceResolver<T> {
  resolve(values: T[]): Promise<Resolution[]>;
  /** The value with its rows put in place. */
  withRows(value: T, rows: RolloutRow[]): T;
}

/** What the resolver needs of a Kafka reader (streams/kafka/types.ts `OffsetReader` is one): records by offset, absent when gone. */
export interface RecordsByOffset {
  read(topic: string, partition: number, offsets: string[]): Promise<Map<string, { value: Buffer | null }>>;
}

export interface RowResolverOptions {
  /** The row-completed topic the references point into. */
  topic: string;
  reader: RecordsByOffset;
  rowCodec: TopicCodec<'rowCompleted'>;
  ingest: ResolvedIngestConfig;
}

export class RowResolver {
  /** This reader's ingest config, as records carry it. */
  readonly fingerprint: string;

  constructor(private readonly o: RowResolverOptions) {
    this.fingerprint = ingestFingerprint(o.ingest);
  }

  /** The rows of each group, in the order of its references (= row index order). */
  async resolve(groups: GroupRefs[]): Promise<Resolution[]> {
    const wanted = new Map<number, Set<string>>();
    for (const g of groups) for (const r of g.refs) (wanted.get(r.partition) ?? wanted.set(r.partition, new Set()).get(r.partition)!).add(r.offset);
    const found = new Map<number, Map<string, Buffer | null>>();
    await Promise.all(
      [...wanted].map(async ([partition, offsets]) => {
        const records = await this.o.reader.read(this.o.topic, partition, [...offsets]);
        const values = new Map<string, Buffer | null>();
        for (const [offset, r] of records) values.set(offset, r.value);
        found.set(partition, values);
      }),
    );
    const out: Resolution[] = [];
    for (const g of groups) out.push(await this.rowsOf(g, found));
    return out;
  }

  private async rowsOf({ group_id: groupId, firstRowIndex, refs, fingerprint }: GroupRefs, found: Map<number, Map<string, Buffer | null>>): Promise<Resolution> {
    const rows: RolloutRow[] = [];
    const missing: number[] = [];
    const why: string[] = [];
    for (let i = 0; i < refs.length; i++) {
      const { partition, offset } = refs[i]!;
      const index = firstRowIndex + i;
      const at = `${this.o.topic}[${partition}]@${offset}`;
      const value = found.get(partition)?.get(offset);
      const row = value ? await this.rowAt(value, at, groupId, fingerprint) : `${at} is gone (retention deleted it, or the topic was recreated)`;
      if (typeof row === 'string') {
        missing.push(index);
        why.push(row);
      } else if (row.group_id !== groupId || row.row_index !== index) {
        missing.push(index);
        why.push(`${at} holds row ${row.row_index} of group ${row.group_id}, not row ${index} of ${groupId}`);
      } else {
        rows.push(row);
      }
    }
    if (missing.length === 0) return { ok: true, rows };
    const more = why.length > 3 ? ` (and ${why.length - 3} more)` : '';
    return { ok: false, missing, message: `rows ${missing.join(', ')} of group ${groupId} cannot be read back: ${why.slice(0, 3).join('; ')}${more}` };
  }

  /** The row a row-completed record holds, or why it holds none; throws `ingest_config_mismatch` (file comment). */
  private async rowAt(value: Buffer, at: string, groupId: string, fingerprint: string | null): Promise<RolloutRow | string> {
    let e;
    try {
      e = await this.o.rowCodec.decode(value);
    } catch (err) {
      if (err instanceof UndecodableError) return `${at} is undecodable: ${err.message}`;
      throw err;
    }
    if (e.kind === 'row') return e.row;
    if (e.kind === 'batch_end') return `${at} is a BatchEnd`;
    if (fingerprint !== null && fingerprint !== this.fingerprint) throw ingestMismatch(groupId, at, fingerprint, this.fingerprint);
    const converted = ingestGymResult(e.result, this.o.ingest);
    return converted.ok ? converted.row : `${at} no longer converts (${converted.reason}: ${converted.message}; was the ingest config changed?)`;
  }
}

/** A record's rows would convert differently under this reader's ingest config than under the writer's. */
function ingestMismatch(groupId: string, at: string, theirs: string, mine: string): RolloutStreamError {
  const keys = ingestFingerprintDifferences(theirs, mine);
  return new RolloutStreamError(
    'ingest_config_mismatch',
    `group ${groupId} was written by reference under ingest config ${theirs}; this reader's is ${mine}, under which its GymResult row ${at} ` +
      `would convert into another row (different: ${keys.join(', ')}). Read it with the writer's ingest settings; change them only ` +
      `once postprocess and pack have read what was written by reference (or write in full meanwhile: runtime.intermediate_records: full)`,
  );
}

const refsOf = (v: { group_id: string; group_index: number; num_generations: number; row_refs?: RowRef[]; ingest_fingerprint?: string }): GroupRefs => ({
  group_id: v.group_id,
  firstRowIndex: v.group_index * v.num_generations,
  refs: v.row_refs ?? [],
  fingerprint: v.ingest_fingerprint ?? null,
});

/** Group-complete records' references. */
export function groupReferences(r: RowResolver): ReferenceResolver<GroupRecord> {
  return { resolve: (values) => r.resolve(values.map(refsOf)), withRows: groupWithRows };
}

/** Penalized records' references. */
export function penalizedReferences(r: RowResolver): ReferenceResolver<PenalizedRecord> {
  return { resolve: (values) => r.resolve(values.map(refsOf)), withRows: penalizedWithRows };
}

/**
 * The records `bench ingest` measures: the load generator's rows of one
 * profile turned into the GymResults a NeMo-Gym rollout worker would
 * publish (`gymResultFromRow`), each with the two JSON texts the
 * accumulate stage finds in its Avro record (`gym_row`, `gym_result`: version
 * 2, the token ids, logprobs and routes being binary columns beside them) and
 * the object it hands to `ingestGymResult` after decoding. All of it is
 * built before any clock starts.
 */
import { generateEvents, gymResultFromRow, PROFILES, type ProfileName } from '../loadgen/index.js';
import type { GymResult } from '../processors/types.js';
import { gymResultFromAvro, gymResultToAvro } from '../streams/codecs/record-mapping.js';

export const INGEST_PROFILES = ['published-max', 'router-replay'] as const;
export type IngestProfile = (typeof INGEST_PROFILES)[number];

/** Rows measured when `--rows` is not given: one batch of published-max; two groups of router-replay (≈ 2.5 MB a record). */
export const DEFAULT_ROWS: Record<IngestProfile, number> = { 'published-max': 512, 'router-replay': 32 };

export interface BenchRecord {
  result: GymResult;
  /** `JSON.stringify(result.gym_row)`, as carried in the Avro record. */
  gymRowText: string;
  /** The `gym_result` text of the Avro record (without what moved into columns). */
  gymResultText: string;
  /** What the stage converts: `result` decoded from its Avro mapping (fresh objects, not the generator's). */
  parsed: GymResult;
}

export interface RecordSet {
  profile: IngestProfile;
  groups: number;
  generations: number;
  records: BenchRecord[];
  /** Characters of JSON text over all records (ASCII: characters = bytes). */
  jsonBytes: number;
  maxRecordJsonBytes: number;
}

/**
 * `rows` GymResults of `profile`, from one batch of `ceil(rows / N)` groups
 * (N = the profile's generations), in the order the generator completes
 * them. `runId` prefixes the group ids (unique per run on a shared topic).
 */
export function buildRecords(profile: IngestProfile, rows: number, seed: number, runId: string): RecordSet {
  const generations = PROFILES[profile as ProfileName].generations;
  const groups = Math.ceil(rows / generations);
  const records: BenchRecord[] = [];
  let jsonBytes = 0;
  let maxRecordJsonBytes = 0;
  for (const e of generateEvents({ batches: 1, groupsPerBatch: groups, generations, seed, profile, runId })) {
    if (e.kind !== 'row' || records.length >= rows) continue;
    const result = gymResultFromRow(e.row);
    const avro = gymResultToAvro(result);
    const gymRowText = avro.gym_row as string;
    const gymResultText = avro.gym_result as string;
    const parsed = gymResultFromAvro(avro);
    const size = gymRowText.length + gymResultText.length;
    jsonBytes += size;
    maxRecordJsonBytes = Math.max(maxRecordJsonBytes, size);
    records.push({ result, gymRowText, gymResultText, parsed });
  }
  return { profile, groups, generations, records, jsonBytes, maxRecordJsonBytes };
}

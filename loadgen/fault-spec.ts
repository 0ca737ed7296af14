/**
 * Fault injection settings: which bad inputs the load generator mixes into
 * its stream and how often, parsed from the CLI's `--faults` string.
 */
import { ConfigError } from '../errors/index.js';

/**
 * The faults the generator can inject, with the accumulator outcome each
 * one must produce (SPEC §3):
 * - `dup`: a row sent twice, byte-identical → dropped silently (replay).
 * - `conflict`: a second, different row with the same row index → `duplicate_row_index` for the later copy.
 * - `out_of_range`: an extra row whose index lies outside its group → `row_index_out_of_range`.
 * - `nan`: a row sent first with a NaN logprob, then its valid retry → `nan_logprobs` for the NaN copy.
 * - `missing`: a row never sent → `incomplete_group` for its group.
 * - `garbage`: bytes that are not a Confluent-framed Avro record → `undecodable`.
 * - `mixed_agents`: one row of a group from another agent → `mixed_agents` for the group.
 * - `task_mismatch`: one row of a group with another (or no) task index → `task_index_mismatch` for the group.
 */
export type FaultKind =
  | 'dup'
  | 'conflict'
  | 'out_of_range'
  | 'nan'
  | 'missing'
  | 'garbage'
  | 'mixed_agents'
  | 'task_mismatch';

/** Faults drawn per row: a row gets at most one of these. */
export const ROW_FAULTS = ['dup', 'conflict', 'out_of_range', 'nan', 'missing'] as const;
/** Faults drawn per group: a group gets at most one of these. */
export const GROUP_FAULTS = ['mixed_agents', 'task_mismatch'] as const;
/** Drawn per row, independently of the row's other fault: an extra garbage record after it. */
export const STREAM_FAULTS = ['garbage'] as const;

export const FAULT_KINDS: readonly FaultKind[] = [...ROW_FAULTS, ...STREAM_FAULTS, ...GROUP_FAULTS];

/**
 * Fraction of each fault. Row and stream faults are fractions of rows
 * (`nan=0.01`: one row in a hundred gets a NaN copy); group faults are
 * fractions of groups. Absent kinds are 0.
 */
export type FaultSpec = Record<FaultKind, number>;

/** A spec with every fault off. */
export function noFaults(): FaultSpec {
  return { dup: 0, conflict: 0, out_of_range: 0, nan: 0, missing: 0, garbage: 0, mixed_agents: 0, task_mismatch: 0 };
}

/**
 * Thrown for a malformed `--faults` string. A `ConfigError` (code
 * `config_invalid`, path `faults.<key>`) so the CLI reports it like any bad
 * setting; `key` names the offending entry.
 */
export class FaultSpecError extends ConfigError {
  readonly key: string;

  constructor(key: string, message: string) {
    super(`faults.${key}`, message);
    this.key = key;
  }
}

/**
 * Parses `"dup=0.01,conflict=0.005,..."`. `""` and `"none"` mean no faults.
 * Whitespace around entries is ignored. Throws `FaultSpecError` naming the
 * key for an unknown kind, a repeated kind, a value that is not a number in
 * [0, 1], an entry without `=`, or when the row faults (or the group faults)
 * add up to more than 1 (each row and each group carries at most one).
 */
export function parseFaultSpec(spec: string): FaultSpec {
  const out = noFaults();
  const trimmed = spec.trim();
  if (trimmed === '' || trimmed.toLowerCase() === 'none') return out;
  const seen = new Set<string>();
  for (const rawEntry of trimmed.split(',')) {
    const entry = rawEntry.trim();
    if (entry === '') continue;
    const eq = entry.indexOf('=');
    if (eq < 0) throw new FaultSpecError(entry, `fault entry "${entry}" needs the form kind=fraction`);
    const key = entry.slice(0, eq).trim();
    const valueText = entry.slice(eq + 1).trim();
    if (!(FAULT_KINDS as readonly string[]).includes(key)) {
      throw new FaultSpecError(key, `unknown fault "${key}"; known faults: ${FAULT_KINDS.join(', ')}`);
    }
    if (seen.has(key)) throw new FaultSpecError(key, `fault "${key}" is given twice`);
    seen.add(key);
    const value = valueText === '' ? Number.NaN : Number(valueText);
    if (!Number.isFinite(value) || value < 0 || value > 1) {
      throw new FaultSpecError(key, `fault "${key}" must be a fraction in [0, 1], got "${valueText}"`);
    }
    out[key as FaultKind] = value;
  }
  validateFaultSpec(out);
  return out;
}

/** Throws `FaultSpecError` when a spec built in code breaks the rules `parseFaultSpec` enforces. */
export function validateFaultSpec(spec: FaultSpec): void {
  for (const kind of FAULT_KINDS) {
    const v = spec[kind];
    if (!Number.isFinite(v) || v < 0 || v > 1) throw new FaultSpecError(kind, `fault "${kind}" must be a fraction in [0, 1], got ${v}`);
  }
  const rowSum = ROW_FAULTS.reduce((s, k) => s + spec[k], 0);
  if (rowSum > 1 + 1e-12) {
    throw new FaultSpecError(ROW_FAULTS.join('+'), `row faults (${ROW_FAULTS.join(', ')}) add up to ${rowSum}; a row carries at most one, so the sum must be ≤ 1`);
  }
  const groupSum = GROUP_FAULTS.reduce((s, k) => s + spec[k], 0);
  if (groupSum > 1 + 1e-12) {
    throw new FaultSpecError(GROUP_FAULTS.join('+'), `group faults (${GROUP_FAULTS.join(', ')}) add up to ${groupSum}; the sum must be ≤ 1`);
  }
}

/** The canonical string form of a spec (non-zero kinds only, `"none"` when all are off); `parseFaultSpec` reads it back. */
export function formatFaultSpec(spec: FaultSpec): string {
  const parts = FAULT_KINDS.filter((k) => spec[k] > 0).map((k) => `${k}=${spec[k]}`);
  return parts.length === 0 ? 'none' : parts.join(',');
}

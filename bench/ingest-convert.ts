/**
 * Part (a) of `bench ingest`: what the GymResult → RolloutRow conversion
 * (SPEC §2.1, `ingestGymResult`) costs per record next to the one thing the
 * accumulate stage must do with such a record anyway, `JSON.parse` of its
 * `gym_row` and `gym_result` texts. Both passes run over the same records
 * in the same process, alternating (parse, ingest, parse, ingest, …) with
 * a full GC before each, so the load of this shared machine hits both alike.
 */
import { ingestGymResult } from '../processors/gym-ingest.js';
import type { ResolvedIngestConfig } from '../processors/ingest-config.js';
import { RolloutStreamError } from '../errors/index.js';
import type { BenchRecord } from './ingest-records.js';

export interface ConvertPair {
  /** `JSON.parse` of both texts of every record. */
  parseMs: number;
  /** `ingestGymResult` of every parsed record. */
  ingestMs: number;
  /** ingestMs ÷ parseMs. */
  ratio: number;
}

/** One parse pass; the parsed values are dropped record by record, as the stage drops them once converted. */
function parsePass(records: readonly BenchRecord[]): number {
  let kept = 0;
  const t0 = performance.now();
  for (const r of records) {
    const row = JSON.parse(r.gymRowText) as object | null;
    const result = JSON.parse(r.gymResultText) as object | null;
    if (row !== null && result !== null) kept++;
  }
  const ms = performance.now() - t0;
  if (kept !== records.length) throw new RolloutStreamError('bench_failed', 'a record text parsed to null');
  return ms;
}

function ingestPass(records: readonly BenchRecord[], cfg: ResolvedIngestConfig): number {
  let messages = 0;
  const t0 = performance.now();
  for (const r of records) {
    const out = ingestGymResult(r.parsed, cfg);
    if (out.ok) messages += out.row.message_log.length;
  }
  const ms = performance.now() - t0;
  if (messages === 0) throw new RolloutStreamError('bench_failed', 'the conversion produced no message');
  return ms;
}

/**
 * Checks that every record converts (a rejected one would make the timing
 * meaningless: it fails with the record's reason), runs one warm-up pair
 * that is not counted, then `repeat` alternating pairs. `gc` runs a full
 * collection before each pass.
 *
 * @throws RolloutStreamError (`bench_failed`) when a record is rejected.
 */
export function measureConversion(records: readonly BenchRecord[], cfg: ResolvedIngestConfig, repeat: number, gc: () => void): ConvertPair[] {
  for (const [i, r] of records.entries()) {
    const out = ingestGymResult(r.parsed, cfg);
    if (!out.ok) {
      throw new RolloutStreamError('bench_failed', `GymResult ${i} (${r.result.group_id}/${r.result.row_index}) was rejected: ${out.reason}: ${out.message}`);
    }
  }
  const pairs: ConvertPair[] = [];
  for (let i = 0; i <= repeat; i++) {
    gc();
    const parseMs = parsePass(records);
    gc();
    const ingestMs = ingestPass(records, cfg);
    if (!(parseMs > 0) || !(ingestMs > 0)) throw new RolloutStreamError('bench_failed', `a pass took no measurable time (parse ${parseMs} ms, ingest ${ingestMs} ms): use more --rows`);
    // Pair 0 warms up the JIT and the allocator; it is not counted.
    if (i > 0) pairs.push({ parseMs, ingestMs, ratio: ingestMs / parseMs });
  }
  return pairs;
}

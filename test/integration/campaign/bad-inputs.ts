/**
 * A seeded campaign of bad inputs for `rollout.row-completed` (SPEC §2,
 * §2.1, §3, §4), interleaved with the valid groups they damage.
 *
 * Every bad record carries its mutation and what it must become:
 * - `reasons`: the dead-letter reasons the generator predicts (one, or the
 *   few a fuzzed mutation can reach, stated per mutation below);
 * - `oracle`: the record decodes, so the offline runner, fed the same
 *   decodable records in the same order, is the judge of its verdict.
 * Row-level mutants are sent next to the valid row they damage, so the group
 * still completes and is packed once; group-level mutants replace the group.
 *
 * Mutations (prediction in brackets):
 * - loadgen faults `conflict` [duplicate_row_index], `out_of_range`
 *   [row_index_out_of_range], `nan` [nan_logprobs], `missing`
 *   [incomplete_group], `garbage` [undecodable], `mixed_agents`
 *   [mixed_agents], `task_mismatch` [task_index_mismatch]; `dup` is an
 *   identical replay [no dead letter].
 * - `negative_index` [row_index_out_of_range], `inconsistent_batch` and
 *   `inconsistent_n` (a not-yet-sent index with another batch id / N)
 *   [inconsistent_group; for N the index may also fall outside the range N
 *   gives: row_index_out_of_range], `zero_n` [inconsistent_group, invalid_row
 *   or row_index_out_of_range, whichever rule the accumulator checks first], `closed_group` (a
 *   different row after the group was emitted) [group_already_closed].
 * - byte damage of a valid row's framed value, sent after that row:
 *   `bit_flip` (1–4 bits of the body) [undecodable, or oracle when it still
 *   decodes], `truncate` [undecodable], `wrong_magic` [undecodable],
 *   `unknown_schema_id` [undecodable], `other_schema` (a valid dead-letter
 *   record framed with its own id) [undecodable], `empty_value`
 *   [undecodable], `null_value` (tombstone) [undecodable].
 * - keys: `null_key` and `key_mismatch` (a valid row under another key)
 *   [invalid_row: a row is keyed by its group id, or it would be judged on
 *   another partition than its group].
 * - JSON inside the record, replacing a row: `deep_json` (request nested
 *   2,000 deep) [no dead letter: accepted], `huge_number` (float64's largest
 *   number in request) and `huge_number_text` (the text 1e400, which JSON
 *   readers make Infinity) [no dead letter], `long_string` (200 KB string in
 *   request), `deep_full_result`, `long_full_result`, `gym_deep_long` (a
 *   NeMo-Gym result with deep and long JSON in gym_result) [no dead letter]
 *   [no dead letter], `duplicate_keys` (request text with a repeated key; the
 *   last wins, as in JSON.parse and Python's json) [no dead letter],
 *   `bad_json` (request text that is not JSON) [undecodable], `json_array`
 *   (request a JSON array) [undecodable].
 * - postprocess, replacing a group: `reward_not_number` [invalid_row],
 *   `components_mismatch` [reward_components_mismatch].
 * - NeMo-Gym results (§2.1), sent before the valid result: `gym_no_output`
 *   [no_generation_data], `gym_non_contiguous` [non_contiguous_tokens],
 *   `gym_not_object` (gym_result text a JSON list) [undecodable],
 *   `gym_output_not_list` [invalid_row].
 * Not reachable through Avro, so not here: `row_index_type` (row_index is
 * an Avro int; the JSON form's check is unit-tested) and over-size inputs
 * (the broker refuses a value above `max.message.bytes` at the producer;
 * the publishers refuse it before sending, unit-tested).
 */
import type { DeadLetterReason, GymResult, JsonObject, RolloutRow } from '../../../processors/types.js';
import { isTokenList } from '../../../processors/gym-columns.js';
import { generateEvents, gymResultFromRow, parseFaultSpec, Rng, type LoadgenEvent } from '../../../loadgen/index.js';
import type { TopicCodec } from '../../../streams/codecs/codec.js';
import { formatJsonLine } from '../../../json-form/form.js';

export interface CampaignRecord {
  key: Buffer | null;
  value: Buffer | null;
  /** Set for BatchEnd markers: one copy to every partition. */
  everyPartition?: boolean;
  /** Null for a valid record. */
  mutation: string | null;
  /** Predicted reasons (empty: no dead letter); `oracle`: the offline runner decides. */
  expect: DeadLetterReason[] | 'oracle';
  /** The record as the offline runner reads it (JSON line); null when it does not decode. */
  line: string | null;
  /** The group the record belongs to (a group-level dead letter carries the group's records, not this one's bytes). */
  group?: string;
}

export interface Campaign {
  seed: number;
  records: CampaignRecord[];
  badCount: number;
}

type RowCodec = TopicCodec<'rowCompleted'>;

const clone = <T>(v: T): T => structuredClone(v);

/** Whether `value` decodes with `codec` (a mutant that still reads is judged by the offline runner). */
async function decodes(codec: RowCodec, value: Buffer): Promise<{ kind: 'row'; row: RolloutRow } | { kind: 'gym_result'; result: GymResult } | null> {
  try {
    const e = await codec.decode(value);
    return e.kind === 'batch_end' ? null : e;
  } catch {
    return null;
  }
}

const rowLine = (row: RolloutRow) => formatJsonLine({ kind: 'row', record: row });
const gymLine = (result: GymResult) => formatJsonLine({ kind: 'gym_result', record: result });

export interface CampaignOptions {
  seed: number;
  runId: string;
  /** The registered id of the dead-letter schema (for `other_schema`). */
  otherSchema: { codec: TopicCodec<'deadLetter'> };
  codec: RowCodec;
  /** Bad records to reach (≥ 1,000 for the campaign). */
  minBad: number;
}

export async function buildCampaign(o: CampaignOptions): Promise<Campaign> {
  const rng = new Rng(o.seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng.float() * xs.length)]!;
  const faults = parseFaultSpec('dup=0.03,conflict=0.04,out_of_range=0.04,nan=0.04,missing=0.01,garbage=0.04,mixed_agents=0.04,task_mismatch=0.04');
  const events: LoadgenEvent[] = [
    ...generateEvents({ batches: 2, groupsPerBatch: 60, generations: 4, seed: o.seed, profile: 'small', runId: o.runId, reorderWindowGroups: 0, faults }),
  ];
  const rows = events.filter((e): e is Extract<LoadgenEvent, { kind: 'row' }> => e.kind === 'row');
  // Groups a loadgen fault already touches are left alone.
  const touched = new Set<string>();
  for (const e of events) {
    if (e.kind === 'row' && e.expect) touched.add(e.expect.group_id);
    if (e.kind === 'garbage') touched.add(e.expect.group_id);
    if (e.kind === 'batch_end') for (const x of e.expect ?? []) touched.add(x.group_id);
  }
  const byGroup = new Map<string, RolloutRow[]>();
  for (const e of rows) if (!e.expect) (byGroup.get(e.row.group_id) ?? byGroup.set(e.row.group_id, []).get(e.row.group_id)!).push(e.row);
  const healthy = [...byGroup.keys()].filter((g) => !touched.has(g) && byGroup.get(g)!.length === 4);

  // Per group: records to send before its first row, after a given row, instead of the group, after the group.
  const before = new Map<string, CampaignRecord[]>();
  const afterRow = new Map<string, CampaignRecord[]>();
  const replace = new Map<string, CampaignRecord[]>();
  const afterGroup = new Map<string, CampaignRecord[]>();
  const push = (m: Map<string, CampaignRecord[]>, k: string, r: CampaignRecord) => void (m.get(k) ?? m.set(k, []).get(k)!).push(r);
  const rowKey = (row: RolloutRow) => `${row.group_id}/${row.row_index}`;
  const frame = (row: RolloutRow) => o.codec.encode({ kind: 'row', row });
  const keyOf = (id: string) => Buffer.from(id);
  const valid = (row: RolloutRow): CampaignRecord => ({ key: keyOf(row.group_id), group: row.group_id, value: frame(row), mutation: null, expect: [], line: rowLine(row) });
  const bad = (mutation: string, row: RolloutRow, expect: DeadLetterReason[] | 'oracle', over?: Partial<CampaignRecord>): CampaignRecord => ({
    key: keyOf(row.group_id),
    value: frame(row),
    mutation,
    expect,
    line: rowLine(row),
    group: row.group_id,
    ...over,
  });

  let badCount = events.filter((e) => (e.kind === 'row' && e.expect?.reason) || e.kind === 'garbage').length;
  badCount += events.filter((e) => e.kind === 'batch_end').reduce((n, e) => n + (e.kind === 'batch_end' ? (e.expect?.length ?? 0) : 0), 0);
  const groupLevelUsed = new Set<string>();
  const inBody = (value: Buffer) => 5 + Math.floor(rng.float() * (value.length - 5));

  const rowMutations: Array<(row: RolloutRow, group: RolloutRow[]) => Promise<void>> = [
    async (row) => push(afterRow, rowKey(row), bad('negative_index', { ...clone(row), row_index: -1 - Math.floor(rng.float() * 5) }, ['row_index_out_of_range'])),
    async (_row, group) => {
      // A copy of the group's last row with another batch id, sent before that row arrives.
      const last = group[group.length - 1]!;
      push(afterRow, rowKey(group[0]!), bad('inconsistent_batch', { ...clone(last), batch_id: `${last.batch_id}-other` }, ['inconsistent_group']));
    },
    async (_row, group) => {
      const last = group[group.length - 1]!;
      push(afterRow, rowKey(group[0]!), bad('inconsistent_n', { ...clone(last), num_generations: 5 }, ['inconsistent_group', 'row_index_out_of_range']));
    },
    async (_row, group) => {
      const last = group[group.length - 1]!;
      push(afterRow, rowKey(group[0]!), bad('zero_n', { ...clone(last), num_generations: 0 }, ['inconsistent_group', 'invalid_row', 'row_index_out_of_range']));
    },
    async (row) => {
      const other = clone(row);
      other.full_result = { ...other.full_result, reward: 0.123456 };
      push(afterGroup, row.group_id, bad('closed_group', other, ['group_already_closed']));
    },
    async (row) => {
      const value = Buffer.from(frame(row));
      const flips = 1 + Math.floor(rng.float() * 4);
      for (let i = 0; i < flips; i++) {
        const at = inBody(value);
        value[at]! ^= 1 << Math.floor(rng.float() * 8);
      }
      const d = await decodes(o.codec, value);
      // A flip inside the group id leaves a row keyed by another group's id: the key check rejects it.
      const moved = d !== null && (d.kind === 'row' ? d.row.group_id : d.result.group_id) !== row.group_id;
      push(afterRow, rowKey(row), {
        key: keyOf(row.group_id),
        group: row.group_id,
        value,
        mutation: 'bit_flip',
        expect: moved ? ['invalid_row'] : d ? 'oracle' : ['undecodable'],
        line: d && !moved ? (d.kind === 'row' ? rowLine(d.row) : gymLine(d.result)) : null,
      });
    },
    async (row) => {
      const full = frame(row);
      const value = full.subarray(0, Math.floor(rng.float() * (full.length - 1)));
      const d = await decodes(o.codec, Buffer.from(value));
      push(afterRow, rowKey(row), { key: keyOf(row.group_id), group: row.group_id, value: Buffer.from(value), mutation: 'truncate', expect: d ? 'oracle' : ['undecodable'], line: d ? rowLine((d as { row: RolloutRow }).row) : null });
    },
    async (row) => {
      const value = Buffer.from(frame(row));
      value[0] = 1 + Math.floor(rng.float() * 255);
      push(afterRow, rowKey(row), { key: keyOf(row.group_id), group: row.group_id, value, mutation: 'wrong_magic', expect: ['undecodable'], line: null });
    },
    async (row) => {
      const value = Buffer.from(frame(row));
      value.writeInt32BE(900_000_000 + Math.floor(rng.float() * 1000), 1);
      push(afterRow, rowKey(row), { key: keyOf(row.group_id), group: row.group_id, value, mutation: 'unknown_schema_id', expect: ['undecodable'], line: null });
    },
    async (row) => {
      const value = o.otherSchema.codec.encode({
        reason: 'invalid_row', message: 'a dead letter on the wrong topic', stage: 'accumulate', group_id: row.group_id, batch_id: row.batch_id,
        row_indices: [row.row_index], missing_row_indices: [], records: [], produced_at: 1_700_000_000_000,
      });
      push(afterRow, rowKey(row), { key: keyOf(row.group_id), group: row.group_id, value, mutation: 'other_schema', expect: ['undecodable'], line: null });
    },
    async (row) => push(afterRow, rowKey(row), { key: keyOf(row.group_id), group: row.group_id, value: Buffer.alloc(0), mutation: 'empty_value', expect: ['undecodable'], line: null }),
    async (row) => push(afterRow, rowKey(row), { key: keyOf(row.group_id), group: row.group_id, value: null, mutation: 'null_value', expect: ['undecodable'], line: null }),
    async (row) => push(afterRow, rowKey(row), { ...bad('null_key', row, ['invalid_row']), key: null, line: null }),
    async (row) => push(afterRow, rowKey(row), { ...bad('key_mismatch', row, ['invalid_row']), key: keyOf(pick(healthy.filter((g) => g !== row.group_id))), line: null }),
    async (row) => {
      const t = clone(row);
      let deep: Record<string, unknown> = { leaf: 1 };
      for (let i = 0; i < 2000; i++) deep = { n: deep };
      t.request = { ...t.request, deep } as RolloutRow['request'];
      push(before, row.group_id, bad('deep_json', t, [], {}));
      drop.add(rowKey(row));
    },
    async (row) => {
      const t = clone(row);
      // A number beyond float64: JSON readers make it Infinity; the JSON form's writer keeps the record readable.
      t.request = { ...t.request, big: 1e300 * 1e300 === Infinity ? 1.7976931348623157e308 : 0 } as RolloutRow['request'];
      push(before, row.group_id, bad('huge_number', t, []));
      drop.add(rowKey(row));
    },
    async (row) => {
      const t = clone(row);
      t.request = { ...t.request, note: 'x'.repeat(200_000) } as RolloutRow['request'];
      push(before, row.group_id, bad('long_string', t, []));
      drop.add(rowKey(row));
    },
  ];
  const drop = new Set<string>();

  // Byte-level edits of the JSON text inside the Avro record: re-encode with a marker, then splice the text.
  const textMutations: Array<(row: RolloutRow) => void> = [
    (row) => spliceJson(row, 'duplicate_keys', '{"k":1,"k":2}', [], true),
    (row) => spliceJson(row, 'bad_json', '{"k":', ['undecodable'], false),
    (row) => spliceJson(row, 'json_array', '[1,2,3]', ['undecodable'], false),
  ];
  const MARK = '"__campaign_marker__":"0123456789"';
  function spliceJson(row: RolloutRow, mutation: string, text: string, expect: DeadLetterReason[], replacesRow: boolean): void {
    const t = clone(row);
    t.request = { __campaign_marker__: '0123456789' } as RolloutRow['request'];
    const framed = frame(t);
    const marker = Buffer.from(`{${MARK}}`);
    const at = framed.indexOf(marker);
    if (at < 0) throw new Error('campaign: request marker not found in the Avro body');
    // Avro strings are length-prefixed (zigzag varint): rewrite the prefix too.
    const prefixAt = at - 1;
    if (framed[prefixAt] !== marker.length * 2) throw new Error('campaign: unexpected request length prefix');
    const body = Buffer.from(text);
    if (body.length * 2 > 127) throw new Error('campaign: spliced JSON must be short');
    const value = Buffer.concat([framed.subarray(0, prefixAt), Buffer.from([body.length * 2]), body, framed.subarray(at + marker.length)]);
    if (replacesRow) {
      t.request = JSON.parse(text) as RolloutRow['request'];
      push(before, row.group_id, { key: keyOf(row.group_id), group: row.group_id, value, mutation, expect, line: rowLine(t) });
      drop.add(rowKey(row));
    } else {
      push(afterRow, rowKey(row), { key: keyOf(row.group_id), group: row.group_id, value, mutation, expect, line: null });
    }
  }

  const groupMutations: Array<(group: RolloutRow[]) => void> = [
    (group) => {
      const g = group.map(clone);
      g[1]!.full_result = { ...g[1]!.full_result, reward: 'not a number' };
      for (const r of g) push(replace, r.group_id, { ...bad('reward_not_number', r, ['invalid_row']), mutation: r === g[1] ? 'reward_not_number' : null, expect: r === g[1] ? ['invalid_row'] : [] });
    },
    (group) => {
      const g = group.map(clone);
      const reward = Number(g[2]!.full_result.reward ?? 0);
      g[2]!.full_result = { ...g[2]!.full_result, reward_components: { a: reward + 1, b: 2 } };
      for (const r of g) push(replace, r.group_id, { ...bad('components_mismatch', r, ['reward_components_mismatch']), mutation: r === g[2] ? 'components_mismatch' : null, expect: r === g[2] ? ['reward_components_mismatch'] : [] });
    },
  ];

  const gymMutations: Array<(row: RolloutRow) => void> = [
    (row) => gymBefore(row, 'gym_no_output', (g) => void ((g.gym_result.response as { output: unknown[] }).output = []), ['no_generation_data']),
    (row) =>
      gymBefore(
        row,
        'gym_non_contiguous',
        (g) => {
          const output = (g.gym_result.response as { output: Array<Record<string, unknown>> }).output;
          // Loadgen results hold typed arrays (binary columns on the wire).
          const items = output.filter((i) => isTokenList(i.generation_token_ids));
          const second = items[1] ?? null;
          if (second) (second.prompt_token_ids as number[])[0] = ((second.prompt_token_ids as number[])[0]! + 1) % 1000;
          else {
            // One turn only: a second turn whose prompt does not extend the first.
            const first = items[0]!;
            output.push({ ...clone(first), prompt_token_ids: [999_999] });
          }
        },
        ['non_contiguous_tokens'],
      ),
    (row) => gymBefore(row, 'gym_output_not_list', (g) => void ((g.gym_result.response as { output: unknown }).output = { not: 'a list' }), ['invalid_row']),
  ];
  function gymBefore(row: RolloutRow, mutation: string, edit: (g: GymResult) => void, expect: DeadLetterReason[]): void {
    const g = clone(gymResultFromRow(row));
    edit(g);
    const value = o.codec.encode({ kind: 'gym_result', result: g });
    push(afterRow, `${row.group_id}/${row.row_index}#before`, { key: keyOf(row.group_id), group: row.group_id, value, mutation, expect, line: gymLine(g) });
  }

  // Draw mutations until the campaign is big enough, spreading them over the healthy groups.
  const groupsForGroupLevel = healthy.filter((_, i) => i % 10 === 0);
  for (const [i, gid] of groupsForGroupLevel.entries()) {
    groupMutations[i % groupMutations.length]!(byGroup.get(gid)!);
    groupLevelUsed.add(gid);
    badCount++;
  }
  // Mutations that replace a row go to their own groups: a replaced row is sent
  // at the group's start, which would make a later "not yet sent" index a duplicate.
  const rowLevelGroups = healthy.filter((g) => !groupLevelUsed.has(g));
  const replacingGroups = rowLevelGroups.filter((_, i) => i % 4 === 0);
  const otherGroups = rowLevelGroups.filter((_, i) => i % 4 !== 0);
  const nested = (depth: number): JsonObject => {
    let deep: JsonObject = { leaf: 1 };
    for (let i = 0; i < depth; i++) deep = { n: deep };
    return deep;
  };
  const replaceWith = (mutation: string, edit: (t: RolloutRow) => void) => (row: RolloutRow) => {
    const t = clone(row);
    edit(t);
    push(before, row.group_id, bad(mutation, t, []));
    drop.add(rowKey(row));
  };
  const replacing: Array<(row: RolloutRow) => Promise<void> | void> = [
    ...rowMutations.slice(-3).map((m) => (row: RolloutRow) => m(row, byGroup.get(row.group_id)!)),
    textMutations[0]!,
    (row) => spliceJson(row, 'huge_number_text', '{"big":1e400}', [], true),
    replaceWith('deep_full_result', (t) => void (t.full_result = { ...t.full_result, deep: nested(2000) })),
    replaceWith('long_full_result', (t) => void (t.full_result = { ...t.full_result, note: 'y'.repeat(200_000) })),
    (row) => {
      // The row sent as the NeMo-Gym result it came from, with deep and long JSON inside gym_result.
      const g = clone(gymResultFromRow(row));
      g.gym_result = { ...g.gym_result, deep: nested(2000), note: 'z'.repeat(100_000) };
      push(before, row.group_id, { key: keyOf(row.group_id), group: row.group_id, value: o.codec.encode({ kind: 'gym_result', result: g }), mutation: 'gym_deep_long', expect: [], line: gymLine(g) });
      drop.add(rowKey(row));
    },
  ];
  const others: Array<(row: RolloutRow, group: RolloutRow[]) => Promise<void> | void> = [...rowMutations.slice(0, -3), ...textMutations.slice(1), ...gymMutations];
  let n = 0;
  let r = 0;
  while (badCount < o.minBad) {
    const gid = otherGroups[n % otherGroups.length]!;
    const group = byGroup.get(gid)!;
    const row = group[Math.floor(rng.float() * group.length)]!;
    await others[Math.floor(n / otherGroups.length + n) % others.length]!(row, group);
    badCount++;
    n++;
    // One row-replacing mutation (a record that is accepted) for every ten bad ones.
    if (n % 10 === 0) {
      const rg = byGroup.get(replacingGroups[r % replacingGroups.length]!)!;
      const free = rg.filter((x) => !drop.has(rowKey(x)));
      if (free.length > 0) await replacing[r % replacing.length]!(free[Math.floor(rng.float() * free.length)]!);
      r++;
    }
  }

  // Lay the stream out: loadgen order, with each group's extra records around its rows.
  const records: CampaignRecord[] = [];
  const startedGroups = new Set<string>();
  for (const e of events) {
    if (e.kind === 'batch_end') {
      // Everything promised after groups goes before the batch ends.
      for (const [gid, rs] of afterGroup) if (byGroup.get(gid)?.[0]?.batch_id === e.end.batch_id) records.push(...rs.splice(0));
      records.push({ key: keyOf(e.end.batch_id), value: o.codec.encode({ kind: 'batch_end', end: e.end }), everyPartition: true, mutation: null, expect: [], line: formatJsonLine({ kind: 'batch_end', end: e.end }) });
      continue;
    }
    if (e.kind === 'garbage') {
      records.push({ key: keyOf(e.key), value: Buffer.from(e.bytes), mutation: `loadgen:${e.expect.fault}`, expect: ['undecodable'], line: null });
      continue;
    }
    const row = e.row;
    const gid = row.group_id;
    if (replace.has(gid)) {
      if (!startedGroups.has(gid)) records.push(...replace.get(gid)!);
      startedGroups.add(gid);
      continue;
    }
    if (!startedGroups.has(gid)) {
      startedGroups.add(gid);
      records.push(...(before.get(gid) ?? []));
    }
    records.push(...(afterRow.get(`${gid}/${row.row_index}#before`) ?? []));
    if (e.expect) {
      records.push({ key: keyOf(gid), value: frame(row), mutation: `loadgen:${e.expect.fault}`, expect: e.expect.reason ? [e.expect.reason] : [], line: rowLine(row) });
    } else if (!drop.has(rowKey(row))) {
      records.push(valid(row));
    }
    records.push(...(afterRow.get(rowKey(row)) ?? []));
  }
  return { seed: o.seed, records, badCount: records.filter((r) => r.mutation !== null && (r.expect === 'oracle' || r.expect.length > 0)).length };
}

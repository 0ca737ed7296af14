/**
 * The arrival schedule of one batch: which record goes out when, with every
 * injected fault placed so that its outcome is fixed by SPEC §3 alone and
 * does not depend on how an accumulator orders its checks.
 *
 * Rows are descriptors here (group, generation, which copy, what mutation),
 * not built rows: a batch of the router-replay profile would hold hundreds
 * of megabytes if materialized up front. The generator builds each row when
 * its slot is reached.
 *
 * Placement rules (the "closing row" of a group is the arrival that
 * completes its N indices):
 * - a conflicting second copy arrives after the first copy and before the
 *   closing row, so it is a `duplicate_row_index` and not a
 *   `group_already_closed` (except with N = 1, where the first copy closes
 *   the group and the expectation says so);
 * - an out-of-range row arrives before the closing row;
 * - a NaN copy arrives before the valid copy of its index (the retry);
 * - the odd row of a `mixed_agents` / `task_mismatch` group is its closing
 *   row, so an accumulator that checks on arrival and one that checks on
 *   completion both dead-letter the whole group, once;
 * - such a group has no missing row (that outcome would depend on the check
 *   order), and its odd row carries no row fault (the draw weights make up
 *   for both, see `rowFaultWeights`);
 * - a group keeps at least one row, so every missing row yields an
 *   `incomplete_group` dead letter.
 * Clean rows own one time slot each, so a missing row leaves a gap and
 * extra records split the gaps between clean rows: turning faults on does
 * not move the clean rows' times.
 */
import type { ExpectedOutcome } from './events.js';
import { GROUP_FAULTS, ROW_FAULTS, type FaultSpec } from './fault-spec.js';
import { deriveRng, type Rng } from './random.js';

type RowFault = (typeof ROW_FAULTS)[number];
type GroupFault = (typeof GROUP_FAULTS)[number];

/** How a scheduled row differs from the row its plan describes. */
export type RowMutation =
  | { kind: 'nan'; at: number } // NaN at fraction `at` of the last generated message
  | { kind: 'row_index'; rowIndex: number }
  | { kind: 'agent' }
  | { kind: 'task' };

export type Slot =
  | {
      kind: 'row';
      group: number;
      generation: number;
      /** The seeded row, or an independently drawn second rollout of the same index. */
      content: 'original' | 'conflicting';
      mutation: RowMutation | null;
      timeMs: number;
      producedAtMs: number;
      expect?: ExpectedOutcome;
    }
  | { kind: 'garbage'; group: number; timeMs: number; bytes: Uint8Array; expect: ExpectedOutcome };

export interface BatchScheduleInput {
  seed: number;
  batchNumber: number;
  batchId: string;
  groupIds: string[];
  generations: number;
  faults: FaultSpec;
  /** Rows of the batch are shuffled within a sliding window of this many rows (0 = in order). */
  reorderWindow: number;
  rowsPerSecond: number;
  startTimeMs: number;
}

export interface BatchSchedule {
  slots: Slot[];
  /** When the batch's BatchEnd goes out. */
  endTimeMs: number;
  /** `incomplete_group` outcomes, to attach to the BatchEnd. */
  incomplete: ExpectedOutcome[];
}

/** A slot before its time is known; a row may pin its `producedAtMs` (an identical resend keeps the original's). */
type SlotDraft =
  | (Omit<Extract<Slot, { kind: 'row' }>, 'timeMs' | 'producedAtMs'> & { producedAtMs?: number })
  | Omit<Extract<Slot, { kind: 'garbage' }>, 'timeMs'>;

interface Extra {
  before: number;
  frac: number;
  slot: Slot;
}

/**
 * Schedules one batch. Deterministic in `(seed, batchNumber)`, with separate
 * random streams for faults, order and times so that each can change
 * without disturbing the others.
 */
export function scheduleBatch(input: BatchScheduleInput): BatchSchedule {
  const { seed, batchNumber, batchId, groupIds, generations: n, faults } = input;
  const g = groupIds.length;
  const m = g * n;
  const fr = deriveRng(seed, 'faults', batchNumber);

  // 1. Faults. Every draw happens whatever the outcome, so one fraction never shifts another's draws.
  const groupFault: (GroupFault | null)[] = [];
  const oddGen: number[] = [];
  for (let gi = 0; gi < g; gi++) {
    const u = fr.float();
    oddGen.push(fr.int(0, n));
    groupFault.push(n >= 2 ? pickCumulative(u, GROUP_FAULTS, GROUP_FAULTS.map((k) => faults[k])) : null);
  }
  const weights = rowFaultWeights(faults, n);
  const rowFault: (RowFault | null)[] = new Array(m).fill(null);
  const garbageAfter: boolean[] = new Array(m).fill(false);
  const missingCount = new Array(g).fill(0);
  for (let idx = 0; idx < m; idx++) {
    const gi = Math.floor(idx / n);
    const faulted = groupFault[gi] !== null;
    let kind = pickCumulative(fr.float(), ROW_FAULTS, faulted ? weights.faultedGroup : weights.plainGroup);
    garbageAfter[idx] = fr.chance(faults.garbage);
    if (faulted && idx % n === oddGen[gi]) kind = null;
    if (kind === 'missing' && missingCount[gi] === n - 1) kind = null;
    if (kind === 'missing') missingCount[gi]++;
    rowFault[idx] = kind;
  }

  // 2. Completion order: each row slides forward by up to `reorderWindow` places.
  const or = deriveRng(seed, 'order', batchNumber);
  const keys = new Float64Array(m);
  for (let idx = 0; idx < m; idx++) keys[idx] = idx + or.float() * input.reorderWindow;
  const order = Array.from({ length: m }, (_, i) => i).sort((a, b) => (keys[a] as number) - (keys[b] as number));
  const pos = new Int32Array(m);
  const place = (): void => order.forEach((idx, p) => (pos[idx] = p));
  place();
  const swap = (a: number, b: number): void => {
    const pa = pos[a] as number;
    const pb = pos[b] as number;
    order[pa] = b;
    order[pb] = a;
    pos[a] = pb;
    pos[b] = pa;
  };
  const presentRows = (gi: number): number[] =>
    Array.from({ length: n }, (_, i) => gi * n + i).filter((idx) => rowFault[idx] !== 'missing');
  const lastByPos = (rows: number[]): number => rows.reduce((a, b) => ((pos[a] as number) > (pos[b] as number) ? a : b));

  // 3. Odd rows close their group; conflicting rows never do (when another row can).
  for (let gi = 0; gi < g; gi++) {
    const rows = presentRows(gi);
    if (groupFault[gi] !== null) swap(gi * n + (oddGen[gi] as number), lastByPos(rows));
    else if (missingCount[gi] === 0) {
      const closing = lastByPos(rows);
      const calm = rows.filter((idx) => rowFault[idx] !== 'conflict');
      if (rowFault[closing] === 'conflict' && calm.length > 0) swap(closing, lastByPos(calm));
    }
  }

  // 4. Times: one exponential gap per clean slot, at the profile's rate.
  const tr = deriveRng(seed, 'time', batchNumber);
  const gap = 1000 / input.rowsPerSecond;
  const times = new Float64Array(m);
  let t = input.startTimeMs;
  for (let p = 0; p < m; p++) times[p] = t += tr.exponential(gap);
  const endTimeMs = t + tr.exponential(gap);
  const timeAt = (before: number, frac: number): number => {
    const lo = before === 0 ? input.startTimeMs : (times[before - 1] as number);
    const hi = before === m ? endTimeMs : (times[before] as number);
    return lo + (hi - lo) * frac;
  };

  const firstPos = new Int32Array(g).fill(m);
  const closePos = new Int32Array(g).fill(-1);
  for (let idx = 0; idx < m; idx++) {
    const gi = Math.floor(idx / n);
    firstPos[gi] = Math.min(firstPos[gi] as number, pos[idx] as number);
    if (rowFault[idx] !== 'missing') closePos[gi] = Math.max(closePos[gi] as number, pos[idx] as number);
  }
  // A group with a missing row never closes before its BatchEnd.
  const openUntil = (gi: number): number => (missingCount[gi] > 0 ? m : (closePos[gi] as number));

  // 5. Extra records, each inserted before a clean slot.
  const extras: Extra[] = [];
  const firstCopy = new Map<number, 'original' | 'conflicting'>();
  for (let idx = 0; idx < m; idx++) {
    const gi = Math.floor(idx / n);
    const k = pos[idx] as number;
    const base = { batch_id: batchId, group_id: groupIds[gi] as string, row_index: idx };
    const row = (content: 'original' | 'conflicting', mutation: RowMutation | null) => ({
      kind: 'row' as const, group: gi, generation: idx % n, content, mutation,
    });
    const add = (before: number, draft: SlotDraft): void => {
      const frac = fr.float();
      const timeMs = timeAt(before, frac);
      const slot: Slot =
        draft.kind === 'row' ? { ...draft, timeMs, producedAtMs: draft.producedAtMs ?? timeMs } : { ...draft, timeMs };
      extras.push({ before, frac, slot });
    };
    switch (rowFault[idx]) {
      case 'dup':
        add(fr.int(k + 1, m + 1), {
          ...row('original', null),
          producedAtMs: times[k] as number, // an identical resend: same bytes, same timestamp
          expect: { fault: 'dup', reason: null, ...base },
        });
        break;
      case 'conflict': {
        const conflictingFirst = fr.chance(0.5);
        firstCopy.set(idx, conflictingFirst ? 'conflicting' : 'original');
        const rejected = conflictingFirst ? 'original' : 'conflicting';
        const close = openUntil(gi);
        const closed = k >= close;
        add(closed ? fr.int(k + 1, m + 1) : fr.int(k + 1, close + 1), {
          ...row(rejected, null),
          expect: {
            fault: 'conflict',
            reason: closed ? 'group_already_closed' : 'duplicate_row_index',
            ...base,
            rejected_copy: rejected,
          },
        });
        break;
      }
      case 'nan':
        add(fr.int(firstPos[gi] as number, k + 1), {
          ...row('original', { kind: 'nan', at: fr.float() }),
          expect: { fault: 'nan', reason: 'nan_logprobs', ...base },
        });
        break;
      case 'out_of_range': {
        const bogus = fr.chance(0.5) ? -1 - fr.int(0, n) : (gi + 1) * n + fr.int(0, n);
        add(fr.int(firstPos[gi] as number, openUntil(gi) + 1), {
          ...row('original', { kind: 'row_index', rowIndex: bogus }),
          expect: { fault: 'out_of_range', reason: 'row_index_out_of_range', ...base, row_index: bogus },
        });
        break;
      }
      default:
        break;
    }
    if (garbageAfter[idx]) {
      add(k + 1, {
        kind: 'garbage',
        group: gi,
        bytes: garbageBytes(fr, batchId, groupIds[gi] as string),
        expect: { fault: 'garbage', reason: 'undecodable', batch_id: batchId, group_id: groupIds[gi] as string },
      });
    }
  }
  extras.sort((a, b) => a.before - b.before || a.frac - b.frac);

  // 6. Interleave clean slots and extras.
  const slots: Slot[] = [];
  let e = 0;
  for (let p = 0; p <= m; p++) {
    while (e < extras.length && (extras[e] as Extra).before === p) slots.push((extras[e++] as Extra).slot);
    if (p === m) break;
    const idx = order[p] as number;
    if (rowFault[idx] === 'missing') continue;
    const gi = Math.floor(idx / n);
    const fault = groupFault[gi];
    const isOdd = fault != null && idx % n === oddGen[gi];
    const slot: Slot = {
      kind: 'row',
      group: gi,
      generation: idx % n,
      content: firstCopy.get(idx) ?? 'original',
      mutation: isOdd ? { kind: fault === 'mixed_agents' ? 'agent' : 'task' } : null,
      timeMs: times[p] as number,
      producedAtMs: times[p] as number,
    };
    if (isOdd) {
      slot.expect = {
        fault,
        reason: fault === 'mixed_agents' ? 'mixed_agents' : 'task_index_mismatch',
        batch_id: batchId,
        group_id: groupIds[gi] as string,
        row_index: idx,
        row_indices: Array.from({ length: n }, (_, i) => gi * n + i),
      };
    }
    slots.push(slot);
  }

  const incomplete: ExpectedOutcome[] = [];
  for (let gi = 0; gi < g; gi++) {
    if (missingCount[gi] === 0) continue;
    const all = Array.from({ length: n }, (_, i) => gi * n + i);
    incomplete.push({
      fault: 'missing',
      reason: 'incomplete_group',
      batch_id: batchId,
      group_id: groupIds[gi] as string,
      row_indices: all.filter((idx) => rowFault[idx] !== 'missing'),
      missing_row_indices: all.filter((idx) => rowFault[idx] === 'missing'),
    });
  }
  return { slots, endTimeMs, incomplete };
}

/** The kind whose cumulative weight first exceeds `u`, or null. */
function pickCumulative<K extends string>(u: number, kinds: readonly K[], weights: readonly number[]): K | null {
  let acc = 0;
  for (let i = 0; i < kinds.length; i++) {
    acc += weights[i] as number;
    if (u < acc) return kinds[i] as K;
  }
  return null;
}

/**
 * Per-row draw weights of the row faults, corrected for the exclusions so
 * that each kind still hits its configured fraction of all rows: a group
 * with a group fault gets no missing row and its odd row no row fault, so
 * missing rows are drawn more often in the other groups (÷ (1 − q)) and the
 * other kinds more often on the remaining rows of faulted groups
 * (× N / (N − 1)). Exact in expectation unless a corrected set would exceed
 * 1, in which case it is scaled down to 1.
 */
function rowFaultWeights(faults: FaultSpec, n: number): { plainGroup: number[]; faultedGroup: number[] } {
  const q = n >= 2 ? GROUP_FAULTS.reduce((s, k) => s + faults[k], 0) : 0;
  const plain = ROW_FAULTS.map((k) => (k === 'missing' && q < 1 ? faults[k] / (1 - q) : faults[k]));
  const faulted = ROW_FAULTS.map((k) => (k === 'missing' || n < 2 ? 0 : (faults[k] * n) / (n - 1)));
  const capped = (w: number[]): number[] => {
    const sum = w.reduce((a, b) => a + b, 0);
    return sum > 1 ? w.map((x) => x / sum) : w;
  };
  return { plainGroup: capped(plain), faultedGroup: capped(faulted) };
}

/**
 * Bytes no Confluent Avro decoder accepts (the first byte is never the magic
 * byte 0): random noise, a row serialized as JSON by a producer that forgot
 * its serializer, or a frame with a wrong magic byte.
 */
function garbageBytes(rng: Rng, batchId: string, groupId: string): Uint8Array {
  const variant = rng.int(0, 3);
  if (variant === 1) {
    return new TextEncoder().encode(JSON.stringify({ batch_id: batchId, group_id: groupId, row_index: rng.int(0, 64) }));
  }
  const bytes = new Uint8Array(rng.int(8, 200));
  for (let i = 0; i < bytes.length; i++) bytes[i] = rng.int(0, 256);
  bytes[0] = variant === 2 ? 1 : rng.int(1, 256);
  return bytes;
}

/**
 * The load generator's entry point: a lazy, seeded stream of synthetic
 * rollout rows, garbage records and BatchEnd markers (SPEC §7).
 *
 * Pure: no Kafka, no clock, no I/O. A producer wrapper sends each event and
 * may sleep `delayMs` before it for realistic pacing; tests iterate it
 * directly. Rows are built only when their event is reached, so memory
 * stays at one batch's schedule plus one row, whatever the profile.
 */
import type { RolloutRow } from '../processors/types.js';
import { scheduleBatch, type RowMutation, type Slot } from './batch-schedule.js';
import { planGroup, planRow, type GroupPlan } from './conversation-plan.js';
import type { LoadgenEvent } from './events.js';
import { noFaults, validateFaultSpec, type FaultSpec } from './fault-spec.js';
import { PROFILES, resolveShape, type ProfileName, type RowShape, type ShapeOverrides } from './profiles.js';
import { deriveRng } from './random.js';
import { buildGroupPrompt, buildRow, type GroupPrompt } from './row-builder.js';

/** What to generate. `batches × groupsPerBatch × generations` rows, before faults. */
export interface LoadgenOptions {
  batches: number;
  groupsPerBatch: number;
  /** N: rows per prompt group. */
  generations: number;
  /** Same seed and options → the same events, bit for bit. */
  seed: number;
  /** Default `'default'`. */
  profile?: ProfileName;
  /** Default: no faults. */
  faults?: FaultSpec;
  /** Row-shape knobs on top of the profile (lengths, vocab, routes, low-effort marker, rates…). */
  shape?: ShapeOverrides;
  /** Prefix of every group id; must be unique per run on a shared topic. Default `lg<seed>`. */
  runId?: string;
  /**
   * Prefix of every batch id (`<prefix>-b000001`). Accumulate remembers a
   * batch's BatchEnd and batch metrics aggregate by batch id, so runs sharing
   * a topic need their own batch ids too: the loadgen command passes its run
   * id. Default none (`b000001`). Group ids stay `<run>-b000001-g0003` either way.
   */
  batchIdPrefix?: string;
  /** Row rate the delay hints model. Default: the profile's. */
  rowsPerSecond?: number;
  /** Out-of-order window in groups. Default: the profile's. 0 sends rows in order. */
  reorderWindowGroups?: number;
  /** Number of the first batch (`b000001` for 1). Default 1. */
  firstBatch?: number;
  /** Policy version of the first batch; a group's `weight_version` lags its batch's by up to the shape's `maxWeightLag`. Default 0. */
  firstWeightVersion?: number;
  /** `produced_at` of the run's start, epoch ms. Default a fixed instant, so runs are reproducible; a live producer passes `Date.now()`. */
  startTimeMs?: number;
}

/** 2023-11-14T22:13:20Z: an arbitrary fixed origin for `produced_at`. */
export const DEFAULT_START_TIME_MS = 1_700_000_000_000;

/** `b000001` for 1; `<prefix>-b000001` with a prefix. */
export function formatBatchId(batchNumber: number, prefix?: string | null): string {
  const id = `b${String(batchNumber).padStart(6, '0')}`;
  return prefix ? `${prefix}-${id}` : id;
}

/** `<run>-b000001-g0003` for run, batch 1, group 3. */
export function formatGroupId(runId: string, batchId: string, groupIndex: number): string {
  return `${runId}-${batchId}-g${String(groupIndex).padStart(4, '0')}`;
}

function requireInt(name: string, value: number, min: number): void {
  if (!Number.isInteger(value) || value < min) throw new RangeError(`${name} must be an integer ≥ ${min}, got ${value}`);
}

interface GroupState {
  plan: GroupPlan;
  prompt: GroupPrompt;
  weightVersion: number;
  instanceLabel: string;
}

/** Options after defaults and validation: what the generator actually runs on. */
export interface ResolvedLoadgenOptions {
  batches: number;
  groupsPerBatch: number;
  generations: number;
  seed: number;
  shape: RowShape;
  faults: FaultSpec;
  runId: string;
  batchIdPrefix: string | null;
  rowsPerSecond: number;
  reorderWindowGroups: number;
  firstBatch: number;
  firstWeightVersion: number;
  startTimeMs: number;
}

/**
 * Applies the profile's defaults and validates. Throws `RangeError` for
 * sizes that are not non-negative/positive integers, an unknown profile, a
 * non-positive rate or a shape override that cannot generate rows, and
 * `FaultSpecError` for an invalid fault spec.
 */
export function resolveLoadgenOptions(opts: LoadgenOptions): ResolvedLoadgenOptions {
  requireInt('batches', opts.batches, 0);
  requireInt('groupsPerBatch', opts.groupsPerBatch, 1);
  requireInt('generations', opts.generations, 1);
  if (!Number.isSafeInteger(opts.seed)) throw new RangeError(`seed must be a safe integer, got ${opts.seed}`);
  const profile = PROFILES[opts.profile ?? 'default'];
  if (profile === undefined) throw new RangeError(`unknown profile "${opts.profile}"; known: ${Object.keys(PROFILES).join(', ')}`);
  const faults = opts.faults ?? noFaults();
  validateFaultSpec(faults);
  const rowsPerSecond = opts.rowsPerSecond ?? profile.rowsPerSecond;
  if (!(rowsPerSecond > 0) || !Number.isFinite(rowsPerSecond)) {
    throw new RangeError(`rowsPerSecond must be a positive number, got ${rowsPerSecond}`);
  }
  const reorderWindowGroups = opts.reorderWindowGroups ?? profile.reorderWindowGroups;
  if (!(reorderWindowGroups >= 0)) throw new RangeError(`reorderWindowGroups must be ≥ 0, got ${reorderWindowGroups}`);
  const firstBatch = opts.firstBatch ?? 1;
  requireInt('firstBatch', firstBatch, 0);
  return {
    batches: opts.batches,
    groupsPerBatch: opts.groupsPerBatch,
    generations: opts.generations,
    seed: opts.seed,
    shape: resolveShape(profile, opts.shape),
    faults,
    runId: opts.runId ?? `lg${opts.seed}`,
    batchIdPrefix: opts.batchIdPrefix ?? null,
    rowsPerSecond,
    reorderWindowGroups,
    firstBatch,
    firstWeightVersion: opts.firstWeightVersion ?? 0,
    startTimeMs: opts.startTimeMs ?? DEFAULT_START_TIME_MS,
  };
}

/**
 * Generates the events of a run: per batch, its rows (and injected faults)
 * in completion order, then one `batch_end` whose `num_rows` is the batch's
 * logical size `groupsPerBatch × generations` (what the producer meant to
 * send, whatever faults added or removed). Options are validated when this
 * is called (see `resolveLoadgenOptions` for the errors); events are built
 * lazily as the generator is iterated.
 */
export function generateEvents(opts: LoadgenOptions): Generator<LoadgenEvent> {
  return run(resolveLoadgenOptions(opts));
}

function* run(cfg: ResolvedLoadgenOptions): Generator<LoadgenEvent> {
  const { seed, groupsPerBatch, generations: n, shape } = cfg;
  let lastTime = cfg.startTimeMs;
  for (let b = 0; b < cfg.batches; b++) {
    const batchNumber = cfg.firstBatch + b;
    const batchId = formatBatchId(batchNumber, cfg.batchIdPrefix);
    const groupIds = Array.from({ length: groupsPerBatch }, (_, gi) => formatGroupId(cfg.runId, formatBatchId(batchNumber), gi));
    const schedule = scheduleBatch({
      seed,
      batchNumber,
      batchId,
      groupIds,
      generations: n,
      faults: cfg.faults,
      reorderWindow: cfg.reorderWindowGroups * n,
      rowsPerSecond: cfg.rowsPerSecond,
      startTimeMs: lastTime,
    });
    // Group prompts are built on first use and kept for the batch: rows of a group share them.
    const groups = new Map<number, GroupState>();
    const groupState = (gi: number): GroupState => {
      let state = groups.get(gi);
      if (state === undefined) {
        const rng = deriveRng(seed, 'group', batchNumber, gi);
        const plan = planGroup(shape, rng);
        const prompt = buildGroupPrompt(shape, plan, rng);
        const version = cfg.firstWeightVersion + b - rng.int(0, shape.maxWeightLag + 1);
        state = { plan, prompt, weightVersion: Math.max(0, version), instanceLabel: `actor-${rng.int(0, shape.actors)}` };
        groups.set(gi, state);
      }
      return state;
    };

    for (const slot of schedule.slots) {
      const delayMs = slot.timeMs - lastTime;
      lastTime = slot.timeMs;
      if (slot.kind === 'garbage') {
        yield { kind: 'garbage', delayMs, key: groupIds[slot.group] as string, bytes: slot.bytes, expect: slot.expect };
        continue;
      }
      const row = materialize(shape, seed, batchNumber, batchId, groupIds, n, groupState(slot.group), slot);
      yield slot.expect === undefined ? { kind: 'row', delayMs, row } : { kind: 'row', delayMs, row, expect: slot.expect };
    }
    const end = { batch_id: batchId, num_rows: groupsPerBatch * n };
    const delayMs = schedule.endTimeMs - lastTime;
    lastTime = schedule.endTimeMs;
    yield schedule.incomplete.length === 0
      ? { kind: 'batch_end', delayMs, end }
      : { kind: 'batch_end', delayMs, end, expect: schedule.incomplete };
  }
}

function materialize(
  shape: RowShape,
  seed: number,
  batchNumber: number,
  batchId: string,
  groupIds: string[],
  n: number,
  group: GroupState,
  slot: Extract<Slot, { kind: 'row' }>,
): RolloutRow {
  const rng = deriveRng(seed, 'row', batchNumber, slot.group, slot.generation, slot.content);
  const plan = planRow(shape, group.plan, rng);
  const row = buildRow(shape, group.plan, group.prompt, plan, rng, {
    batchId,
    groupId: groupIds[slot.group] as string,
    groupIndex: slot.group,
    rowIndex: slot.group * n + slot.generation,
    numGenerations: n,
    weightVersion: group.weightVersion,
    instanceLabel: group.instanceLabel,
    producedAt: Math.round(slot.producedAtMs),
  });
  if (slot.mutation !== null) {
    applyMutation(shape, group.plan, row, slot.mutation, deriveRng(seed, 'mutation', batchNumber, slot.group, slot.generation));
  }
  return row;
}

/** Turns a freshly built row into its faulty variant (it owns every array, so in-place is safe). */
function applyMutation(shape: RowShape, group: GroupPlan, row: RolloutRow, mutation: RowMutation, rng: ReturnType<typeof deriveRng>): void {
  switch (mutation.kind) {
    case 'row_index':
      row.row_index = mutation.rowIndex;
      return;
    case 'nan': {
      const generated = row.message_log.filter((m) => m.role === 'assistant' && m.generation_logprobs != null);
      const lp = generated[generated.length - 1]?.generation_logprobs;
      if (lp == null || lp.length === 0) throw new Error('a planned row always has a generated message');
      lp[Math.min(lp.length - 1, Math.floor(mutation.at * lp.length))] = Number.NaN;
      return;
    }
    case 'agent': {
      const others = shape.agents.filter((a) => a !== group.agent);
      row.agent_ref = { name: others.length > 0 ? rng.pick(others) : `${group.agent}_shadow` };
      return;
    }
    case 'task': {
      const k = shape.taskIndex.numTasks;
      if (group.taskIndex === null) row.task_index = rng.int(0, k);
      else if (k === 1 || rng.chance(0.5)) row.task_index = null;
      else row.task_index = (group.taskIndex + 1 + rng.int(0, k - 1)) % k;
      return;
    }
  }
}

/**
 * Multi-reward verifiers (SPEC §4.6, REFERENCE-NOTES 23).
 *
 * A verifier may return `reward_components` (name → score) beside its scalar
 * `reward`; they become `reward/<name>` columns for per-component advantages.
 * The contract is `reward == sum(components)`. **Deviation**: it is checked
 * against the verifier's ORIGINAL reward, because shaping and penalties
 * change the scalar on purpose and the reference's check on the shaped value
 * fails every penalised multi-reward group.
 */
import { compareCodePoints } from './json-access.js';
import type { JsonObject, JsonValue } from './types.js';

/** Result of reading one row's components: none, the numbers, or why they are unusable. */
export type ExtractedComponents =
  | { ok: true; components: Record<string, number> | null }
  | { ok: false; message: string };

/** Python's `float(x)` for the JSON values it accepts: numbers, booleans and numeric strings. */
function toFloat(value: JsonValue): number | null {
  if (typeof value === 'number') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'string') {
    const s = value.trim().toLowerCase().replace(/_/g, '');
    if (/^[+-]?(inf|infinity)$/.test(s)) return s.startsWith('-') ? -Infinity : Infinity;
    if (/^[+-]?nan$/.test(s)) return Number.NaN;
    if (/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/.test(s)) return Number(s);
  }
  return null;
}

/**
 * `full_result.reward_components` as numbers. Missing, null, empty (`{}`) or
 * otherwise falsy components count as absent (null). A non-object, or a
 * value that is not a number, is unusable.
 */
export function extractRewardComponents(fullResult: JsonObject): ExtractedComponents {
  const raw = fullResult['reward_components'];
  if (raw === undefined || raw === null || raw === false || raw === 0 || raw === '') {
    return { ok: true, components: null };
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    if (Array.isArray(raw) && raw.length === 0) return { ok: true, components: null };
    return { ok: false, message: 'reward_components is not an object' };
  }
  const entries = Object.entries(raw);
  if (entries.length === 0) return { ok: true, components: null };
  const components: Record<string, number> = {};
  for (const [name, value] of entries) {
    const num = toFloat(value);
    if (num === null) return { ok: false, message: `reward_components.${name} is not a number` };
    components[name] = num;
  }
  return { ok: true, components };
}

/** Sorted union of the component names (Python `sorted` order). */
export function rewardComponentNames(perRow: readonly (Record<string, number> | null)[]): string[] {
  const names = new Set<string>();
  for (const c of perRow) if (c !== null) for (const name of Object.keys(c)) names.add(name);
  return [...names].sort(compareCodePoints);
}

/**
 * One row's components over the group's `names`, 0.0 for each name the row
 * lacks; null for a row that had no components at all (the packer fills its
 * columns with 0.0 from `reward_component_names`).
 */
export function fillRewardComponents(
  components: Record<string, number> | null,
  names: readonly string[],
): Record<string, number> | null {
  if (components === null) return null;
  const filled: Record<string, number> = {};
  for (const name of names) filled[name] = components[name] ?? 0.0;
  return filled;
}

/**
 * Python's `math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)`: symmetric,
 * `|a-b| <= max(1e-5*max(|a|,|b|), 1e-6)`; equal infinities are close, NaN
 * never is.
 */
export function rewardIsClose(a: number, b: number): boolean {
  if (a === b) return true;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return false;
  const diff = Math.abs(a - b);
  return diff <= Math.max(1e-5 * Math.max(Math.abs(a), Math.abs(b)), 1e-6);
}

/** Sum of the component values in their insertion order (as Python's `sum(d.values())`). */
export function componentSum(components: Record<string, number>): number {
  let sum = 0;
  for (const v of Object.values(components)) sum += v;
  return sum;
}

/**
 * Index (into `originalRewards`) and message of the first row whose
 * components do not sum to its original reward; null when every row with
 * components satisfies the contract.
 */
export function findRewardComponentMismatch(
  originalRewards: readonly number[],
  perRow: readonly (Record<string, number> | null)[],
): { index: number; message: string } | null {
  for (let i = 0; i < perRow.length; i++) {
    const c = perRow[i];
    if (c === null || c === undefined) continue;
    const sum = componentSum(c);
    const reward = originalRewards[i]!;
    if (!rewardIsClose(reward, sum)) {
      return {
        index: i,
        message: `reward=${reward} but reward_components sum to ${sum} (${JSON.stringify(c)}); a multi-reward verifier must set reward = sum(reward_components)`,
      };
    }
  }
  return null;
}

import { describe, expect, test } from 'vitest';
import {
  extractRewardComponents,
  fillRewardComponents,
  findRewardComponentMismatch,
  rewardComponentNames,
  rewardIsClose,
} from '../../../processors/reward-components.js';
import type { JsonValue } from '../../../processors/types.js';

function extract(components: JsonValue | undefined) {
  return extractRewardComponents(components === undefined ? { reward: 1 } : { reward: 1, reward_components: components });
}

describe('reward components', () => {
  test('missing, null and empty components count as absent', () => {
    for (const c of [undefined, null, {}]) expect(extract(c)).toEqual({ ok: true, components: null });
  });

  test('component values become numbers, booleans as 0/1 and numeric strings parsed', () => {
    expect(extract({ a: 0.5, b: true, c: '0.25' })).toEqual({ ok: true, components: { a: 0.5, b: 1, c: 0.25 } });
  });

  test('a non-numeric value or a non-object is unusable', () => {
    expect(extract({ a: 'high' }).ok).toBe(false);
    expect(extract({ a: null }).ok).toBe(false);
    expect(extract([1, 2]).ok).toBe(false);
  });

  test('names are the sorted union over rows', () => {
    expect(rewardComponentNames([{ b: 1, a: 2 }, null, { c: 0, a: 1 }])).toEqual(['a', 'b', 'c']);
    expect(rewardComponentNames([null, null])).toEqual([]);
  });

  test('a row lacking a component gets 0.0 for it, and a row without components stays null', () => {
    expect(fillRewardComponents({ b: 1 }, ['a', 'b', 'c'])).toEqual({ a: 0, b: 1, c: 0 });
    expect(fillRewardComponents(null, ['a'])).toBeNull();
  });

  test('closeness is symmetric with rel 1e-5 and abs 1e-6', () => {
    expect(rewardIsClose(1, 1 + 9e-7)).toBe(true);
    expect(rewardIsClose(0, 2e-6)).toBe(false);
    expect(rewardIsClose(1000, 1000.009)).toBe(true);
    expect(rewardIsClose(1000.009, 1000)).toBe(true);
    expect(rewardIsClose(1000, 1000.02)).toBe(false);
    expect(rewardIsClose(Infinity, Infinity)).toBe(true);
    expect(rewardIsClose(Number.NaN, Number.NaN)).toBe(false);
  });

  test('the first row whose components do not sum to its reward is reported', () => {
    const comps: (Record<string, number> | null)[] = [{ x: 0.5, y: 0.5 }, null, { x: 0.2 }, { x: 9 }];
    const found = findRewardComponentMismatch([1.0, 7, 0.5, 1], comps);
    expect(found?.index).toBe(2);
    expect(found?.message).toContain('reward=0.5');
    expect(findRewardComponentMismatch([1.0, 7], comps.slice(0, 2))).toBeNull();
  });
});

/**
 * Defensive reads of the free-form JSON a verifier returns (`full_result`,
 * `request`). Postprocess must never throw on bad data, so every lookup here
 * degrades to "absent" where the reference would raise on a wrong type.
 */
import type { JsonObject, JsonValue } from './types.js';

/** The value as a JSON object, or null for anything else (arrays included). */
export function asObject(value: JsonValue | undefined): JsonObject | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : null;
}

/** True when `key` is an own key of the object, whatever its value (Python's `key in dict`). */
export function hasKey(obj: JsonObject, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(obj, key);
}

/**
 * `full_result.response.output` as a list; an absent or non-list response or
 * output reads as no items.
 */
export function responseOutputItems(fullResult: JsonObject): JsonValue[] {
  const response = asObject(fullResult['response']);
  const output = response?.['output'];
  return Array.isArray(output) ? output : [];
}

/**
 * Python's non-overlapping `str.count(sub)`. An empty `sub` matches between
 * every character, so it counts `text.length + 1` like Python does.
 */
export function countOccurrences(text: string, sub: string): number {
  if (sub.length === 0) return text.length + 1;
  let count = 0;
  let from = 0;
  for (;;) {
    const at = text.indexOf(sub, from);
    if (at < 0) return count;
    count += 1;
    from = at + sub.length;
  }
}

/** Characters Python's `str.isspace()` accepts (JS `trim` differs: it strips U+FEFF, keeps U+001C–U+001F and U+0085). */
const PY_SPACE = '[\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const PY_STRIP = new RegExp(`^${PY_SPACE}+|${PY_SPACE}+$`, 'g');

/** Python's `str.strip()` with no argument: trims Python whitespace at both ends. */
export function pyStrip(text: string): string {
  return text.replace(PY_STRIP, '');
}

/**
 * Python's `sorted()` order for strings: by code point, not by UTF-16 unit as
 * JavaScript's default sort does (they differ only past U+FFFF).
 */
export function compareCodePoints(a: string, b: string): number {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const ca = ia.next();
    const cb = ib.next();
    if (ca.done) return cb.done ? 0 : -1;
    if (cb.done) return 1;
    const d = ca.value.codePointAt(0)! - cb.value.codePointAt(0)!;
    if (d !== 0) return d;
  }
}

/**
 * Every JSON block of docs/formats.md marked `<!-- example: FILE#LINE -->`
 * must equal that line of docs/examples/FILE (with `partial`: the block is a
 * subset — objects may omit keys, and an array ending in "…" is a prefix).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';

const docs = new URL('../../../docs/', import.meta.url);
const page = readFileSync(new URL('formats.md', docs), 'utf8');
const blocks = [...page.matchAll(/<!-- example: ([\w.-]+)#(\d+)( partial)? -->\n```json\n([\s\S]*?)\n```/g)];

/** Why `doc` is not a faithful excerpt of `actual`, or null. */
function mismatch(doc: unknown, actual: unknown, partial: boolean, path = '$'): string | null {
  if (Array.isArray(doc)) {
    if (!Array.isArray(actual)) return `${path} is not an array`;
    const prefix = partial && doc.at(-1) === '…';
    const items = prefix ? doc.slice(0, -1) : doc;
    if (prefix ? actual.length < items.length : actual.length !== items.length) {
      return `${path} has ${actual.length} items, the doc shows ${items.length}`;
    }
    for (let i = 0; i < items.length; i++) {
      const m = mismatch(items[i], actual[i], partial, `${path}[${i}]`);
      if (m) return m;
    }
    return null;
  }
  if (doc !== null && typeof doc === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return `${path} is not an object`;
    const a = actual as Record<string, unknown>;
    const d = doc as Record<string, unknown>;
    if (!partial && Object.keys(a).length !== Object.keys(d).length) return `${path} has other keys than the doc shows`;
    for (const key of Object.keys(d)) {
      if (!(key in a)) return `${path}.${key} is not in the file`;
      const m = mismatch(d[key], a[key], partial, `${path}.${key}`);
      if (m) return m;
    }
    return null;
  }
  return Object.is(doc, actual) ? null : `${path} is ${JSON.stringify(actual)}, the doc shows ${JSON.stringify(doc)}`;
}

describe('docs/formats.md', () => {
  test('has one checked example per record kind', () => {
    const kinds = blocks.map(([, , , , json]) => {
      const keys = Object.keys(JSON.parse(json!));
      return keys.length === 1 ? keys[0] : 'row';
    });
    expect(new Set(kinds)).toEqual(new Set(['row', 'batch_end', 'group', 'penalized', 'packed', 'metrics', 'dead_letter']));
  });

  test.each(blocks.map((b) => [`${b[1]}#${b[2]}`, b] as const))('the example from %s matches its line', (_, block) => {
    const [, file, line, partial, json] = block;
    const actual = JSON.parse(readFileSync(new URL(`examples/${file}`, docs), 'utf8').split('\n')[Number(line) - 1]!);
    expect(mismatch(JSON.parse(json!), actual, partial !== undefined)).toBeNull();
  });

  test('the excerpt check notices a wrong value, a missing key and a shortened array', () => {
    expect(mismatch({ a: 1 }, { a: 2 }, true)).toBe('$.a is 2, the doc shows 1');
    expect(mismatch({ b: 1 }, { a: 1 }, true)).toBe('$.b is not in the file');
    expect(mismatch([1], [1, 2], false)).toContain('has 2 items');
    expect(mismatch([1, '…'], [1, 2], true)).toBeNull();
  });
});

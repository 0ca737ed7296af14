/**
 * The docs stand on their own: the configuration reference is what
 * config/schema.ts generates (every key described), every relative link in
 * the README and docs resolves inside the repository (files and headings),
 * and the user docs cite no specification outside it.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from 'vitest';
import { configKeys, REFERENCE_FILE, renderReference } from '../../tools/config-reference.js';

const ROOT = join(import.meta.dirname, '..', '..');
const docs = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join('docs', f));
const USER_DOCS = ['README.md', 'python/README.md', 'bench/README.md', ...docs.filter((f) => !f.startsWith('docs/design-'))];
const ALL_DOCS = [...USER_DOCS, ...docs.filter((f) => f.startsWith('docs/design-'))];

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N} -]/gu, '')
    .replace(/ /g, '-');
}

function anchors(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1]!)));
}

function links(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8').replace(/```[\s\S]*?```/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

describe('the configuration reference', () => {
  test('docs/configuration.md is what config/schema.ts generates (npx tsx tools/config-reference.ts --write)', () => {
    expect(readFileSync(REFERENCE_FILE, 'utf8')).toBe(renderReference());
  });
  test('every key has a doc comment', () => {
    expect(configKeys().filter((k) => !k.description).map((k) => k.path)).toEqual([]);
  });
});

describe('links', () => {
  test.each(ALL_DOCS)('every relative link in %s resolves inside the repository', (file) => {
    const broken: string[] = [];
    for (const link of links(file)) {
      if (/^[a-z]+:/i.test(link)) continue; // http(s), mailto: outside links are allowed
      const [path, anchor] = link.split('#') as [string, string | undefined];
      const target = path === '' ? join(ROOT, file) : resolve(ROOT, dirname(file), path);
      if (relative(ROOT, target).startsWith('..')) broken.push(`${link} (outside the repository)`);
      else if (!existsSync(target)) broken.push(`${link} (no such file)`);
      else if (anchor && target.endsWith('.md') && !anchors(target).has(anchor)) broken.push(`${link} (no such heading)`);
    }
    expect(broken).toEqual([]);
  });
  test.each(USER_DOCS)('%s cites no specification outside the repository', (file) => {
    const text = readFileSync(join(ROOT, file), 'utf8');
    expect(text.match(/SPEC(\.md)? ?§|\.\.\/shared/g) ?? []).toEqual([]);
  });
  test('the slug rule matches GitHub on the headings we link to', () => {
    expect(slug('GymResult lines')).toBe('gymresult-lines');
    expect(slug('`api/` and the `Run` (fused)')).toBe('api-and-the-run-fused');
  });
});

/**
 * The docs stand on their own: the configuration reference is what
 * config/schema.ts generates (every key described), every relative link in
 * the README and docs resolves inside the repository (files and headings),
 * and nothing a user reads (docs, example files, `--help`, error messages,
 * printed output) cites a specification outside it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, test } from 'vitest';
import { configKeys, REFERENCE_FILE, renderReference } from '../../tools/config-reference.js';

const ROOT = join(import.meta.dirname, '..', '..');
const docs = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join('docs', f));
const USER_DOCS = ['README.md', 'python/README.md', 'bench/README.md', ...docs.filter((f) => !f.startsWith('docs/design-'))];
const ALL_DOCS = [...USER_DOCS, ...docs.filter((f) => f.startsWith('docs/design-'))];

/**
 * A citation of the specification users do not have: `SPEC §2.1`, a path into
 * `../shared`, or a bare `§3` (one right after a doc's name, `design-….md §3`,
 * points into this repository and is allowed).
 */
const CITATION = /SPEC(\.md)?\s*§|\.\.\/shared|(?<!\.md )§\s*\d/;
const citations = (text: string): string[] => text.split('\n').filter((line) => CITATION.test(line));

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
    expect(citations(readFileSync(join(ROOT, file), 'utf8'))).toEqual([]);
  });
  test('the slug rule matches GitHub on the headings we link to', () => {
    expect(slug('GymResult lines')).toBe('gymresult-lines');
    expect(slug('`api/` and the `Run` (fused)')).toBe('api-and-the-run-fused');
  });
});

/** Files under `dir` (relative to the root) whose name ends with `ext`, skipping `node_modules`. */
function filesUnder(dir: string, ext: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(ext))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
    .filter((f) => !f.split('/').includes('node_modules'));
}

type Shown = { file: string; line: number; text: string };

/** Every string a TypeScript file can show: literals and template parts (not comments, not import paths). */
function tsStrings(file: string): Shown[] {
  const source = ts.createSourceFile(file, readFileSync(join(ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true);
  const out: Shown[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier) return;
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) {
      out.push({ file, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, text: node.text });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** Python's string constants (f-string parts too); docstrings left out, except a module's that it shows (`__doc__`). */
const PY_STRINGS = `
import ast, json, sys
out = []
for path in sys.argv[1:]:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    shows_doc = any(isinstance(n, ast.Name) and n.id == "__doc__" for n in ast.walk(tree))
    docstrings = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                if not (isinstance(n, ast.Module) and shows_doc):
                    docstrings.add(id(first.value))
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
            out.append({"file": path, "line": n.lineno, "text": n.value})
json.dump(out, sys.stdout)
`;

const cited = (strings: Shown[]): string[] => strings.flatMap((s) => citations(s.text).map((line) => `${s.file}:${s.line}: ${line.trim()}`));

describe('what users see', () => {
  test('no string in the TypeScript sources (--help, errors, printed output) cites a specification outside the repository', () => {
    const dirs = readdirSync(ROOT, { withFileTypes: true }).filter((e) => e.isDirectory() && !e.name.startsWith('.') && !['node_modules', 'test', 'python', 'dist'].includes(e.name));
    const files = dirs.flatMap((d) => filesUnder(d.name, '.ts'));
    expect(files).toContain('cli/main.ts');
    expect(cited(files.flatMap(tsStrings))).toEqual([]);
  });

  test('no string in the Python package or its CLI (--help, errors, printed output) cites a specification outside the repository', () => {
    const venv = join(ROOT, '.venv', 'bin', 'python');
    const files = [...filesUnder('python/src', '.py'), ...filesUnder('python/bench', '.py')];
    expect(files).toContain('python/src/rollout_stream/cli.py');
    const run = spawnSync(existsSync(venv) ? venv : 'python3', ['-c', PY_STRINGS, ...files], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    if (run.error) throw run.error;
    expect(run.status, run.stderr).toBe(0);
    expect(cited(JSON.parse(run.stdout) as Shown[])).toEqual([]);
  });

  test.each(filesUnder('docs/examples', ''))('%s cites no specification outside the repository', (file) => {
    expect(citations(readFileSync(join(ROOT, file), 'utf8'))).toEqual([]);
  });
});

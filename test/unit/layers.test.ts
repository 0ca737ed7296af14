/**
 * The layering rules of the tree (README "Architecture"), read from the
 * import lines of every source file: imports run one way.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

const ROOT = normalize(join(dirname(fileURLToPath(import.meta.url)), '../..'));
const SOURCE_DIRS = ['bench', 'cli', 'config', 'errors', 'json-form', 'loadgen', 'processors', 'schemas', 'streams', 'tools'];

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const rel = join(dir, name);
    if (statSync(join(ROOT, rel)).isDirectory()) out.push(...sourceFiles(rel));
    else if (/\.(ts|mts)$/.test(name)) out.push(rel);
  }
  return out;
}

/** Every module a file imports: repo-relative paths for relative specifiers, package names otherwise. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const specs = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|(?:^|\n)import\s+['"]([^'"]+)['"]/g)].map(
    (m) => m[1] ?? m[2] ?? m[3]!,
  );
  return specs.map((s) => (s.startsWith('.') ? relative(ROOT, join(ROOT, dirname(file), s)).replace(/\.js$/, '.ts') : s));
}

const FILES = SOURCE_DIRS.flatMap(sourceFiles);
const EDGES = FILES.map((file) => ({ file, imports: importsOf(file) }));
const importing = (pred: (target: string) => boolean, from: (file: string) => boolean): string[] =>
  EDGES.filter((e) => from(e.file) && e.imports.some(pred)).map((e) => e.file).sort();
const under = (dir: string) => (path: string) => path.startsWith(`${dir}/`);

describe('layers', () => {
  test('the scan sees the tree (a rule over no files proves nothing)', () => {
    expect(FILES.length).toBeGreaterThan(100);
    expect(EDGES.find((e) => e.file === 'streams/kafka/kafkajs/sink.ts')?.imports).toContain('kafkajs');
    expect(EDGES.filter((e) => under('streams/kafka/platformatic')(e.file)).flatMap((e) => e.imports)).toContain('@platformatic/kafka');
  });

  test('only streams/kafka/kafkajs/ imports kafkajs', () => {
    const users = importing((t) => t === 'kafkajs' || t.startsWith('kafkajs/'), (f) => !under('streams/kafka/kafkajs')(f));
    expect(users).toEqual([]);
  });

  test('only streams/kafka/platformatic/ imports @platformatic/kafka', () => {
    const users = importing((t) => t === '@platformatic/kafka' || t.startsWith('@platformatic/kafka/'), (f) => !under('streams/kafka/platformatic')(f));
    expect(users).toEqual([]);
  });

  test('processors/ is pure: no streams, cli, bench, schemas, Kafka client, registry or Avro', () => {
    const bad = importing(
      (t) => ['streams/', 'cli/', 'bench/', 'schemas/', 'tools/', 'json-form/'].some((d) => t.startsWith(d)) || /^(kafkajs|avsc|@kafkajs\/)/.test(t),
      under('processors'),
    );
    expect(bad).toEqual([]);
  });

  test('schemas/ knows no logic: it imports no processors, streams or cli', () => {
    expect(importing((t) => ['processors/', 'streams/', 'cli/', 'json-form/'].some((d) => t.startsWith(d)), under('schemas'))).toEqual([]);
  });

  test('errors/ is the kernel: it imports nothing of the project', () => {
    // Its own files (index.ts re-exports codes.ts) are the kernel too.
    const outside = (t: string) => SOURCE_DIRS.some((d) => d !== 'errors' && t.startsWith(`${d}/`));
    expect(EDGES.filter((e) => under('errors')(e.file)).flatMap((e) => e.imports.filter(outside))).toEqual([]);
  });

  test('config/ imports neither processors nor streams', () => {
    expect(importing((t) => t.startsWith('processors/') || t.startsWith('streams/'), under('config'))).toEqual([]);
  });

  test('bench/ and tools/ import no command of cli/', () => {
    expect(importing((t) => t.startsWith('cli/'), (f) => under('bench')(f) || under('tools')(f))).toEqual([]);
  });

  test('streams/ imports no cli, bench or loadgen', () => {
    expect(importing((t) => ['cli/', 'bench/', 'loadgen/'].some((d) => t.startsWith(d)), under('streams'))).toEqual([]);
  });

  test('the runtime knows no client library: only its composition root (pipeline.ts) picks an adapter', () => {
    const adapter = (t: string) => t.startsWith('streams/kafka/kafkajs/') || t.startsWith('streams/kafka/platformatic/');
    expect(importing(adapter, (f) => under('streams/runtime')(f) && f !== 'streams/runtime/pipeline.ts')).toEqual([]);
  });

  test('the in-memory cluster and the topology test driver (streams/testing/) serve tests only', () => {
    expect(importing((t) => t.startsWith('streams/testing/'), (f) => !under('streams/testing')(f))).toEqual([]);
  });

  test('stages and their shared contract import neither the runtime nor the Kafka adapter', () => {
    const from = (f: string) => under('streams/stages')(f) || under('streams/api')(f) || under('streams/codecs')(f);
    expect(importing((t) => t.startsWith('streams/runtime/') || t.startsWith('streams/kafka/') || t === 'kafkajs', from)).toEqual([]);
  });
});

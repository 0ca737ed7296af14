/**
 * docs/configuration.md, generated from config/schema.ts: every key with its
 * type, default and the doc comment above it in the schema. A unit test
 * (test/unit/config-reference.test.ts) fails when the checked-in file is not
 * what this generates, and when a key has no doc comment.
 *
 *   npx tsx tools/config-reference.ts            # print
 *   npx tsx tools/config-reference.ts --write    # rewrite docs/configuration.md
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import type { z } from 'zod';
import { configSchema } from '../config/schema.js';

const ROOT = join(import.meta.dirname, '..');
export const SCHEMA_FILE = join(ROOT, 'config', 'schema.ts');
export const REFERENCE_FILE = join(ROOT, 'docs', 'configuration.md');

export interface KeyDoc {
  path: string;
  type: string;
  default: unknown;
  description: string | null;
}

type Def = { type: string; [k: string]: unknown };
const def = (s: unknown): Def => (s as { _zod: { def: Def } })._zod.def;

/** The schema under wrappers (preprocess, default, nullable, optional), and whether null is allowed. */
function unwrap(s: z.ZodType): { inner: z.ZodType; nullable: boolean } {
  let cur = s;
  let nullable = false;
  for (;;) {
    const d = def(cur);
    if (d.type === 'pipe') cur = d.out as z.ZodType;
    else if (d.type === 'default' || d.type === 'optional' || d.type === 'prefault') cur = d.innerType as z.ZodType;
    else if (d.type === 'nullable') {
      nullable = true;
      cur = d.innerType as z.ZodType;
    } else return { inner: cur, nullable };
  }
}

function typeName(s: z.ZodType): string {
  const { inner, nullable } = unwrap(s);
  const d = def(inner);
  let t: string;
  switch (d.type) {
    case 'enum':
      t = Object.values(d.entries as Record<string, string>).map((v) => `\`${v}\``).join(' \\| ');
      break;
    case 'literal':
      t = (d.values as unknown[]).map((v) => `\`${JSON.stringify(v)}\``).join(' \\| ');
      break;
    case 'array':
      t = `list of ${typeName(d.element as z.ZodType)}`;
      break;
    case 'record':
      t = `map of ${typeName(d.valueType as z.ZodType)}`;
      break;
    case 'union':
      t = (d.options as z.ZodType[]).map(typeName).join(' \\| ');
      break;
    case 'object':
      t = 'mapping';
      break;
    default:
      t = d.type;
  }
  return nullable ? `${t} or null` : t;
}

/** Doc comments by key path, read from config/schema.ts with the TypeScript parser. */
export function docComments(source = readFileSync(SCHEMA_FILE, 'utf8')): Map<string, string> {
  const file = ts.createSourceFile(SCHEMA_FILE, source, ts.ScriptTarget.ES2022, true);
  const consts = new Map<string, ts.Expression>();
  file.forEachChild((n) => {
    if (!ts.isVariableStatement(n)) return;
    for (const d of n.declarationList.declarations) if (ts.isIdentifier(d.name) && d.initializer) consts.set(d.name.text, d.initializer);
  });
  /** The object literal of the first `z.strictObject({...})`/`z.object({...})` inside `e`, following const names. */
  const objectOf = (e: ts.Node, seen = new Set<string>()): ts.ObjectLiteralExpression | null => {
    let found: ts.ObjectLiteralExpression | null = null;
    const visit = (n: ts.Node): void => {
      if (found) return;
      if (ts.isCallExpression(n) && ts.isPropertyAccessExpression(n.expression) && ['strictObject', 'object'].includes(n.expression.name.text)) {
        const arg = n.arguments[0];
        if (arg && ts.isObjectLiteralExpression(arg)) {
          found = arg;
          return;
        }
      }
      if (ts.isIdentifier(n) && consts.has(n.text) && !seen.has(n.text) && n.text.endsWith('Schema')) {
        seen.add(n.text);
        found = objectOf(consts.get(n.text)!, seen);
        return;
      }
      n.forEachChild(visit);
    };
    visit(e);
    return found;
  };
  const out = new Map<string, string>();
  const walk = (obj: ts.ObjectLiteralExpression, prefix: string): void => {
    for (const p of obj.properties) {
      if (!ts.isPropertyAssignment(p) || !(ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) continue;
      const path = prefix ? `${prefix}.${p.name.text}` : p.name.text;
      const docs = ts.getJSDocCommentsAndTags(p).filter(ts.isJSDoc);
      const text = docs
        .map((d) => (typeof d.comment === 'string' ? d.comment : (d.comment ?? []).map((c) => c.text).join('')))
        .join(' ')
        .replace(/\s+/g, ' ')
        .trim();
      if (text) out.set(path, text);
      const nested = objectOf(p.initializer);
      if (nested) walk(nested, path);
    }
  };
  const root = consts.get('configSchema');
  const rootObj = root ? objectOf(root) : null;
  if (!rootObj) throw new Error('config/schema.ts: no configSchema = z.strictObject({...}) found');
  walk(rootObj, '');
  return out;
}

/** Every key: leaves, and mappings whose default is null (sasl, tls, ...) as one entry with their sub-keys. */
export function configKeys(): KeyDoc[] {
  const docs = docComments();
  const defaults = configSchema.parse({}) as Record<string, unknown>;
  const out: KeyDoc[] = [];
  const walk = (s: z.ZodType, path: string, dflt: unknown): void => {
    const { inner } = unwrap(s);
    const d = def(inner);
    if (d.type === 'object') {
      if (dflt === null || dflt === undefined) {
        // A block that is off (null) by default: the block itself, then its keys with their defaults when given.
        out.push({ path, type: typeName(s), default: dflt, description: docs.get(path) ?? null });
        const given = (inner as z.ZodType).safeParse({});
        dflt = given.success ? given.data : {};
      }
      for (const [k, v] of Object.entries(d.shape as Record<string, z.ZodType>)) walk(v, path ? `${path}.${k}` : k, (dflt as Record<string, unknown>)[k]);
      return;
    }
    out.push({ path, type: typeName(s), default: dflt, description: docs.get(path) ?? null });
  };
  for (const [k, v] of Object.entries(def(configSchema).shape as Record<string, z.ZodType>)) walk(v, k, defaults[k]);
  return out;
}

const fmtDefault = (v: unknown): string => (v === undefined ? '(required)' : `\`${JSON.stringify(v)}\``);

export function renderReference(keys = configKeys()): string {
  const lines = [
    '# Configuration reference',
    '',
    '<!-- Generated by `npx tsx tools/config-reference.ts --write` from config/schema.ts; do not edit by hand. -->',
    '',
    'A config file (`--config F` or `ROLLOUT_STREAM_CONFIG`, YAML or JSON) holds any of these keys; a key left out',
    'takes its default, and in the `accumulate`, `postprocess`, `pack` and `ingest` blocks `null` also means the',
    'default. Unknown keys and wrong types stop start-up with the key named. Environment variables override the file',
    '(`KAFKA_BROKERS`, `SCHEMA_REGISTRY_URL`, `TOPIC_PREFIX`, `KAFKA_CLIENT`, `KAFKA_SASL_*`, `KAFKA_TLS*`,',
    '`SCHEMA_REGISTRY_USERNAME`/`_PASSWORD`, `METRICS_HOST`, `METRICS_PORT`, `LOG_FORMAT`), and command-line flags',
    'override both.',
  ];
  let block = '';
  for (const k of keys) {
    const top = k.path.split('.')[0]!;
    if (top !== block) {
      block = top;
      lines.push('', `## \`${top}\``, '', '| key | type | default | meaning |', '|---|---|---|---|');
    }
    const desc = (k.description ?? '').replace(/\|/g, '\\|');
    lines.push(`| \`${k.path}\` | ${k.type} | ${fmtDefault(k.default).replace(/\|/g, '\\|')} | ${desc} |`);
  }
  return `${lines.join('\n')}\n`;
}

if (process.argv[1] !== undefined && import.meta.url === `file://${process.argv[1]}`) {
  const text = renderReference();
  if (process.argv.includes('--write')) {
    writeFileSync(REFERENCE_FILE, text);
    const missing = configKeys().filter((k) => !k.description);
    process.stderr.write(`wrote ${REFERENCE_FILE}${missing.length ? `; ${missing.length} keys without a doc comment: ${missing.map((k) => k.path).join(', ')}` : ''}\n`);
  } else process.stdout.write(text);
}

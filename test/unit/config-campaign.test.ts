/**
 * The config campaign: every key of the config schema, generated from the
 * schema itself (not a hand-kept list), given a value of the wrong type and,
 * where the schema bounds it, one out of range, stops start-up (loadConfig,
 * the first thing every command does) with a ConfigError naming that key.
 * A key added to config/schema.ts is covered without touching this file.
 */
import { describe, expect, test } from 'vitest';
import type { z } from 'zod';
import { loadConfig } from '../../config/load.js';
import { configSchema } from '../../config/schema.js';
import { ConfigError } from '../../errors/index.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type Schema = z.ZodType & { _zod: { def: any } };
const def = (s: Schema) => s._zod.def;

/** Peels defaults, nullables, optionals and preprocess pipes down to the schema that judges the value. */
function core(s: Schema): Schema {
  for (;;) {
    const d = def(s);
    if (d.type === 'default' || d.type === 'nullable' || d.type === 'optional' || d.type === 'prefault') s = d.innerType;
    else if (d.type === 'pipe') s = def(d.in).type === 'transform' ? d.out : d.in;
    else return s;
  }
}

interface Leaf {
  path: string[];
  schema: Schema;
}

/** Every key of the schema: objects are walked into, everything else is a leaf. */
function leaves(s: Schema, path: string[] = []): Leaf[] {
  const c = core(s);
  if (def(c).type !== 'object') return [{ path, schema: c }];
  return Object.entries(def(c).shape as Record<string, Schema>).flatMap(([k, v]) => {
    const inner = core(v);
    // An object key is a key too (wrong type: not a mapping), then its own keys.
    return def(inner).type === 'object' ? [{ path: [...path, k], schema: inner }, ...leaves(v, [...path, k])] : leaves(v, [...path, k]);
  });
}

/** Values of the wrong type, and out-of-range ones from the schema's own checks. */
function badValues(s: Schema): Array<{ what: string; value: unknown }> {
  const d = def(s);
  const checks: any[] = (d.checks ?? []).map((c: any) => c._zod.def);
  const out: Array<{ what: string; value: unknown }> = [];
  switch (d.type) {
    case 'number':
      out.push({ what: 'a string', value: '12' });
      for (const c of checks) {
        if (c.check === 'number_format' && c.format === 'safeint') out.push({ what: 'a fraction', value: 1.5 });
        if (c.check === 'greater_than') out.push({ what: `below ${c.inclusive ? 'the minimum' : 'or at the bound'} ${c.value}`, value: c.inclusive ? c.value - 1 : c.value });
        if (c.check === 'less_than') out.push({ what: `above the maximum ${c.value}`, value: c.inclusive ? c.value + 1 : c.value });
      }
      break;
    case 'boolean':
      out.push({ what: 'a string', value: 'true' }, { what: 'a number', value: 1 });
      break;
    case 'string':
      out.push({ what: 'a number', value: 42 });
      if (d.format === 'url') out.push({ what: 'not a URL', value: 'not a url' });
      for (const c of checks) if (c.check === 'min_length' && c.minimum > 0) out.push({ what: 'too short', value: '' });
      break;
    case 'enum':
    case 'literal':
      out.push({ what: 'not one of the choices', value: 'no-such-choice' }, { what: 'a number', value: 7 });
      break;
    case 'array':
      out.push({ what: 'not a list', value: 'not-a-list' });
      for (const c of checks) if (c.check === 'min_length' && c.minimum > 0) out.push({ what: `fewer than ${c.minimum} entries`, value: [] });
      {
        const entry = badValues(core(d.element))[0]!;
        // Enough entries for any minimum length, the last one wrong.
        out.push({ what: `a list with an entry ${entry.what}`, value: [validSample(d.element), validSample(d.element), entry.value] });
      }
      break;
    case 'record':
      out.push({ what: 'not a mapping', value: 'not-a-mapping' }, { what: `an entry ${badValues(core(d.valueType))[0]!.what}`, value: { some_key: badValues(core(d.valueType))[0]!.value } });
      break;
    default: // objects, records, unions of objects, discriminated unions
      out.push({ what: 'not a mapping', value: 'not-a-mapping' });
  }
  return out;
}

/** A value the schema accepts (for required siblings of the key under test). */
function validSample(s: Schema): unknown {
  const c = core(s);
  const d = def(c);
  switch (d.type) {
    case 'number': {
      const min = (d.checks ?? []).map((x: any) => x._zod.def).find((x: any) => x.check === 'greater_than');
      return min ? min.value + 1 : 1;
    }
    case 'boolean':
      return false;
    case 'string':
      return d.format === 'url' ? 'http://127.0.0.1:1' : 'x';
    case 'enum':
      return Object.values(d.entries)[0];
    case 'literal':
      return d.values[0];
    case 'array':
      return [];
    case 'object':
      return requiredSample(c);
    case 'union':
      return validSample(d.options[0]);
    default:
      return {};
  }
}

/** The object's required keys (those an empty mapping lacks), each with a valid value. */
function requiredSample(o: Schema): Record<string, unknown> {
  const r = o.safeParse({});
  const shape = def(o).shape as Record<string, Schema>;
  const required = r.success ? [] : [...new Set(r.error.issues.filter((i) => i.path.length === 1).map((i) => String(i.path[0])))];
  return Object.fromEntries(required.filter((k) => k in shape).map((k) => [k, validSample(shape[k]!)]));
}

/** The override that puts `value` at `path`, with the required siblings of every object on the way. */
function overrideFor(path: string[], value: unknown): Array<[string[], unknown]> {
  const out: Array<[string[], unknown]> = [];
  let node: Schema = configSchema as unknown as Schema;
  for (let i = 0; i < path.length - 1; i++) {
    node = core((def(core(node)).shape as Record<string, Schema>)[path[i]!]!);
    const siblings = requiredSample(node);
    if (Object.keys(siblings).length > 0) out.push([path.slice(0, i + 1), siblings]);
  }
  out.push([path, value]);
  return out;
}

const keys = leaves(configSchema as unknown as Schema);
const cases = keys.flatMap((k) => badValues(k.schema).map((b) => ({ key: k.path.join('.'), path: k.path, ...b })));

describe('config campaign (generated from config/schema.ts)', () => {
  test('the schema yields every section and enough keys to mean something', () => {
    const sections = new Set(keys.map((k) => k.path[0]));
    expect([...sections].sort()).toEqual(['accumulate', 'ingest', 'kafka', 'logging', 'pack', 'postprocess', 'runtime', 'topics']);
    expect(keys.length).toBeGreaterThan(50);
    expect(cases.length).toBeGreaterThan(keys.length);
  });

  test('a config with every required sibling filled in, and nothing wrong, loads', () => {
    for (const k of keys) {
      const overrides = overrideFor(k.path, validSample(k.schema)).slice(0, -1);
      expect(() => loadConfig({ env: {}, overrides }), k.path.join('.')).not.toThrow();
    }
  });

  test.each(cases)('$key given $what ($value) stops start-up naming $key', ({ key, path, value }) => {
    let error: unknown;
    try {
      loadConfig({ env: {}, overrides: overrideFor(path, value) });
    } catch (e) {
      error = e;
    }
    expect(error, `${key} = ${JSON.stringify(value)} was accepted`).toBeInstanceOf(ConfigError);
    const named = (error as ConfigError).path;
    // An element of a list is named by its index (runtime.stages.0): still that key.
    expect(named === key || named.startsWith(`${key}.`), `error names ${named}, not ${key}`).toBe(true);
  });
});

/**
 * Every write waits for all in-sync replicas (acks=all), so with
 * min.insync.replicas 2 no acknowledged record lives on one broker only
 * (SPEC §8.1). kafkajs refuses any other acks on an idempotent producer, so
 * the guard is: every producer the code creates is idempotent (transactional
 * ones are too), and no send asks for acks other than -1.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, test } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..', '..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === 'node_modules' ? [] : sources(p);
    return p.endsWith('.ts') ? [p] : [];
  });
}

const files = ['streams', 'cli', 'tools', 'loadgen', 'bench'].flatMap((d) => sources(join(ROOT, d)));

/** The argument text of each `.producer({...})` call in `text` (balanced braces). */
function producerCalls(text: string): string[] {
  const out: string[] = [];
  for (let i = text.indexOf('.producer('); i >= 0; i = text.indexOf('.producer(', i + 1)) {
    let depth = 0;
    let j = i + '.producer('.length;
    for (; j < text.length; j++) {
      const c = text[j];
      if (c === '(' || c === '{') depth++;
      else if (c === ')' || c === '}') {
        if (depth === 0) break;
        depth--;
      }
    }
    out.push(text.slice(i, j + 1));
  }
  return out;
}

describe('acks=all everywhere', () => {
  test('every Kafka producer in the code is idempotent, which makes kafkajs send with acks=all', () => {
    const calls = files.flatMap((f) => producerCalls(readFileSync(f, 'utf8')).map((c) => ({ file: relative(ROOT, f), call: c })));
    expect(calls.length).toBeGreaterThan(5);
    const lax = calls.filter(({ call }) => !/idempotent:\s*true/.test(call)).map(({ file, call }) => `${file}: ${call.replace(/\s+/g, ' ')}`);
    expect(lax, 'producers without idempotent: true').toEqual([]);
  });

  test('no send asks for fewer acknowledgements than all in-sync replicas', () => {
    const weak = files.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .map((line, i) => ({ at: `${relative(ROOT, f)}:${i + 1}`, line }))
        .filter(({ line }) => /\backs:\s*(?:[^\s-]|-(?!1\b))/.test(line) || /\backs=(?!all\b|-1\b)/.test(line)),
    );
    expect(weak.map((w) => `${w.at} ${w.line.trim()}`)).toEqual([]);
  });
});

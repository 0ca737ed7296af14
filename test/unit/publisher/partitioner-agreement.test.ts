/**
 * Every publisher must send a group's records to the same partition (SPEC
 * §2.2): our `partitionForKey` (the TypeScript publisher and `produce`),
 * kafkajs's own DefaultPartitioner (what `loadgen`'s RowProducer lets the
 * client pick) and the Python publisher's `rollout_stream.partitioner`
 * must agree on every key and partition count. The Python side runs once,
 * with every key on stdin; without the project's Python environment this
 * test fails (the test runner installs it before the unit tests).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Partitioners } from 'kafkajs';
import { describe, expect, test } from 'vitest';
import { Rng } from '../../../loadgen/random.js';
import { murmur2, partitionForKey } from '../../../streams/topics/partitioner.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const PYTHON = join(ROOT, '.venv', 'bin', 'python');
const MAX_PARTITIONS = 64;

/** Code points from every UTF-8 length class (1–4 bytes), no surrogates (they have no UTF-8 form). */
const ALPHABETS: Array<[number, number]> = [
  [0x20, 0x7e],
  [0x00, 0x1f],
  [0xa0, 0x7ff],
  [0x800, 0xd7ff],
  [0xe000, 0xfffd],
  [0x10000, 0x10ffff],
];

function randomText(rng: Rng, length: number, asciiOnly: boolean): string {
  let s = '';
  for (let i = 0; i < length; i++) {
    const [lo, hi] = asciiOnly ? ALPHABETS[0]! : rng.pick(ALPHABETS);
    s += String.fromCodePoint(rng.int(lo, hi + 1));
  }
  return s;
}

/** 10,000+ seeded keys: empty, short and long ASCII, mixed UTF-8, group-id-like, and every length 0–64 of one alphabet (each murmur2 tail case). */
function keys(): string[] {
  const rng = new Rng(20_260_202);
  const out = ['', ' ', 'a', 'é', '✓', '😀', '\u0000', 'rollout', 'lg1-b000001-g0000'];
  for (let n = 0; n <= 64; n++) out.push('k'.repeat(n), randomText(rng, n, false));
  for (let i = 0; i < 4000; i++) out.push(randomText(rng, rng.int(1, 48), true));
  for (let i = 0; i < 3000; i++) out.push(randomText(rng, rng.int(1, 40), false));
  for (let i = 0; i < 60; i++) out.push(randomText(rng, rng.int(256, 1500), rng.chance(0.5)));
  for (let i = 0; i < 3000; i++) {
    const run = `${rng.pick(['lg', 'demo', 'it.produce', 'run'])}${rng.int(0, 1000)}-${rng.u32().toString(36).slice(0, 4)}`;
    out.push(`${run}-b${String(rng.int(0, 1_000_000)).padStart(6, '0')}-g${String(rng.int(0, 10_000)).padStart(4, '0')}`);
  }
  return out;
}

interface PythonAnswers {
  hashes: number[];
  partitions: number[][];
}

const SCRIPT = `
import json, sys
from rollout_stream.partitioner import murmur2, partition_for_key
keys = json.load(sys.stdin)
n_max = int(sys.argv[1])
out = {
    "hashes": [murmur2(k.encode("utf-8")) & 0xFFFFFFFF for k in keys],
    "partitions": [[partition_for_key(k, n) for n in range(1, n_max + 1)] for k in keys],
}
json.dump(out, sys.stdout)
`;

function askPython(all: string[]): PythonAnswers {
  if (!existsSync(PYTHON)) {
    throw new Error(`the project's Python environment is missing (${PYTHON}); create it with ./rollout-stream python-env, then rerun`);
  }
  const run = spawnSync(PYTHON, ['-c', SCRIPT, String(MAX_PARTITIONS)], {
    input: JSON.stringify(all),
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
    env: { ...process.env, PYTHONPATH: [join(ROOT, 'python', 'src'), process.env.PYTHONPATH].filter(Boolean).join(':') },
  });
  if (run.error) throw run.error;
  if (run.status !== 0) throw new Error(`rollout_stream.partitioner failed (exit ${run.status}):\n${run.stderr}`);
  return JSON.parse(run.stdout) as PythonAnswers;
}

type KafkajsPartitioner = (a: { topic: string; partitionMetadata: Array<{ partitionId: number; leader: number }>; message: { key: string | Buffer } }) => number;

describe('partitioner agreement across publishers', () => {
  const all = keys();
  // Asked inside the tests (once), so a missing environment fails each of them, not only a hook.
  let answers: PythonAnswers | undefined;
  const python = (): PythonAnswers => (answers ??= askPython(all));

  test('the key set covers what group ids can be', () => {
    expect(all.length).toBeGreaterThanOrEqual(10_000);
    expect(all).toContain('');
    expect(all.some((k) => Buffer.byteLength(k) > 2048)).toBe(true);
    expect(all.some((k) => /[\u{10000}-\u{10ffff}]/u.test(k))).toBe(true);
    expect(all.some((k) => /[\u0800-\uffff]/.test(k))).toBe(true);
  });

  test('Python murmur2 of the UTF-8 bytes equals ours on every key', () => {
    const { hashes } = python();
    expect(hashes).toHaveLength(all.length);
    const mismatches = all.filter((k, i) => (murmur2(k) >>> 0) !== hashes[i]);
    expect(mismatches.slice(0, 5)).toEqual([]);
  }, 120_000);

  test('partitionForKey, kafkajs DefaultPartitioner and Python partition_for_key agree for 1 to 64 partitions', () => {
    const py = python().partitions;
    const kafkajs = (Partitioners.DefaultPartitioner as unknown as () => KafkajsPartitioner)();
    const metadata = Array.from({ length: MAX_PARTITIONS }, (_, n) =>
      Array.from({ length: n + 1 }, (_, partitionId) => ({ partitionId, leader: 0 })),
    );
    const disagreements: string[] = [];
    let checked = 0;
    all.forEach((key, i) => {
      const bytes = Buffer.from(key, 'utf8');
      for (let n = 1; n <= MAX_PARTITIONS; n++) {
        const ours = partitionForKey(key, n);
        const ourBytes = partitionForKey(bytes, n);
        const theirs = kafkajs({ topic: 't', partitionMetadata: metadata[n - 1]!, message: { key } });
        // A Buffer key (what a client hands over for bytes keys) at a few counts; the hash is the same for every n.
        const theirBytes = n % 16 === 1 || n === MAX_PARTITIONS ? kafkajs({ topic: 't', partitionMetadata: metadata[n - 1]!, message: { key: bytes } }) : theirs;
        const inPython = py[i]![n - 1];
        if (!(ours === ourBytes && ours === theirs && ours === theirBytes && ours === inPython)) {
          disagreements.push(`${JSON.stringify(key.slice(0, 40))} n=${n}: ours ${ours}/${ourBytes}, kafkajs ${theirs}/${theirBytes}, python ${inPython}`);
        }
        checked++;
      }
    });
    expect(checked).toBe(all.length * MAX_PARTITIONS);
    expect(disagreements.slice(0, 10)).toEqual([]);
    // Not all in one partition: the comparison would be vacuous.
    expect(new Set(all.map((k) => partitionForKey(k, 64))).size).toBe(64);
  }, 120_000);
});

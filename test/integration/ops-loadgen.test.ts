import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { launcher } from './launcher.js';
import { parseLoadgenArgs } from '../../cli/loadgen.js';
import { collectExpectations, FAULT_KINDS, generateEvents } from '../../loadgen/index.js';
import { TopicCodec } from '../../streams/codecs/codec.js';
import { subjectOf } from '../../streams/topics/names.js';
import { opsEnv, type OpsEnv } from './ops-fixture.js';
import { readTopic } from './topic-reader.js';

let env: OpsEnv;

beforeAll(async () => {
  env = await opsEnv('ops-loadgen');
});

afterAll(async () => {
  await env?.stop();
});


describe('the loadgen command', () => {
  test('loadgen with every fault kind through the real pipeline yields exactly the expected dead letters, and every other group is packed', async () => {
    // Seed 12 injects every fault kind into 2 batches of 6 groups.
    const args = [
      'loadgen',
      '--profile', 'small',
      '--batches', '2',
      '--groups', '6',
      '--generations', '4',
      '--seed', '12',
      '--faults', 'dup=0.05,conflict=0.05,out_of_range=0.05,nan=0.05,missing=0.04,garbage=0.04,mixed_agents=0.15,task_mismatch=0.15',
      '--run-id', `${env.prefix}lg`,
      '--prefix', env.prefix,
    ];
    const run = await launcher(args);
    expect(run.code, run.stderr).toBe(0);

    // The same flags give the same events: what the command sent, with each fault's expected outcome.
    const events = [...generateEvents(parseLoadgenArgs(args.slice(1)).options)];
    const expected = collectExpectations(events);
    const injected = new Set(events.flatMap((e) => (e.kind === 'batch_end' ? (e.expect ?? []) : e.expect ? [e.expect] : [])).map((x) => x.fault));
    expect([...injected].sort()).toEqual([...FAULT_KINDS].sort());

    const rows = events.filter((e) => e.kind === 'row').length;
    const garbage = events.filter((e) => e.kind === 'garbage').length;
    expect(run.stdout).toMatch(new RegExp(`rows\\s+${rows}\\n`));
    expect(run.stdout).toMatch(new RegExp(`garbage\\s+${garbage}\\n`));
    expect(run.stdout).toMatch(/batch ends\s+2\n/);
    expect(run.stdout).toMatch(/throughput\s+[\d.k]+ rows\/s/);
    expect(run.stderr).toMatch(/loadgen: \d+\/48 rows/);

    const { packed, dead } = await env.settle(expected.completeGroups.size, expected.deadLetters.length);
    expect(packed.map((r) => r.key).sort()).toEqual([...expected.completeGroups.keys()].sort());
    // Nothing else is affected: each packed group is whole, duplicated rows included once.
    const packedCodec = new TopicCodec('packed', subjectOf(env.names.packed), env.registry);
    for (const r of packed) {
      const g = await packedCodec.decode(r.value);
      expect(g.sample_ids, r.key).toEqual(Array.from({ length: expected.completeGroups.get(r.key)!.num_generations }, (_, i) => `${r.key}_g${i}`));
    }
    const got = dead.map((d) => `${d.record.reason}:${d.record.group_id}`).sort();
    expect(got).toEqual(expected.deadLetters.map((e) => `${e.reason}:${e.group_id}`).sort());
    for (const e of expected.deadLetters.filter((x) => x.missing_row_indices)) {
      const d = dead.find((x) => x.record.reason === 'incomplete_group' && x.record.group_id === e.group_id)!;
      expect(d.record.missing_row_indices).toEqual(e.missing_row_indices);
    }
  });

  test('two loadgen runs on the same prefix, each with its own default run id, have every group of both packed and no dead letter', async () => {
    // Paced, so that groups stay open across polls: a batch id the first run already ended would expire them at once.
    const args = ['loadgen', '--profile', 'small', '--batches', '2', '--groups', '3', '--generations', '4', '--seed', '5', '--rate', '60', '--prefix', env.prefix];
    const runIds: string[] = [];
    for (let i = 0; i < 2; i++) {
      const run = await launcher(args);
      expect(run.code, run.stderr).toBe(0);
      runIds.push(/loadgen summary \(run id (\S+) →/.exec(run.stdout)![1]!);
    }
    expect(new Set(runIds).size, 'each run has its own run id').toBe(2);
    // The rows the runs sent: the same seed and flags, under each run's id.
    const groups = runIds.flatMap((runId) => [...generateEvents({ ...parseLoadgenArgs([...args.slice(1), '--run-id', runId]).options })]).flatMap((e) => (e.kind === 'row' ? [e.row] : []));
    const wanted = new Set(groups.map((r) => r.group_id));
    expect(wanted.size).toBe(12);
    const ours = (key: string | null) => key !== null && runIds.some((id) => key.startsWith(`${id}-`));
    const packed = await readTopic(env.kafka, env.names.packed, (rs) => new Set(rs.filter((r) => ours(r.key)).map((r) => r.key)).size >= wanted.size, {
      timeoutMs: 90_000,
      settleMs: 300,
    }).catch((e: Error) => e);
    // The grace (300 ms) is over by now: a group expired by the other run's BatchEnd would have dead-lettered.
    const dead = await readTopic(env.kafka, env.names.deadLetter, () => true, { settleMs: 2_000 });
    const dlCodec = new TopicCodec('deadLetter', subjectOf(env.names.deadLetter), env.registry);
    const deadOurs = (await Promise.all(dead.map((r) => dlCodec.decode(r.value)))).filter((d) => ours(d.group_id));
    expect(deadOurs.map((d) => `${d.reason}:${d.group_id}`)).toEqual([]);
    expect(packed instanceof Error ? packed.message : packed.filter((r) => ours(r.key)).map((r) => r.key).sort()).toEqual([...wanted].sort());
    // Each run's batches are its own (batch state and batch metrics are keyed by batch id).
    const batches = new Set(groups.map((r) => r.batch_id));
    expect(batches.size, `batch ids of the two runs: ${[...batches].join(', ')}`).toBe(4);
  });

  test('loadgen refuses a malformed fault spec before producing anything', async () => {
    const run = await launcher(['loadgen', '--faults', 'dup=2', '--prefix', env.prefix]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('faults.dup');
  });
});

/**
 * Fused and separate runners exclude each other through the broker's group
 * protocol check (streams/runtime/mode-guard.ts), not a look at the groups'
 * members before joining, which races with joining: two processes started at
 * the same moment both saw empty groups and both ran. Here the coordinator
 * decides: exactly one of them gets in, the other exits naming the conflict.
 */
import { afterAll, afterEach, describe, expect, test } from 'vitest';
import { testEnv, type TestEnv } from './helpers.js';
import { kill, sleep, startStage, waitForLog, writeTestConfig, type StageProcess } from './stage-processes.js';

const ALL = 'accumulate,postprocess,pack';
let procs: StageProcess[] = [];
const envs: TestEnv[] = [];

afterEach(async () => {
  await Promise.all(procs.map((p) => kill(p)));
  procs = [];
});
afterAll(async () => {
  await Promise.all(envs.map((e) => e.close()));
});

const REFUSAL = /fused mode refused: separate stage instances are running|a fused runner is processing prefix/;

describe('fused/separate exclusion', () => {
  test('a fused and a separate process started at the same moment: exactly one runs, the other exits naming the conflict', async () => {
    const env = await testEnv('mode-race');
    envs.push(env);
    const configPath = writeTestConfig(env.prefix);
    const winners: string[] = [];
    for (const [round, separate] of ['postprocess', 'pack', 'postprocess,pack'].entries()) {
      const fused = startStage(`fused-${round}`, ALL, configPath, ['--fused']);
      const sep = startStage(`separate-${round}`, separate, configPath, ['--separate']);
      procs = [fused, sep];
      // Both past start-up or one refused: the refused one exits 1 within start-up.
      const first = await Promise.race([fused.exited.then(() => fused), sep.exited.then(() => sep), sleep(90_000).then(() => null)]);
      const logs = `--- fused ---\n${fused.log.join('\n')}\n--- separate ---\n${sep.log.join('\n')}`;
      expect(first, `neither process was refused within 90 s (both run: the defect)\n${logs}`).not.toBeNull();
      const loser = first!;
      const winner = loser === fused ? sep : fused;
      expect(await loser.exited, logs).toBe(1);
      expect(loser.log.join('\n'), logs).toMatch(REFUSAL);
      expect(loser.log.join('\n'), logs).toMatch(/mode_conflict|INCONSISTENT_GROUP_PROTOCOL|announce/i);
      // The winner started and keeps running.
      expect(await waitForLog(winner, /started|running|joined/i, 60_000), logs).toBeDefined();
      await sleep(3_000);
      expect(winner.child.exitCode, logs).toBeNull();
      winners.push(winner === fused ? 'fused' : 'separate');
      // SIGTERM leaves the groups at once, so the next round starts from empty groups.
      await kill(winner, 'SIGTERM');
      procs = [];
    }
    console.log(`winners: ${winners.join(', ')}`);
  });
});

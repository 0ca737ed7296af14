/**
 * `demo --gym`: NeMo-Gym's own servers drive the pipeline. On the local
 * broker, under a fresh prefix, the stages run in this process while
 * tools/gym/demo.py (in NeMo-Gym's venv, installed by scripts/gym-env.sh on
 * first use) starts the toy policy and NeMo-Gym's servers, collects a few
 * batches with `rollout_stream.gym.collect`, and checks every packed
 * generated token against what the policy generated. Its last line is the
 * demo's result: `gym demo: <G> groups packed, <T> generated tokens checked
 * against the policy, <M> mismatches`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { RolloutStreamError } from '../errors/index.js';
import { createOpsClient } from '../streams/kafka/kafkajs/ops-client.js';
import { createRegistry } from '../streams/codecs/schema-registry.js';
import { startPipeline, type RunningPipeline } from '../streams/runtime/pipeline.js';
import { createTopics } from '../streams/topics/create.js';
import { ensureLocalServices, ROOT } from '../tools/local-services.js';
import type { Io } from './io.js';
import { loadOpsConfig } from './ops-config.js';
import { deleteTopics } from './demo-topics.js';

export interface GymDemoArgs {
  batches: number;
  generations: number;
  keep: boolean;
  timeoutMs: number;
  config?: string | undefined;
}

const log = (io: Io, msg: string) => io.err(`[demo --gym] ${msg}\n`);

/** NeMo-Gym's venv (scripts/gym-env.sh installs it the first time, ~3 min) and its python. */
function gymPython(io: Io): string {
  log(io, 'preparing NeMo-Gym\'s environment (scripts/gym-env.sh; the first time installs nemo-gym, ~3 min)');
  const r = spawnSync(join(ROOT, 'scripts', 'gym-env.sh'), ['--print'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 2] });
  if (r.status !== 0) throw new RolloutStreamError('python_env', `scripts/gym-env.sh failed (exit ${r.status}); see the messages above`);
  return r.stdout.trim().split('\n').pop()!;
}

/** Runs the NeMo-Gym demo; returns the exit code. */
export async function runGymDemo(a: GymDemoArgs, io: Io): Promise<number> {
  const t0 = performance.now();
  const python = gymPython(io);
  const startedServices = ensureLocalServices();
  const prefix = `demo.gym.${randomUUID().slice(0, 8)}.`;
  const { config, configDir } = loadOpsConfig({ config: a.config, prefix }, [
    [['accumulate', 'batch_end_grace_ms'], 500],
    [['runtime', 'metrics_port'], 0],
  ]);
  const admin = await createOpsClient(config.kafka, 'demo').admin();
  try {
    await createTopics(admin, createRegistry(config.kafka), config);
  } finally {
    await admin.close();
  }
  log(io, `topics created under prefix ${prefix}`);
  let pipeline: RunningPipeline | null = null;
  try {
    const stageLog = { info: () => undefined, warn: (m: string) => log(io, `warn ${m}`), error: (m: string) => log(io, `error ${m}`) };
    pipeline = await startPipeline({ config, configDir, stages: ['accumulate', 'postprocess', 'pack'], log: stageLog });
    log(io, 'stages running in-process: accumulate, postprocess, pack');
    const env = {
      ...process.env,
      KAFKA_BROKERS: config.kafka.brokers.join(','),
      SCHEMA_REGISTRY_URL: config.kafka.schema_registry_url,
      TOPIC_PREFIX: prefix,
      PYTHONUNBUFFERED: '1',
    };
    const args = [join(ROOT, 'tools', 'gym', 'demo.py'), '--batches', String(a.batches), '--generations', String(a.generations), '--timeout', String(a.timeoutMs / 1000)];
    const child = spawn(python, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => io.err(d.toString()));
    const code: number = await new Promise((resolve) => child.on('close', (c) => resolve(c ?? 1)));
    const result = out.trim().split('\n').filter((l) => l.startsWith('gym demo:')).pop();
    if (!result) throw new RolloutStreamError('python_env', `tools/gym/demo.py exited ${code} without its result line`);
    await io.out(`${result}\n`);
    await io.out(a.keep ? `kept topics under prefix ${prefix}\n` : `demo done in ${((performance.now() - t0) / 1000).toFixed(1)} s (topics removed; --keep keeps them)\n`);
    return code;
  } finally {
    await pipeline?.stop().catch(() => undefined);
    if (!a.keep) await deleteTopics(config).catch((e: Error) => log(io, `could not delete the demo topics: ${e.message}`));
    if (!a.keep && startedServices) spawnSync(join(ROOT, 'scripts', 'local-kafka.sh'), ['down'], { stdio: ['ignore', 2, 2] });
  }
}

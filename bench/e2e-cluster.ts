/**
 * `bench e2e --brokers 3`: what replication costs and how long a broker's
 * loss stalls the pipeline. Runs `bench e2e` (same options) as a child three
 * times: on the single local broker (replication 1), on the local
 * three-broker cluster (replication 3, min.insync.replicas 2: what
 * `topics create` picks there), and once more on the cluster, paced at half
 * the rate just measured, SIGKILLing the broker that leads most row-completed
 * partitions 15 s in and starting it 30 s later. Prints each run's figures,
 * then "ratio rf3/rf1: <n>" (rows/s) and "failover gap: <ms>".
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ensureLocalServices, ROOT } from '../tools/local-services.js';

const script = join(ROOT, 'scripts', 'local-kafka.sh');

function clusterUp(): { brokers: string; registry: string } {
  const env = { ...process.env, RS_LOCAL_BROKER: '1' };
  const up = spawnSync(script, ['up', '--brokers', '3'], { stdio: ['ignore', 'inherit', 'inherit'], env });
  if (up.status !== 0) throw new Error('could not start the local three-broker cluster');
  const out = (cmd: string) => spawnSync(script, [cmd, '--brokers', '3'], { encoding: 'utf8', env }).stdout.trim();
  return { brokers: out('bootstrap'), registry: out('registry-url') };
}

/** Runs `bench e2e args` with `env`; echoes its report and returns it. */
function runE2e(label: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  process.stderr.write(`[bench] ${label}: bench e2e ${args.join(' ')}\n`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'cli', 'main.ts'), 'bench', 'e2e', ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => {
      console.log(`--- ${label} ---\n${out.trim()}`);
      if (code === 0) resolve(out);
      else reject(new Error(`bench e2e (${label}) exited with ${code}`));
    });
  });
}

const figure = (report: string, name: RegExp): number => {
  const m = name.exec(report);
  if (!m) throw new Error(`no ${name} in the report`);
  return Number(m[1]);
};

export async function compareOnCluster(args: string[]): Promise<number> {
  if (args.some((a) => a === '--duration' || a === '--kill-leader-after')) {
    throw new Error('--brokers 3 chooses the pacing of its failover run itself; leave out --duration and --kill-leader-after');
  }
  ensureLocalServices({ ...process.env, KAFKA_BROKERS: '' });
  const cluster = clusterUp();
  const single = { KAFKA_BROKERS: `127.0.0.1:${process.env.RS_KAFKA_PORT ?? 9092}`, SCHEMA_REGISTRY_URL: `http://127.0.0.1:${process.env.RS_REGISTRY_PORT ?? 8081}/apis/ccompat/v7`, RS_LOCAL_BROKER: '1' };
  const onCluster = { KAFKA_BROKERS: cluster.brokers, SCHEMA_REGISTRY_URL: cluster.registry, RS_LOCAL_BROKER: '1' };
  const rf1 = figure(await runE2e('one broker, replication 1', args, single), /^rows\/s\s+([\d.]+)/m);
  const rf3 = figure(await runE2e('three brokers, replication 3', args, onCluster), /^rows\/s\s+([\d.]+)/m);
  const rate = Math.max(1, Math.round(rf3 / 2));
  const paced = [...args.filter((a, i) => a !== '--rate' && args[i - 1] !== '--rate' && a !== '--batches' && args[i - 1] !== '--batches'), '--rate', String(rate), '--duration', '75', '--kill-leader-after', '15', '--down', '30'];
  const gap = figure(await runE2e(`three brokers, leader SIGKILLed (paced at ${rate} rows/s)`, paced, onCluster), /^failover gap: (\d+)/m);
  console.log(`rows/s             replication 1 (one broker) ${rf1}, replication 3 (three brokers) ${rf3}`);
  console.log(`ratio rf3/rf1: ${(rf3 / rf1).toFixed(3)}`);
  console.log(`failover gap: ${gap}`);
  return 0;
}

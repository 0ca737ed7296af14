/**
 * Starting the local broker and registry from TypeScript commands (demo,
 * bench): unless KAFKA_BROKERS is set, run `scripts/local-kafka.sh up`.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { RolloutStreamError } from '../errors/index.js';

export const ROOT = join(import.meta.dirname, '..');

/** Ensures a broker and registry answer; returns true when this call started them. */
export function ensureLocalServices(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.KAFKA_BROKERS) {
    process.stderr.write(`[setup] using KAFKA_BROKERS=${env.KAFKA_BROKERS}; nothing local is started\n`);
    return false;
  }
  const script = join(ROOT, 'scripts', 'local-kafka.sh');
  const wasUp = spawnSync(script, ['status'], { encoding: 'utf8' }).stdout.includes('up\nregistry');
  const r = spawnSync(script, ['up'], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new RolloutStreamError('local_services', 'could not start the local broker and registry (see messages above)');
  return !wasUp;
}

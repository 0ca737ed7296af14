/**
 * The cluster tier runs against a local three-node cluster and its own
 * registry (`./rollout-stream kafka up --brokers 3`). This setup starts it
 * when it is not up and, in that case, stops it again at the end (unless
 * RS_KEEP_CLUSTER=1), so `npx vitest run --project cluster` works alone.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
const script = join(ROOT, 'scripts', 'local-kafka.sh');

function kafka(...args: string[]): string {
  // KAFKA_BROKERS of the caller's shell must not make the script step aside.
  return execFileSync(script, [...args, '--brokers', '3'], {
    cwd: ROOT,
    env: { ...process.env, RS_LOCAL_BROKER: '1' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 240_000,
  });
}

export default function setup(): () => void {
  const before = kafka('status');
  const wasUp = !/ down/.test(before);
  kafka('up');
  return () => {
    if (!wasUp && process.env.RS_KEEP_CLUSTER !== '1') kafka('down');
  };
}

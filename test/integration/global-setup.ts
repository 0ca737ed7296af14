/**
 * Integration tests run against the real broker and registry that
 * `./rollout-stream test` started (or KAFKA_BROKERS / SCHEMA_REGISTRY_URL).
 * Fail fast, with the fix in the message, when they do not answer.
 */
import { createConnection } from 'node:net';
import { loadConfig } from '../../config/load.js';

function probe(hostPort: string): Promise<boolean> {
  const i = hostPort.lastIndexOf(':');
  return new Promise((resolve) => {
    const socket = createConnection({ host: hostPort.slice(0, i), port: Number(hostPort.slice(i + 1)) });
    socket.setTimeout(3000);
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => (socket.destroy(), resolve(false)));
  });
}

export default async function setup(): Promise<void> {
  const { config } = loadConfig({ file: undefined });
  const broker = config.kafka.brokers[0]!;
  if (!(await probe(broker))) {
    throw new Error(`Kafka does not answer at ${broker}. Start it with ./rollout-stream kafka up (or run ./rollout-stream test, which does).`);
  }
  const url = config.kafka.schema_registry_url;
  const ok = await fetch(`${url}/subjects`).then((r) => r.ok, () => false);
  if (!ok) throw new Error(`The schema registry does not answer at ${url}. Start it with ./rollout-stream kafka up.`);
}

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parse } from 'yaml';

const ROOT = join(import.meta.dirname, '..', '..');
const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, { ports?: string[]; environment?: Record<string, string>; image?: string }>;
};
const localKafka = readFileSync(join(ROOT, 'scripts', 'local-kafka.sh'), 'utf8');

describe('docker-compose.yml', () => {
  test('declares the broker, the registry and the pipeline', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['kafka', 'pipeline', 'registry']);
  });

  test('publishes the same loopback ports as the local scripts', () => {
    expect(compose.services.kafka!.ports).toEqual(['127.0.0.1:9092:9092']);
    expect(compose.services.registry!.ports![0]).toMatch(/^127\.0\.0\.1:8081:/);
    expect(localKafka).toMatch(/RS_KAFKA_PORT:-9092/);
    expect(localKafka).toMatch(/RS_REGISTRY_PORT:-8081/);
  });

  test('configures the pipeline through the variables the launcher reads', () => {
    const env = compose.services.pipeline!.environment!;
    expect(Object.keys(env)).toEqual(expect.arrayContaining(['KAFKA_BROKERS', 'SCHEMA_REGISTRY_URL', 'TOPIC_PREFIX', 'ROLLOUT_STREAM_CONFIG']));
    expect(env.SCHEMA_REGISTRY_URL).toMatch(/\/apis\/ccompat\/v7$/);
  });

  test('uses the broker size limit of the local scripts', () => {
    const max = /RS_MAX_MESSAGE_BYTES:-(\d+)/.exec(localKafka)![1];
    expect(compose.services.kafka!.environment!.KAFKA_MESSAGE_MAX_BYTES).toBe(max);
  });
});

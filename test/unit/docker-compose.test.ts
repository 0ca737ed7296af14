import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parse } from 'yaml';

const ROOT = join(import.meta.dirname, '..', '..');
type Service = {
  image: string;
  command?: string[];
  ports?: string[];
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  restart?: string;
};
const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, Service> };
const s = compose.services;
const localKafka = readFileSync(join(ROOT, 'scripts', 'local-kafka.sh'), 'utf8');
const imageSh = readFileSync(join(ROOT, 'scripts', 'image.sh'), 'utf8');
const pom = readFileSync(join(ROOT, 'infra', 'kafka', 'pom.xml'), 'utf8');
const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const pomVersion = (tag: string) => new RegExp(`<${tag}>(.*)</${tag}>`).exec(pom)![1];

describe('docker-compose.yml', () => {
  test('declares the broker, the registry, topics create, the stages, loadgen and a trainer', () => {
    expect(Object.keys(s).sort()).toEqual(['kafka', 'loadgen', 'registry', 'stages', 'topics', 'trainer']);
    expect(s.topics!.command).toEqual(['topics', 'create']);
    expect(s.stages!.command).toEqual(['run']);
    expect(s.loadgen!.command!.slice(0, 3)).toEqual(['loadgen', '--batches', '1']);
  });

  test('every image is a variable: public broker and registry, the local builds of scripts/image.sh', () => {
    expect(s.kafka!.image).toBe(`\${KAFKA_IMAGE:-docker.io/apache/kafka:${pomVersion('kafka.version')}}`);
    expect(s.registry!.image).toBe(`\${REGISTRY_IMAGE:-docker.io/apicurio/apicurio-registry:${pomVersion('apicurio.version')}}`);
    for (const name of ['topics', 'stages', 'loadgen']) expect(s[name]!.image).toBe(`\${ROLLOUT_STREAM_IMAGE:-localhost/rollout-stream:${version}}`);
    expect(s.trainer!.image).toBe(`\${TRAINER_IMAGE:-localhost/rollout-stream-trainer:${version}}`);
    // The names `image build-compose` gives its builds.
    expect(imageSh).toContain('KAFKA_IMAGE_LOCAL="localhost/rollout-stream-kafka:$KAFKA_VERSION"');
    expect(imageSh).toContain('REGISTRY_IMAGE_LOCAL="localhost/rollout-stream-registry:$APICURIO_VERSION"');
    expect(imageSh).toContain('TRAINER_IMAGE_LOCAL="localhost/rollout-stream-trainer:$VERSION"');
  });

  test('publishes every port on 127.0.0.1 only, by default on the ports of the local scripts', () => {
    const published = Object.values(s).flatMap((svc) => svc.ports ?? []);
    expect(published.length).toBe(3);
    for (const p of published) expect(p).toMatch(/^127\.0\.0\.1:/);
    expect(s.kafka!.ports).toEqual(['127.0.0.1:${KAFKA_PORT:-9092}:${KAFKA_PORT:-9092}']);
    expect(s.registry!.ports).toEqual(['127.0.0.1:${REGISTRY_PORT:-8081}:8080']);
    expect(s.stages!.ports).toEqual(['127.0.0.1:${METRICS_PORT:-9464}:9464']);
    expect(localKafka).toMatch(/RS_KAFKA_PORT:-9092/);
    expect(localKafka).toMatch(/RS_REGISTRY_PORT:-8081/);
  });

  test('healthchecks on the broker, the registry and the stages (/readyz), and depends_on conditions', () => {
    expect(s.kafka!.healthcheck!.test.join(' ')).toContain('kafka-broker-api-versions.sh');
    expect(s.registry!.healthcheck!.test.join(' ')).toContain('/apis/ccompat/v7/subjects');
    expect(s.stages!.healthcheck!.test).toEqual(['CMD', 'node', '/app/dist/cli/healthcheck.js', '/readyz']);
    expect(s.registry!.depends_on).toEqual({ kafka: { condition: 'service_healthy' } });
    expect(s.topics!.depends_on).toEqual({ kafka: { condition: 'service_healthy' }, registry: { condition: 'service_healthy' } });
    expect(s.stages!.depends_on).toEqual({ topics: { condition: 'service_completed_successfully' } });
    expect(s.loadgen!.depends_on).toEqual({ stages: { condition: 'service_healthy' } });
    expect(s.trainer!.depends_on).toEqual({ topics: { condition: 'service_completed_successfully' } });
    for (const name of ['registry', 'topics', 'loadgen', 'trainer']) expect(s[name]!.restart).toBe('on-failure');
  });

  test('configures the clients through the variables the launcher and the Python package read', () => {
    for (const name of ['topics', 'stages', 'loadgen', 'trainer']) {
      const env = s[name]!.environment!;
      expect(Object.keys(env)).toEqual(expect.arrayContaining(['KAFKA_BROKERS', 'SCHEMA_REGISTRY_URL', 'TOPIC_PREFIX']));
      expect(env.KAFKA_BROKERS).toBe('kafka:29092');
      expect(env.SCHEMA_REGISTRY_URL).toMatch(/\/apis\/ccompat\/v7$/);
    }
    expect(Object.keys(s.stages!.environment!)).toContain('ROLLOUT_STREAM_CONFIG');
    expect(s.registry!.environment!.APICURIO_KAFKASQL_BOOTSTRAP_SERVERS).toBe('kafka:29092');
  });

  test('uses the broker size limit of the local scripts', () => {
    const max = /RS_MAX_MESSAGE_BYTES:-(\d+)/.exec(localKafka)![1];
    expect(s.kafka!.environment!.KAFKA_MESSAGE_MAX_BYTES).toBe(max);
  });
});

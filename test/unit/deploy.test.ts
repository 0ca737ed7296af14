/**
 * The deployment files agree with the code: the Strimzi resources are what
 * the topic specs generate, the manifests run this version's image with the
 * probes `run` serves, and Kubernetes' grace period outlasts the stop
 * deadline. (podman kube play runs them for real: test/image/kube.test.ts.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../config/load.js';
import { STRIMZI_DIR, topicsYaml, userYaml } from '../../tools/strimzi.js';
import { topicSpecs } from '../../streams/topics/names.js';

const ROOT = join(import.meta.dirname, '..', '..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const docs = (f: string): any[] => parseAllDocuments(readFileSync(join(ROOT, 'deploy', 'kubernetes', f), 'utf8')).map((d) => d.toJSON());

describe('deploy/profiles', () => {
  test.each(['confluent-cloud', 'msk', 'strimzi'])('%s.yaml is a valid config with TLS and three replicas', (name) => {
    const { config } = loadConfig({ file: join(ROOT, 'deploy', 'profiles', `${name}.yaml`), env: {} });
    expect(config.kafka.tls?.enabled).toBe(true);
    expect([config.topics.replication_factor, config.topics.min_insync_replicas]).toEqual([3, 2]);
  });
});

describe('deploy/kubernetes', () => {
  test('strimzi/*.yaml is what tools/strimzi.ts generates (npx tsx tools/strimzi.ts --write), one KafkaTopic per topic', () => {
    expect(readFileSync(join(STRIMZI_DIR, 'topics.yaml'), 'utf8')).toBe(topicsYaml());
    expect(readFileSync(join(STRIMZI_DIR, 'user.yaml'), 'utf8')).toBe(userYaml());
    const names = parseAllDocuments(topicsYaml()).map((d) => d.toJSON()).filter(Boolean).map((d) => d.spec.topicName);
    expect(names.sort()).toEqual(topicSpecs(loadConfig({ env: {} }).config).map((s) => s.topic).sort());
  });

  test('the stage Deployment runs this version, probes /healthz and /readyz, and waits longer than the stop deadline', () => {
    const [deployment] = docs('stages.yaml');
    const spec = deployment.spec.template.spec;
    const c = spec.containers[0];
    expect(c.image).toBe(`localhost/rollout-stream:${pkg.version}`);
    expect(c.args).toEqual(['run']);
    expect([c.livenessProbe.httpGet.path, c.readinessProbe.httpGet.path]).toEqual(['/healthz', '/readyz']);
    const [, configMap] = docs('config.yaml');
    const shutdownMs = Number(/shutdown_timeout_ms: (\d+)/.exec(configMap.data['config.yaml'])![1]);
    expect(spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(shutdownMs);
    expect(docs('topics-job.yaml')[0].spec.template.spec.containers[0].image).toBe(c.image);
  });
});

import { describe, expect, test } from 'vitest';
import { loadConfig } from '../../../config/load.js';
import { configSchema, type TopicsConfig } from '../../../config/schema.js';
import { ConfigError } from '../../../errors/index.js';
import type { OpsAdmin } from '../../../streams/kafka/types.js';
import { resolveReplication } from '../../../streams/topics/create.js';
import { configErrorOf } from '../../fixtures/config-error.js';

const topicsOf = (topics: Record<string, unknown>): TopicsConfig => configSchema.parse({ topics }).topics;

/** The one admin call resolveReplication makes, answered for `n` live brokers. */
function clusterOf(n: number): Pick<OpsAdmin, 'brokers'> {
  const brokers = Array.from({ length: n }, (_, i) => ({ host: '127.0.0.1', port: 19092 + i }));
  return { brokers: async () => brokers };
}

async function rejection(p: Promise<unknown>): Promise<ConfigError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  if (!(e instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${String(e)}`);
  return e;
}

describe('topics.replication_factor and topics.min_insync_replicas', () => {
  test('both default to null: decided from the cluster when topics are created', () => {
    expect(topicsOf({})).toMatchObject({ replication_factor: null, min_insync_replicas: null });
  });

  test('explicit values are kept', () => {
    expect(topicsOf({ replication_factor: 3, min_insync_replicas: 2 })).toMatchObject({ replication_factor: 3, min_insync_replicas: 2 });
  });

  test.each([
    [{ replication_factor: 0 }, 'topics.replication_factor'],
    [{ replication_factor: 2.5 }, 'topics.replication_factor'],
    [{ replication_factor: '3' }, 'topics.replication_factor'],
    [{ min_insync_replicas: 0 }, 'topics.min_insync_replicas'],
    [{ min_insync_replicas: true }, 'topics.min_insync_replicas'],
  ])('%o stops start-up naming %s', (topics, path) => {
    const e = configErrorOf(() => loadConfig({ env: {}, overrides: [[['topics'], topics]] }));
    expect(e.path).toBe(path);
  });

  test('more in-sync replicas than replicas is rejected in the config, naming min_insync_replicas', () => {
    const e = configErrorOf(() => loadConfig({ env: {}, overrides: [[['topics'], { replication_factor: 2, min_insync_replicas: 3 }]] }));
    expect(e.path).toBe('topics.min_insync_replicas');
    expect(e.message).toMatch(/more than topics\.replication_factor \(2\)/);
  });

  test('unset, one broker gives 1 and 1, three brokers 3 and 2, five brokers still 3 and 2', async () => {
    expect(await resolveReplication(clusterOf(1), topicsOf({}))).toEqual({ replicationFactor: 1, minInsyncReplicas: 1, brokers: 1, source: 'cluster' });
    expect(await resolveReplication(clusterOf(3), topicsOf({}))).toEqual({ replicationFactor: 3, minInsyncReplicas: 2, brokers: 3, source: 'cluster' });
    expect(await resolveReplication(clusterOf(5), topicsOf({}))).toMatchObject({ replicationFactor: 3, minInsyncReplicas: 2 });
    expect(await resolveReplication(clusterOf(2), topicsOf({}))).toMatchObject({ replicationFactor: 2, minInsyncReplicas: 1 });
  });

  test('an explicit replication factor sets the default min.insync.replicas from it', async () => {
    expect(await resolveReplication(clusterOf(3), topicsOf({ replication_factor: 2 }))).toMatchObject({ replicationFactor: 2, minInsyncReplicas: 1 });
    expect(await resolveReplication(clusterOf(3), topicsOf({ replication_factor: 3, min_insync_replicas: 3 }))).toMatchObject({
      replicationFactor: 3,
      minInsyncReplicas: 3,
      source: 'config',
    });
  });

  test('more replicas than live brokers stops with an error naming topics.replication_factor', async () => {
    const e = await rejection(resolveReplication(clusterOf(1), topicsOf({ replication_factor: 3 })));
    expect(e.path).toBe('topics.replication_factor');
    expect(e.message).toMatch(/3 replicas requested but the cluster has 1 live broker\(s\) \(127\.0\.0\.1:19092\)/);
  });

  test('min.insync.replicas above the replication the cluster allows names topics.min_insync_replicas', async () => {
    const e = await rejection(resolveReplication(clusterOf(1), topicsOf({ min_insync_replicas: 2 })));
    expect(e.path).toBe('topics.min_insync_replicas');
    expect(e.message).toMatch(/2 is more than the replication factor \(1, decided from 1 broker\(s\)\)/);
  });
});

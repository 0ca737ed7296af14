import { defineConfig } from 'vitest/config';

// Tiers (STYLE.md): pure unit tests need nothing; integration tests talk
// to the real broker and registry, started once per run by the launcher;
// cluster tests to a local three-broker cluster (./rollout-stream test --cluster).
const clusterPort = Number(process.env.RS_CLUSTER_PORT ?? 19092);
const clusterEnv = {
  KAFKA_BROKERS: [0, 1, 2].map((i) => `127.0.0.1:${clusterPort + i}`).join(','),
  SCHEMA_REGISTRY_URL: `http://127.0.0.1:${process.env.RS_CLUSTER_REGISTRY_PORT ?? 18091}/apis/ccompat/v7`,
  RS_LOCAL_BROKER: '1',
  RS_BROKERS: '3',
};
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          pool: 'threads',
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/integration/global-setup.ts'],
          pool: 'forks',
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
      {
        // The container image (Dockerfile) run with podman against the local
        // broker; scripts/test.sh builds the image first (in the background).
        test: {
          name: 'image',
          include: ['test/image/**/*.test.ts'],
          globalSetup: ['test/integration/global-setup.ts'],
          pool: 'forks',
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 960_000,
        },
      },
      {
        // A local three-node cluster with its own registry (SPEC §8.1;
        // scripts/local-kafka-cluster.sh), started by the global setup when
        // it is not up, and stopped again if the setup started it.
        test: {
          name: 'cluster',
          include: ['test/cluster/**/*.test.ts'],
          globalSetup: ['test/cluster/global-setup.ts'],
          env: clusterEnv,
          pool: 'forks',
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 240_000,
        },
      },
    ],
  },
});

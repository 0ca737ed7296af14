import { randomUUID } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../../config/load.js';
import { createKafka } from '../../streams/kafka/kafkajs/client.js';

// scripts/local-kafka.sh opens a SASL_PLAINTEXT listener two ports above the
// plain one, with the test user rstest (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
const plain = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',')[0]!;
const saslBroker = `127.0.0.1:${Number(plain.split(':')[1]) + 2}`;

/** A config built the way users give SASL settings: environment variables. */
function saslConfig(mechanism: string, password = 'rstest-secret') {
  return loadConfig({
    env: { KAFKA_BROKERS: saslBroker, KAFKA_SASL_MECHANISM: mechanism, KAFKA_SASL_USERNAME: 'rstest', KAFKA_SASL_PASSWORD: password },
  }).config;
}

describe('SASL settings reach the Kafka client', () => {
  test.each(['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'])('%s authenticates and a record goes through', async (mechanism) => {
    const config = saslConfig(mechanism);
    expect(config.kafka.sasl?.mechanism).toBe(mechanism.toLowerCase());
    const kafka = createKafka(config.kafka, 'sasl-test');
    const admin = kafka.admin();
    await admin.connect();
    const topic = `it.sasl.${randomUUID().slice(0, 8)}`;
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    await producer.send({ topic, messages: [{ key: 'k', value: mechanism }] });
    await producer.disconnect();
    const consumer = kafka.consumer({ groupId: `${topic}.reader`, readUncommitted: false });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const value = await new Promise<string>((resolve) => {
      void consumer.run({ eachMessage: async ({ message }) => resolve(message.value!.toString()) });
    });
    await consumer.disconnect();
    await admin.deleteTopics({ topics: [topic] });
    await admin.disconnect();
    expect(value).toBe(mechanism);
  });

  test('a wrong password is refused with an authentication error', async () => {
    const kafka = createKafka(saslConfig('SCRAM-SHA-256', 'wrong').kafka, 'sasl-test', 'nothing');
    await expect(kafka.producer().connect()).rejects.toThrow(/SCRAM SHA256 authentication failed.*invalid credentials/);
  });
});

describe('TLS settings reach the Kafka client', () => {
  const tlsBroker = `127.0.0.1:${Number(plain.split(':')[1]) + 3}`;
  const caFile = `${process.env.RS_KAFKA_STATE_DIR ?? `${import.meta.dirname}/../../.local/kafka`}/tls/ca.pem`;

  test('a client trusting the local CA connects over TLS and a record goes through', async () => {
    const { config } = loadConfig({ env: { KAFKA_BROKERS: tlsBroker, KAFKA_TLS: 'true', KAFKA_TLS_CA_FILE: caFile } });
    expect(config.kafka.tls).toMatchObject({ enabled: true, ca_file: caFile, reject_unauthorized: true });
    const kafka = createKafka(config.kafka, 'tls-test');
    const admin = kafka.admin();
    await admin.connect();
    const topic = `it.tls.${randomUUID().slice(0, 8)}`;
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    const producer = kafka.producer();
    await producer.connect();
    const meta = await producer.send({ topic, messages: [{ key: 'k', value: 'over tls' }] });
    await producer.disconnect();
    await admin.deleteTopics({ topics: [topic] });
    await admin.disconnect();
    expect(meta[0]!.errorCode).toBe(0);
  });

  test('a client that does not trust the certificate is refused', async () => {
    const { config } = loadConfig({ env: { KAFKA_BROKERS: tlsBroker, KAFKA_TLS: 'true' } });
    const kafka = createKafka(config.kafka, 'tls-test', 'nothing');
    await expect(kafka.producer().connect()).rejects.toThrow(/self[- ]signed|unable to verify|certificate/i);
  });
});

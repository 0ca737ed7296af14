/**
 * The librdkafka properties of our config (brokers, SASL, TLS, client id),
 * shared by every producer, consumer and admin the confluent adapter builds.
 * librdkafka reads TLS material from files itself, so paths pass through.
 */
import type { KafkaConfig } from '../../../config/schema.js';

export type RdkafkaProperties = Record<string, string | number | boolean>;

const MECHANISMS = { plain: 'PLAIN', 'scram-sha-256': 'SCRAM-SHA-256', 'scram-sha-512': 'SCRAM-SHA-512' } as const;

/** Properties for `config`; `clientSuffix` distinguishes the processes' client ids. */
export function baseProperties(config: KafkaConfig, clientSuffix = ''): RdkafkaProperties {
  const tls = config.tls;
  const sasl = config.sasl;
  const protocol = `${sasl ? 'sasl_' : ''}${tls?.enabled ? 'ssl' : 'plaintext'}`;
  return {
    'client.id': clientSuffix ? `${config.client_id}-${clientSuffix}` : config.client_id,
    'bootstrap.servers': config.brokers.join(','),
    'security.protocol': protocol,
    'socket.connection.setup.timeout.ms': 10_000,
    // Retries for about 30 s, as the kafkajs adapter (streams/kafka/kafkajs/client.ts).
    'retry.backoff.ms': 200,
    'retry.backoff.max.ms': 5_000,
    ...(tls?.enabled
      ? {
          'enable.ssl.certificate.verification': tls.reject_unauthorized,
          ...(tls.ca_file ? { 'ssl.ca.location': tls.ca_file } : {}),
          ...(tls.cert_file ? { 'ssl.certificate.location': tls.cert_file } : {}),
          ...(tls.key_file ? { 'ssl.key.location': tls.key_file } : {}),
        }
      : {}),
    ...(sasl ? { 'sasl.mechanisms': MECHANISMS[sasl.mechanism], 'sasl.username': sasl.username, 'sasl.password': sasl.password } : {}),
  };
}

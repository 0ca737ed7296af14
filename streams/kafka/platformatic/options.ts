/**
 * The @platformatic/kafka connection options of our config (brokers, SASL,
 * TLS, client id), shared by every producer, consumer and admin the adapter
 * builds.
 */
import { readFileSync } from 'node:fs';
import type { KafkaConfig } from '../../../config/schema.js';

export interface PlatformaticBaseOptions {
  clientId: string;
  bootstrapBrokers: string[];
  connectTimeout: number;
  requestTimeout: number;
  retries: number;
  retryDelay: number;
  tls?: { rejectUnauthorized: boolean; ca?: string[]; cert?: string; key?: string };
  sasl?: { mechanism: 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512'; username: string; password: string };
}

const MECHANISMS = { plain: 'PLAIN', 'scram-sha-256': 'SCRAM-SHA-256', 'scram-sha-512': 'SCRAM-SHA-512' } as const;

/** Options for `config`; `clientSuffix` distinguishes the processes' client ids. */
export function baseOptions(config: KafkaConfig, clientSuffix = ''): PlatformaticBaseOptions {
  const tls = config.tls;
  const sasl = config.sasl;
  return {
    clientId: clientSuffix ? `${config.client_id}-${clientSuffix}` : config.client_id,
    bootstrapBrokers: config.brokers,
    connectTimeout: 10_000,
    requestTimeout: 60_000,
    // About 30 s of retries, as the kafkajs adapter (streams/kafka/kafkajs/client.ts).
    retries: 10,
    retryDelay: 200,
    ...(tls?.enabled
      ? {
          tls: {
            rejectUnauthorized: tls.reject_unauthorized,
            ...(tls.ca_file ? { ca: [readFileSync(tls.ca_file, 'utf8')] } : {}),
            ...(tls.cert_file ? { cert: readFileSync(tls.cert_file, 'utf8') } : {}),
            ...(tls.key_file ? { key: readFileSync(tls.key_file, 'utf8') } : {}),
          },
        }
      : {}),
    ...(sasl ? { sasl: { mechanism: MECHANISMS[sasl.mechanism], username: sasl.username, password: sasl.password } } : {}),
  };
}

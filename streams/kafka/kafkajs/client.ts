/**
 * Builds the kafkajs client from our config (brokers, SASL, TLS, sizes). The
 * rest of `streams/` asks this module for clients so the client library stays
 * behind one seam. `createKafka` is the one factory of kafkajs clients: it
 * refuses (`client_unpatched`) to build one without the send-retry fix.
 */
// First (module evaluation follows this order): the send-retry fix and a
// native CRC-32C, before kafkajs loads its producer and record-batch encoder.
export { kafkaCrcImplementation, kafkaPatchesEnabled } from './speedups.js';
import { requireKafkaSendRetry } from './send-retry.js';
import { readFileSync } from 'node:fs';
import { Kafka, logLevel, type KafkaConfig as KafkaJsConfig, type LogEntry, type SASLOptions } from 'kafkajs';
import type { KafkaConfig } from '../../../config/schema.js';
import { registerCompressionCodecs } from './compression.js';

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= '1';

function tlsOptions(config: KafkaConfig): KafkaJsConfig['ssl'] {
  const tls = config.tls;
  if (!tls?.enabled) return undefined;
  return {
    rejectUnauthorized: tls.reject_unauthorized,
    ...(tls.ca_file ? { ca: [readFileSync(tls.ca_file, 'utf8')] } : {}),
    ...(tls.cert_file ? { cert: readFileSync(tls.cert_file, 'utf8') } : {}),
    ...(tls.key_file ? { key: readFileSync(tls.key_file, 'utf8') } : {}),
  };
}

function saslOptions(config: KafkaConfig): SASLOptions | undefined {
  const s = config.sasl;
  if (!s) return undefined;
  return { mechanism: s.mechanism, username: s.username, password: s.password } as SASLOptions;
}

const LEVELS: Record<string, logLevel> = {
  nothing: logLevel.NOTHING,
  error: logLevel.ERROR,
  warn: logLevel.WARN,
  info: logLevel.INFO,
  debug: logLevel.DEBUG,
};

/**
 * kafkajs logs retried, harmless conditions at ERROR (a coordinator still
 * finishing the previous transaction, a group rebalancing), and every
 * metadata answer for a topic that does not exist (yet): what the topic
 * probes of `topics create` ask on purpose (admin.ts `existingTopics`,
 * `waitForLeaders`); a real missing topic reaches the caller as a coded
 * error. Those go to debug; everything else goes to stderr as one line.
 */
const RETRIED_NOISE =
  /concurrent operation on the same transaction|coordinator is not available|group is rebalancing|not the correct coordinator|Restarting the consumer|leadership election|There is no leader|^Response Metadata\(.*does not host this topic-partition/i;

function logCreator(level: logLevel, quiet: RegExp | null) {
  return ({ level: entryLevel, log }: LogEntry) => {
    const { message, timestamp: _t, logger: _l, ...rest } = log as { message: string; timestamp?: string; logger?: string; [k: string]: unknown };
    const text = `${message} ${String(rest.error ?? '')}`;
    const effective = RETRIED_NOISE.test(text) || quiet?.test(text) ? logLevel.DEBUG : entryLevel;
    if (effective > level || effective === logLevel.NOTHING) return;
    const name = effective === logLevel.ERROR ? 'error' : effective === logLevel.WARN ? 'warn' : 'info';
    const detail = rest.error ? `: ${String(rest.error)}` : '';
    process.stderr.write(`${new Date().toISOString()} ${name} kafka ${message}${detail}\n`);
  };
}

/**
 * A kafkajs client for `config`; `clientSuffix` distinguishes the processes'
 * client ids. `quiet` names more messages this client's user handles itself
 * (logged at debug, not error). Throws `client_unpatched` when kafkajs's
 * sends lack the send-retry fix (send-retry.ts).
 */
export function createKafka(config: KafkaConfig, clientSuffix = '', level = 'error', quiet: RegExp | null = null): Kafka {
  requireKafkaSendRetry();
  registerCompressionCodecs();
  const ssl = tlsOptions(config);
  const sasl = saslOptions(config);
  return new Kafka({
    clientId: clientSuffix ? `${config.client_id}-${clientSuffix}` : config.client_id,
    brokers: config.brokers,
    ...(ssl ? { ssl } : {}),
    ...(sasl ? { sasl } : {}),
    connectionTimeout: 10_000,
    requestTimeout: 60_000,
    logLevel: LEVELS[level] ?? logLevel.ERROR,
    logCreator: (l: logLevel) => logCreator(l, quiet),
    // About 30 s of retries (0.2, 0.4 … 5 s): enough to ride out a broker's
    // loss on a cluster, where its partitions move only after the controller
    // fences it (broker.session.timeout.ms, 9 s by default) and clients then
    // learn the new leaders. 8 retries (~21 s) ran out now and then (SPEC §8.1).
    retry: { retries: 10, initialRetryTime: 200, maxRetryTime: 5_000 },
  });
}

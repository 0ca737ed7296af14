/**
 * The KafkaClient a stage runner uses, by `kafka.client`: the kafkajs adapter
 * (the default), @platformatic/kafka's (an optional dependency), or, for
 * measurement only, @confluentinc/kafka-javascript's (installed by hand);
 * each loaded only when chosen.
 */
import type { KafkaConfig } from '../../config/schema.js';
import { ConfigError } from '../../errors/index.js';
import { createKafkaClient } from './kafkajs/adapter.js';
import type { KafkaClient } from './types.js';

/** A client for `config`; `clientSuffix` distinguishes the processes' client ids. */
export async function createClient(config: KafkaConfig, clientSuffix = ''): Promise<KafkaClient> {
  if (config.client === 'kafkajs') return createKafkaClient(config, clientSuffix);
  if (config.client === 'confluent') {
    // Measured (bench e2e --client confluent), not trusted: it fails exactly-once suites (bench/README.md "Kafka clients").
    if (process.env.RS_EXPERIMENTAL_CLIENT !== 'confluent') {
      throw new ConfigError(
        'kafka.client',
        'confluent is for measurement only: the fused runs of the exactly-once suites do not pass on it yet (bench/README.md "Kafka clients"); ' +
          'use kafkajs or platformatic, or set RS_EXPERIMENTAL_CLIENT=confluent to run it anyway (bench e2e --client confluent does)',
      );
    }
    let adapter: typeof import('./confluent/client.js');
    try {
      adapter = await import('./confluent/client.js');
    } catch (e) {
      throw new ConfigError(
        'kafka.client',
        `confluent needs @confluentinc/kafka-javascript (a native build of librdkafka, not installed by default), which could not be loaded (${(e as Error).message}); ` +
          'install it with: CKJS_LINKING=dynamic npm_config_nodedir=$PWD/.local/node/current npm install --no-save @confluentinc/kafka-javascript@1.10.1',
      );
    }
    return adapter.createConfluentClient(config, clientSuffix);
  }
  let adapter: typeof import('./platformatic/client.js');
  try {
    adapter = await import('./platformatic/client.js');
  } catch (e) {
    throw new ConfigError('kafka.client', `platformatic needs the optional dependency @platformatic/kafka, which could not be loaded (${(e as Error).message}); run npm install, or use kafkajs`);
  }
  return adapter.createPlatformaticClient(config, clientSuffix);
}

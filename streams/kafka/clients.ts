/**
 * The KafkaClient a stage runner uses, by `kafka.client`: the kafkajs adapter
 * (the default), or @platformatic/kafka's, loaded only when chosen (it is an
 * optional dependency).
 */
import type { KafkaConfig } from '../../config/schema.js';
import { ConfigError } from '../../errors/index.js';
import { createKafkaClient } from './kafkajs/adapter.js';
import type { KafkaClient } from './types.js';
import { chunkedClient, chunkReaderOptions } from '../chunks/chunked-client.js';
import type { ChunkReaderOptions } from '../chunks/chunked-group-source.js';

/**
 * A client for `config`; `clientSuffix` distinguishes the processes' client
 * ids. Its group sources and scans hand on whole records only (chunk sets
 * reassembled: streams/chunks/chunked-client.ts); `chunks` defaults to
 * `kafka.chunk_wait_ms` and `runtime.max_inflight_bytes`' default.
 */
export async function createClient(config: KafkaConfig, clientSuffix = '', chunks: ChunkReaderOptions = chunkReaderOptions(config)): Promise<KafkaClient> {
  return chunkedClient(await createRawClient(config, clientSuffix), chunks);
}

async function createRawClient(config: KafkaConfig, clientSuffix: string): Promise<KafkaClient> {
  if (config.client === 'kafkajs') return createKafkaClient(config, clientSuffix);
  let adapter: typeof import('./platformatic/client.js');
  try {
    adapter = await import('./platformatic/client.js');
  } catch (e) {
    throw new ConfigError('kafka.client', `platformatic needs the optional dependency @platformatic/kafka, which could not be loaded (${(e as Error).message}); run npm install, or use kafkajs`);
  }
  return adapter.createPlatformaticClient(config, clientSuffix);
}

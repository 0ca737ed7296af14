/**
 * Loads the configuration: defaults < config file (ROLLOUT_STREAM_CONFIG or
 * --config; JSON or YAML) < environment < command-line overrides. This is the
 * only module that reads `process.env`. An invalid configuration throws a
 * ConfigError naming the field, before anything else runs.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../errors/index.js';
import { configSchema, type Config } from './schema.js';

export interface LoadedConfig {
  config: Config;
  /** Directory that relative paths in the config are resolved against. */
  configDir: string;
  /** Where the config came from, for messages. */
  source: string;
}

type Env = Record<string, string | undefined>;

function readConfigFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    throw new ConfigError('config', `cannot read config file ${path}: ${(cause as Error).message}`, { cause });
  }
  try {
    return path.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (cause) {
    throw new ConfigError('config', `config file ${path} is not valid ${path.endsWith('.json') ? 'JSON' : 'YAML'}: ${(cause as Error).message}`, { cause });
  }
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (next === null || typeof next !== 'object') node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

function envInt(env: Env, name: string): number | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new ConfigError(name, `must be an integer, got ${JSON.stringify(v)}`);
  return n;
}

/** Environment variables of SPEC §9 (and our SASL/TLS ones) as config overrides. */
export function envOverrides(env: Env): Array<[string[], unknown]> {
  const out: Array<[string[], unknown]> = [];
  if (env.KAFKA_BROKERS) out.push([['kafka', 'brokers'], env.KAFKA_BROKERS.split(',').map((s) => s.trim()).filter(Boolean)]);
  if (env.SCHEMA_REGISTRY_URL) out.push([['kafka', 'schema_registry_url'], env.SCHEMA_REGISTRY_URL]);
  if (env.TOPIC_PREFIX !== undefined) out.push([['topics', 'prefix'], env.TOPIC_PREFIX]);
  if (env.KAFKA_CLIENT) out.push([['kafka', 'client'], env.KAFKA_CLIENT]);
  if (env.KAFKA_SASL_MECHANISM) {
    out.push([
      ['kafka', 'sasl'],
      {
        mechanism: env.KAFKA_SASL_MECHANISM.toLowerCase(),
        username: env.KAFKA_SASL_USERNAME ?? '',
        password: env.KAFKA_SASL_PASSWORD ?? '',
      },
    ]);
  }
  if (env.KAFKA_TLS === '1' || env.KAFKA_TLS === 'true' || env.KAFKA_TLS_CA_FILE) {
    out.push([
      ['kafka', 'tls'],
      {
        enabled: true,
        ca_file: env.KAFKA_TLS_CA_FILE ?? null,
        cert_file: env.KAFKA_TLS_CERT_FILE ?? null,
        key_file: env.KAFKA_TLS_KEY_FILE ?? null,
        reject_unauthorized: env.KAFKA_TLS_REJECT_UNAUTHORIZED !== 'false',
      },
    ]);
  }
  if (env.SCHEMA_REGISTRY_USERNAME) {
    out.push([['kafka', 'registry_auth'], { username: env.SCHEMA_REGISTRY_USERNAME, password: env.SCHEMA_REGISTRY_PASSWORD ?? '' }]);
  }
  const port = envInt(env, 'METRICS_PORT');
  if (port !== undefined) out.push([['runtime', 'metrics_port'], port]);
  if (env.METRICS_HOST) out.push([['runtime', 'metrics_host'], env.METRICS_HOST]);
  if (env.LOG_FORMAT) out.push([['logging', 'format'], env.LOG_FORMAT]);
  return out;
}

/**
 * Builds the configuration. `file` wins over ROLLOUT_STREAM_CONFIG; `overrides`
 * (from command-line flags, as [path, value]) win over everything.
 */
export function loadConfig(
  options: { file?: string | undefined; env?: Env; overrides?: Array<[string[], unknown]> } = {},
): LoadedConfig {
  const env = options.env ?? process.env;
  const file = options.file ?? env.ROLLOUT_STREAM_CONFIG;
  const raw = file ? readConfigFile(file) : {};
  if (raw !== null && (typeof raw !== 'object' || Array.isArray(raw))) {
    throw new ConfigError('config', `the config file ${file} must hold a mapping at its top level`);
  }
  const merged = structuredClone((raw ?? {}) as Record<string, unknown>);
  for (const [path, value] of [...envOverrides(env), ...(options.overrides ?? [])]) setPath(merged, path, value);
  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = issue.path.map(String).join('.') || 'config';
    const more = parsed.error.issues.length > 1 ? ` (and ${parsed.error.issues.length - 1} more problem(s))` : '';
    throw new ConfigError(path, `${issue.message}${more}`);
  }
  return {
    config: parsed.data,
    configDir: file ? dirname(resolve(file)) : process.cwd(),
    source: file ?? 'defaults',
  };
}

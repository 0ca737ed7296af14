/**
 * The schema registry as rollout-stream uses it: register each topic's value
 * schema under `<topic>-value` (TopicNameStrategy, passed explicitly) with
 * BACKWARD compatibility, and fetch writer schemas by id. Wraps
 * @kafkajs/confluent-schema-registry; ids and schemas are cached for the life
 * of the process.
 */
import confluentRegistry from '@kafkajs/confluent-schema-registry';
import { readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import type { KafkaConfig } from '../../config/schema.js';
import { RolloutStreamError } from '../../errors/index.js';
import { UndecodableError } from './wire-format.js';

const { SchemaRegistry, SchemaType } = confluentRegistry;

export interface RegistryOptions {
  url: string;
  auth?: { username: string; password: string } | null;
  agent?: Agent;
  /** Per HTTP request; a registry that does not answer in time is an error, never a hang. */
  requestTimeoutMs?: number;
  /** Attempts of one registration when the registry times out, answers 5xx or drops the connection. */
  registerAttempts?: number;
}

// Above Apicurio's own KafkaSQL response timeout (30 s: a write waits until
// the registry has read it back from its journal topic), so a slow registry
// answers with its own error and only a registry that never answers times out.
const DEFAULT_REQUEST_TIMEOUT_MS = 45_000;
const DEFAULT_REGISTER_ATTEMPTS = 3;

export class RegistryError extends RolloutStreamError {
  constructor(message: string, options: { cause?: unknown; retriable?: boolean } = {}) {
    super('registry_error', message, options);
  }
}

export class SchemaRegistryClient {
  private readonly client: InstanceType<typeof SchemaRegistry>;
  private readonly schemasById = new Map<number, object>();
  private readonly idsBySubjectSchema = new Map<string, number>();
  private readonly headers: Record<string, string>;
  private readonly requestTimeoutMs: number;
  private readonly registerAttempts: number;
  readonly url: string;

  constructor(options: RegistryOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.headers = options.auth
      ? { authorization: `Basic ${Buffer.from(`${options.auth.username}:${options.auth.password}`).toString('base64')}` }
      : {};
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.registerAttempts = options.registerAttempts ?? DEFAULT_REGISTER_ATTEMPTS;
    this.client = new SchemaRegistry({
      host: this.url,
      ...(options.auth ? { auth: options.auth } : {}),
      ...(options.agent ? { agent: options.agent } : {}),
      retry: { retries: 3 },
      middlewares: [requestTimeout(this.requestTimeoutMs) as never],
    });
  }

  /**
   * Registers `schema` under `subject` (BACKWARD compatibility on first
   * registration) and returns its id. A schema the registry refuses as
   * incompatible throws RegistryError with the registry's message.
   */
  async register(subject: string, schema: object): Promise<number> {
    const text = JSON.stringify(schema);
    const key = `${subject}\u0000${text}`;
    const known = this.idsBySubjectSchema.get(key);
    if (known !== undefined) return known;
    const t0 = Date.now();
    for (let attempt = 1; ; attempt++) {
      try {
        // Registering the same schema again is idempotent, so a timed-out attempt is safe to repeat.
        const { id } = await this.client.register(
          { type: SchemaType.AVRO, schema: text },
          { subject, compatibility: 'BACKWARD' as never },
        );
        this.schemasById.set(id, schema);
        this.idsBySubjectSchema.set(key, id);
        return id;
      } catch (cause) {
        const transient = isTransientRegistryError(cause);
        if (transient && attempt < this.registerAttempts) {
          await new Promise((r) => setTimeout(r, 250 * 2 ** (attempt - 1)));
          continue;
        }
        const tries = attempt > 1 ? ` (${attempt} attempts over ${Math.round((Date.now() - t0) / 1000)} s)` : '';
        throw new RegistryError(`registering ${subject} at ${this.url} failed${tries}: ${(cause as Error).message}`, {
          cause,
          retriable: transient,
        });
      }
    }
  }

  /** The writer schema (parsed JSON) of an id; UndecodableError when the registry does not know it. */
  async schemaById(id: number): Promise<object> {
    const cached = this.schemasById.get(id);
    if (cached) return cached;
    let text: string;
    try {
      const res = await fetch(`${this.url}/schemas/ids/${id}`, {
        headers: this.headers,
        signal: AbortSignal.timeout(this.requestTimeoutMs),
      });
      if (res.status === 404) throw new UndecodableError(`schema id ${id} is unknown to the registry at ${this.url}`);
      if (!res.ok) throw new RegistryError(`registry answered ${res.status} for schema id ${id}`, { retriable: true });
      text = ((await res.json()) as { schema: string }).schema;
    } catch (cause) {
      if (cause instanceof RolloutStreamError) throw cause;
      throw new RegistryError(`registry at ${this.url} unreachable: ${(cause as Error).message}`, { cause, retriable: true });
    }
    const schema = JSON.parse(text) as object;
    this.schemasById.set(id, schema);
    return schema;
  }

  /** True when the registry answers its subjects endpoint. */
  async ping(): Promise<boolean> {
    try {
      return (await fetch(`${this.url}/subjects`, { headers: this.headers, signal: AbortSignal.timeout(this.requestTimeoutMs) }))
        .ok;
    } catch {
      return false;
    }
  }
}

/** A mappersmith middleware giving every request of the client a timeout (the library sets none). */
function requestTimeout(ms: number) {
  interface Req {
    timeout(): number | undefined;
    enhance(extras: { timeout: number }): Req;
  }
  return () => ({
    async prepareRequest(next: () => Promise<Req>): Promise<Req> {
      const request = await next();
      return request.timeout() ? request : request.enhance({ timeout: ms });
    },
  });
}

/** Worth another attempt: the registry is unreachable, timed out, or failed on its side (5xx). */
function isTransientRegistryError(e: unknown): boolean {
  const msg = String((e as Error)?.message ?? e);
  const status = (e as { status?: number })?.status;
  return (
    /ECONNREFUSED|ECONNRESET|ETIMEDOUT|socket hang up|Timeout \(\d+ms\)/i.test(msg) || (typeof status === 'number' && status >= 500)
  );
}

/** The registry client for `config` (basic auth and TLS pass through). */
export function createRegistry(config: KafkaConfig): SchemaRegistryClient {
  const tls = config.tls;
  const agent =
    tls?.enabled && config.schema_registry_url.startsWith('https:')
      ? new Agent({
          rejectUnauthorized: tls.reject_unauthorized,
          ...(tls.ca_file ? { ca: readFileSync(tls.ca_file, 'utf8') } : {}),
        })
      : undefined;
  return new SchemaRegistryClient({
    url: config.schema_registry_url,
    auth: config.registry_auth,
    ...(agent ? { agent } : {}),
  });
}

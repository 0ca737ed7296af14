/**
 * The schema registry as rollout-stream uses it: register each topic's value
 * schema under `<topic>-value` (TopicNameStrategy, passed explicitly) with
 * BACKWARD compatibility, and fetch writer schemas by id. Wraps
 * @kafkajs/confluent-schema-registry; ids and schemas are cached for the life
 * of the process.
 */
import confluentRegistry from '@kafkajs/confluent-schema-registry';
import type { Agent } from 'node:https';
import { RolloutStreamError } from '../processors/errors.js';
import { UndecodableError } from './wire-format.js';

const { SchemaRegistry, SchemaType } = confluentRegistry;

export interface RegistryOptions {
  url: string;
  auth?: { username: string; password: string } | null;
  agent?: Agent;
}

export class RegistryError extends RolloutStreamError {
  constructor(message: string, options: { cause?: unknown; retriable?: boolean } = {}) {
    super('registry_error', message, options);
  }
}

export class SchemaRegistryClient {
  private readonly client: InstanceType<typeof SchemaRegistry>;
  private readonly schemasById = new Map<number, object>();
  private readonly headers: Record<string, string>;
  readonly url: string;

  constructor(options: RegistryOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.headers = options.auth
      ? { authorization: `Basic ${Buffer.from(`${options.auth.username}:${options.auth.password}`).toString('base64')}` }
      : {};
    this.client = new SchemaRegistry({
      host: this.url,
      ...(options.auth ? { auth: options.auth } : {}),
      ...(options.agent ? { agent: options.agent } : {}),
      retry: { retries: 3 },
    });
  }

  /**
   * Registers `schema` under `subject` (BACKWARD compatibility on first
   * registration) and returns its id. A schema the registry refuses as
   * incompatible throws RegistryError with the registry's message.
   */
  async register(subject: string, schema: object): Promise<number> {
    try {
      const { id } = await this.client.register(
        { type: SchemaType.AVRO, schema: JSON.stringify(schema) },
        { subject, compatibility: 'BACKWARD' as never },
      );
      this.schemasById.set(id, schema);
      return id;
    } catch (cause) {
      throw new RegistryError(`registering ${subject} at ${this.url} failed: ${(cause as Error).message}`, {
        cause,
        retriable: isConnectionError(cause),
      });
    }
  }

  /** The writer schema (parsed JSON) of an id; UndecodableError when the registry does not know it. */
  async schemaById(id: number): Promise<object> {
    const cached = this.schemasById.get(id);
    if (cached) return cached;
    let text: string;
    try {
      const res = await fetch(`${this.url}/schemas/ids/${id}`, { headers: this.headers });
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
      return (await fetch(`${this.url}/subjects`, { headers: this.headers })).ok;
    } catch {
      return false;
    }
  }
}

function isConnectionError(e: unknown): boolean {
  const msg = String((e as Error)?.message ?? e);
  return /ECONNREFUSED|ECONNRESET|ETIMEDOUT|socket hang up/i.test(msg);
}

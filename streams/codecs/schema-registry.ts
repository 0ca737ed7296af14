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
  /**
   * Keep retrying such a registration until this long has passed since the
   * first attempt (start-up waits this long for a registry that is down,
   * then fails with an error that says so). Default 0: `registerAttempts` only.
   */
  registerWaitMs?: number;
  /**
   * When the registry cannot be reached, a lookup of a schema id not cached
   * here waits (retrying with backoff) until it answers, instead of failing:
   * the stages' way of riding out a registry outage (SPEC §8.1). Default false.
   */
  waitOnLookup?: boolean;
  /** Where the waits are reported (rate-limited); default: a warn line on stderr. */
  log?: (message: string) => void;
  /**
   * false: never register; look each schema's id up under its subject (for
   * clients without write rights on the registry). Default true.
   */
  register?: boolean;
}

/** How often a lookup that keeps waiting says so again. */
const WAIT_LOG_EVERY_MS = 15_000;
/**
 * A registry that has just come back may not know every id yet: Apicurio
 * (KafkaSQL) serves requests while it still replays its journal topic and
 * answers 404 for ids it is about to load (measured: for about 1 s). Within
 * this long of the registry last being unreachable, a 404 is waited out too.
 */
const RELOAD_GRACE_MS = 60_000;

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
  private readonly registerWaitMs: number;
  private readonly waitOnLookup: boolean;
  private readonly log: (message: string) => void;
  private readonly registers: boolean;
  /** When each waiting schema id last said so (rate-limiting the log line). */
  private readonly waitReported = new Map<number, number>();
  /** When a request last found the registry unreachable (or failing on its side). */
  private lastUnreachableAt = -Infinity;
  /** Ids whose wait for a registry still loading has been reported. */
  private readonly reloadReported = new Set<number>();
  readonly url: string;

  constructor(options: RegistryOptions) {
    const { url, userInfo } = splitUserInfo(options.url);
    this.url = url;
    const auth = options.auth ?? userInfo;
    this.headers = auth ? { authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}` } : {};
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.registerAttempts = options.registerAttempts ?? DEFAULT_REGISTER_ATTEMPTS;
    this.registerWaitMs = options.registerWaitMs ?? 0;
    this.waitOnLookup = options.waitOnLookup ?? false;
    this.registers = options.register ?? true;
    this.log = options.log ?? ((m) => void process.stderr.write(`${new Date().toISOString()} warn ${m}\n`));
    this.client = new SchemaRegistry({
      host: this.url,
      ...(auth ? { auth } : {}),
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
        const id = this.registers
          ? (await this.client.register({ type: SchemaType.AVRO, schema: text }, { subject, compatibility: 'BACKWARD' as never })).id
          : await this.lookUp(subject, text);
        this.schemasById.set(id, schema);
        this.idsBySubjectSchema.set(key, id);
        return id;
      } catch (cause) {
        const transient = isTransientRegistryError(cause);
        const waited = Date.now() - t0;
        if (transient && (attempt < this.registerAttempts || waited < this.registerWaitMs)) {
          if (this.registerWaitMs > 0 && attempt === 1) {
            this.log(`registry: ${this.url} does not answer (${(cause as Error).message}); retrying for up to ${Math.round(this.registerWaitMs / 1000)} s`);
          }
          const backoff = Math.min(250 * 2 ** (attempt - 1), 5_000);
          await new Promise((r) => setTimeout(r, this.registerWaitMs > 0 ? Math.max(0, Math.min(backoff, this.registerWaitMs - waited)) : backoff));
          continue;
        }
        const tries = attempt > 1 ? ` (${attempt} attempts over ${Math.round(waited / 1000)} s)` : '';
        const hint = transient && this.registerWaitMs > 0 ? '; is the registry up, and is kafka.schema_registry_url right?' : '';
        throw new RegistryError(`registering ${subject} at ${this.url} failed${tries}: ${(cause as Error).message}${hint}`, {
          cause,
          retriable: transient,
        });
      }
    }
  }

  /** Read-only mode: the id `subject` already holds `text` under; a clear error when it holds none. */
  private async lookUp(subject: string, text: string): Promise<number> {
    try {
      return await this.client.getRegistryIdBySchema(subject, { type: SchemaType.AVRO, schema: text });
    } catch (cause) {
      const status = (cause as { status?: number }).status;
      if (status === 404 || /not found/i.test((cause as Error).message)) {
        throw new RegistryError(
          `kafka.register_schemas is false and ${subject} at ${this.url} does not hold this schema (${(cause as Error).message}); ` +
            'register it once with a client that may (./rollout-stream topics create), or set kafka.register_schemas: true',
          { cause, retriable: false },
        );
      }
      throw cause;
    }
  }

  /**
   * The writer schema (parsed JSON) of an id; UndecodableError when the
   * registry does not know it. An unreachable registry (or a 5xx) is a
   * retriable RegistryError, or, with `waitOnLookup`, a wait until it answers.
   */
  async schemaById(id: number): Promise<object> {
    const cached = this.schemasById.get(id);
    if (cached) return cached;
    if (!this.waitOnLookup) return this.fetchSchema(id);
    const t0 = Date.now();
    for (let attempt = 1; ; attempt++) {
      try {
        const schema = await this.fetchSchema(id);
        this.reloadReported.delete(id);
        if (this.waitReported.delete(id)) this.log(`registry: schema id ${id} fetched from ${this.url} after waiting ${Math.round((Date.now() - t0) / 1000)} s; its records go on`);
        return schema;
      } catch (e) {
        const reloading = e instanceof UndecodableError && Date.now() - this.lastUnreachableAt < RELOAD_GRACE_MS;
        if (!reloading && (!(e instanceof RegistryError) || !e.retriable)) throw e;
        if (reloading) {
          if (!this.reloadReported.has(id)) {
            this.reloadReported.add(id);
            this.waitReported.set(id, Date.now());
            this.log(`registry: ${this.url} answers that it does not know schema id ${id} moments after it was unreachable: waiting for it to finish loading (an id still unknown ${RELOAD_GRACE_MS / 1000} s after the outage is undecodable)`);
          }
          await new Promise((r) => setTimeout(r, 500));
          continue;
        }
        const last = this.waitReported.get(id);
        if (last === undefined || Date.now() - last >= WAIT_LOG_EVERY_MS) {
          this.waitReported.set(id, Date.now());
          this.log(
            `registry: schema id ${id} is not known here and the registry does not answer (${e.message}); ` +
              `records with this id wait (not dead-lettered) until it does (waiting ${Math.round((Date.now() - t0) / 1000)} s)`,
          );
        }
        await new Promise((r) => setTimeout(r, Math.min(250 * 2 ** (attempt - 1), 5_000)));
      }
    }
  }

  private async fetchSchema(id: number): Promise<object> {
    let text: string;
    try {
      const res = await fetch(`${this.url}/schemas/ids/${id}`, {
        headers: this.headers,
        signal: AbortSignal.timeout(this.requestTimeoutMs),
      });
      if (res.status === 404) throw new UndecodableError(`schema id ${id} is unknown to the registry at ${this.url}`);
      if (!res.ok) {
        this.lastUnreachableAt = Date.now();
        throw new RegistryError(`registry answered ${res.status} for schema id ${id}`, { retriable: true });
      }
      text = ((await res.json()) as { schema: string }).schema;
    } catch (cause) {
      if (cause instanceof RolloutStreamError) throw cause;
      this.lastUnreachableAt = Date.now();
      // fetch says only "fetch failed"; the reason (ECONNREFUSED, …) is its cause.
      const why = (cause as { cause?: { code?: string; message?: string } }).cause;
      const detail = why ? ` (${why.code ?? why.message})` : '';
      throw new RegistryError(`registry at ${this.url} unreachable: ${(cause as Error).message}${detail}`, { cause, retriable: true });
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

/**
 * The registry URL without a trailing slash and without user-info
 * (`https://key:secret@host`, as Confluent Cloud's are sometimes written):
 * fetch refuses URLs with credentials, and messages show the URL, so the
 * credentials (percent-decoded) become basic auth instead. Any path stays:
 * a Confluent Schema Registry's root (`http://host:8081`) and Apicurio's
 * `/apis/ccompat/v7` both work.
 */
function splitUserInfo(raw: string): { url: string; userInfo: { username: string; password: string } | null } {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    return { url: raw.replace(/\/+$/, ''), userInfo: null };
  }
  if (!parsed.username && !parsed.password) return { url: raw.replace(/\/+$/, ''), userInfo: null };
  const userInfo = { username: decodeURIComponent(parsed.username), password: decodeURIComponent(parsed.password) };
  parsed.username = '';
  parsed.password = '';
  return { url: parsed.href.replace(/\/+$/, ''), userInfo };
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

/**
 * The registry client for `config` (basic auth and TLS pass through);
 * `options` add the waiting behaviour the stages want (`registerWaitMs`,
 * `waitOnLookup`, `log`).
 */
export function createRegistry(config: KafkaConfig, options: Pick<RegistryOptions, 'registerWaitMs' | 'waitOnLookup' | 'log'> = {}): SchemaRegistryClient {
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
    register: config.register_schemas,
    ...(agent ? { agent } : {}),
    ...options,
  });
}

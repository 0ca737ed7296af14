/**
 * The registry client never hangs: a request that gets no answer times out,
 * a registration is retried on timeouts and 5xx, and a refusal (4xx) is not.
 * The "registry" here is a bare HTTP server that misbehaves on purpose; the
 * real registry is exercised by the integration tests.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { RegistryError, SchemaRegistryClient } from '../../../streams/codecs/schema-registry.js';

type Handler = (req: IncomingMessage, res: ServerResponse, n: number) => void;

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

/** Serves `handler` for POST /subjects/…/versions and a plain config for the rest; counts registrations. */
async function serve(handler: Handler): Promise<{ url: string; registrations: () => number }> {
  let n = 0;
  server = createServer((req, res) => {
    if (req.method === 'POST' && /\/subjects\/[^/]+\/versions$/.test(req.url ?? '')) {
      handler(req, res, ++n);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/vnd.schemaregistry.v1+json' });
    res.end(JSON.stringify({ compatibilityLevel: 'BACKWARD' }));
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, registrations: () => n };
}

const schema = { type: 'record', name: 'T', fields: [{ name: 'a', type: 'int' }] };
const ok = (res: ServerResponse, id: number) => {
  res.writeHead(200, { 'content-type': 'application/vnd.schemaregistry.v1+json' });
  res.end(JSON.stringify({ id }));
};

describe('schema registry client', () => {
  test('a registration that never gets an answer fails after its attempts, naming the timeout', async () => {
    const reg = await serve(() => undefined); // accepts the request, never answers
    const client = new SchemaRegistryClient({ url: reg.url, requestTimeoutMs: 200, registerAttempts: 2 });
    const t0 = Date.now();
    const err = await client.register('x-value', schema).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RegistryError);
    expect((err as Error).message).toMatch(/registering x-value .* failed \(2 attempts over \d+ s\): .*Timeout \(200ms\)/);
    expect(reg.registrations()).toBe(2);
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  test('a timed-out or 5xx registration is retried and the id of the answer that comes is returned', async () => {
    const reg = await serve((_req, res, n) => {
      if (n === 1) return; // stall
      if (n === 2) {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error_code: 50003, message: 'store busy' }));
        return;
      }
      ok(res, 42);
    });
    const client = new SchemaRegistryClient({ url: reg.url, requestTimeoutMs: 200, registerAttempts: 4 });
    expect(await client.register('x-value', schema)).toBe(42);
    expect(reg.registrations()).toBe(3);
    // The id is cached for the subject and schema: no further request.
    expect(await client.register('x-value', schema)).toBe(42);
    expect(reg.registrations()).toBe(3);
  });

  test('a refusal (4xx) is not retried', async () => {
    const reg = await serve((_req, res) => {
      res.writeHead(409, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error_code: 409, message: 'Schema being registered is incompatible' }));
    });
    const client = new SchemaRegistryClient({ url: reg.url, requestTimeoutMs: 500, registerAttempts: 4 });
    const err = await client.register('x-value', schema).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/incompatible/);
    expect(reg.registrations()).toBe(1);
  });

  test('a schema lookup that gets no answer times out as a retriable registry error', async () => {
    server = createServer(() => undefined);
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    const client = new SchemaRegistryClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requestTimeoutMs: 200 });
    const err = await client.schemaById(7).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RegistryError);
    expect((err as RegistryError).retriable).toBe(true);
  });
});

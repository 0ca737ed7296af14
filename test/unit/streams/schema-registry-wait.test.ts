/**
 * How the stages ride out a registry outage (SPEC §8.1): a schema id not
 * cached yet waits for the registry, saying so at a limited rate, instead of
 * failing the record; an id the registry does not know still fails at once;
 * start-up registration waits a bounded time and then fails saying why. The
 * "registry" is a bare HTTP server; the real one is stopped and started in
 * test/cluster/registry-outage.test.ts.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { RegistryError, SchemaRegistryClient } from '../../../streams/codecs/schema-registry.js';
import { UndecodableError } from '../../../streams/codecs/wire-format.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

const schema = { type: 'record', name: 'T', namespace: 't', fields: [{ name: 'a', type: 'int' }] };
const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/vnd.schemaregistry.v1+json' });
  res.end(JSON.stringify(body));
};

async function listen(handler: (url: string, res: ServerResponse, n: number) => void): Promise<string> {
  let n = 0;
  server = createServer((req, res) => handler(req.url ?? '', res, ++n));
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

/** A loopback URL where nothing listens. */
async function deadUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

describe('schema registry client during an outage', () => {
  test('with waitOnLookup an unseen id waits through 5xx answers and comes back, logged once while waiting', async () => {
    const url = await listen((_path, res, n) => (n <= 3 ? json(res, 503, { message: 'down' }) : json(res, 200, { schema: JSON.stringify(schema) })));
    const lines: string[] = [];
    const client = new SchemaRegistryClient({ url, requestTimeoutMs: 500, waitOnLookup: true, log: (m) => lines.push(m) });
    expect(await client.schemaById(7)).toEqual(schema);
    expect(lines.filter((l) => /schema id 7 is not known here and the registry does not answer .*records with this id wait \(not dead-lettered\)/.test(l))).toHaveLength(1);
    expect(lines.at(-1)).toMatch(/schema id 7 fetched from .* after waiting \d+ s; its records go on/);
  });

  test('with waitOnLookup an unreachable registry is waited for until it listens', async () => {
    const url = await deadUrl();
    const port = Number(new URL(url).port);
    const lines: string[] = [];
    const client = new SchemaRegistryClient({ url, requestTimeoutMs: 500, waitOnLookup: true, log: (m) => lines.push(m) });
    const looking = client.schemaById(9);
    await new Promise((r) => setTimeout(r, 1200));
    server = createServer((_req, res) => json(res, 200, { schema: JSON.stringify(schema) }));
    await new Promise<void>((r) => server!.listen(port, '127.0.0.1', () => r()));
    expect(await looking).toEqual(schema);
    expect(lines[0]).toMatch(/ECONNREFUSED/);
  });

  test('a 404 moments after an outage is waited out (the registry still loading its ids), then the schema comes', async () => {
    // Apicurio answers 404 for known ids for about a second after it comes back.
    const url = await listen((_p, res, n) =>
      n === 1 ? json(res, 503, { message: 'down' }) : n <= 3 ? json(res, 404, { error_code: 40403, message: 'Schema not found' }) : json(res, 200, { schema: JSON.stringify(schema) }),
    );
    const lines: string[] = [];
    const client = new SchemaRegistryClient({ url, requestTimeoutMs: 500, waitOnLookup: true, log: (m) => lines.push(m) });
    expect(await client.schemaById(8)).toEqual(schema);
    expect(lines.some((l) => /does not know schema id 8 moments after it was unreachable: waiting for it to finish loading/.test(l))).toBe(true);
  });

  test('an id the registry answers 404 for is undecodable at once, waiting or not', async () => {
    const url = await listen((_p, res) => json(res, 404, { error_code: 40403, message: 'Schema not found' }));
    const client = new SchemaRegistryClient({ url, waitOnLookup: true, log: () => undefined });
    await expect(client.schemaById(5)).rejects.toBeInstanceOf(UndecodableError);
  });

  test('without waitOnLookup an unreachable registry is a retriable error at once', async () => {
    const client = new SchemaRegistryClient({ url: await deadUrl(), requestTimeoutMs: 500 });
    const err = await client.schemaById(5).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RegistryError);
    expect((err as RegistryError).retriable).toBe(true);
  });

  test('start-up registration waits registerWaitMs for a registry that is down, then fails saying so', async () => {
    const lines: string[] = [];
    const client = new SchemaRegistryClient({ url: await deadUrl(), requestTimeoutMs: 500, registerAttempts: 1, registerWaitMs: 2500, log: (m) => lines.push(m) });
    const t0 = Date.now();
    const err = await client.register('x-value', schema).catch((e: unknown) => e);
    const took = Date.now() - t0;
    expect(err).toBeInstanceOf(RegistryError);
    expect((err as Error).message).toMatch(/registering x-value at .* failed \(\d+ attempts over \d+ s\): .*ECONNREFUSED.*is the registry up, and is kafka\.schema_registry_url right\?/);
    expect(took).toBeGreaterThanOrEqual(2400);
    expect(took).toBeLessThan(6000);
    expect(lines.some((l) => /does not answer .*retrying for up to 3 s/.test(l))).toBe(true);
  });

  test('start-up registration succeeds when the registry comes up within registerWaitMs', async () => {
    const t0 = Date.now();
    const url = await listen((path, res) => {
      if (Date.now() - t0 < 3000) return json(res, 503, { message: 'starting' });
      if (path.includes('/versions')) return json(res, 200, { id: 11 });
      return json(res, 200, { compatibilityLevel: 'BACKWARD' });
    });
    const client = new SchemaRegistryClient({ url, requestTimeoutMs: 500, registerAttempts: 1, registerWaitMs: 10_000, log: () => undefined });
    expect(await client.register('x-value', schema)).toBe(11);
  });
});

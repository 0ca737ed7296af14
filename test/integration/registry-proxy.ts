/**
 * A registry served at its root, as a Confluent Schema Registry is: a small
 * reverse proxy on 127.0.0.1 that forwards every request to a real
 * Confluent-API registry under its path (Apicurio's `/apis/ccompat/v7`),
 * rewriting only the path; bodies and headers pass through. With `auth` it
 * answers 401 to a request without that basic-auth user and password.
 */
import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RegistryProxy {
  /** `http://127.0.0.1:<port>`: no path. */
  url: string;
  /** Every request path as the proxy received it. */
  paths: string[];
  close(): Promise<void>;
}

export async function startRegistryProxy(target: string, auth?: { username: string; password: string }): Promise<RegistryProxy> {
  const base = new URL(target);
  const prefix = base.pathname.replace(/\/+$/, '');
  const expected = auth ? `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}` : undefined;
  const paths: string[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    paths.push(req.url ?? '');
    if (expected && req.headers.authorization !== expected) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error_code: 401, message: 'Unauthorized' }));
      return;
    }
    const headers = { ...req.headers, host: base.host };
    delete headers.authorization; // the registry behind has no users
    const upstream = request(
      { host: base.hostname, port: base.port || 80, method: req.method, path: `${prefix}${req.url ?? '/'}`, headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', (e) => res.writeHead(502).end(String(e)));
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    paths,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

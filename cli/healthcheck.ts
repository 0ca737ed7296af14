/**
 * The container image's HEALTHCHECK: exit 0 when /healthz on this host
 * answers 200, else 1. The port is METRICS_PORT (default 9464), the one
 * `run` serves on in the image. An argument picks another path:
 * `healthcheck.js /readyz` (docker-compose.yml's check: ready, not only alive).
 */
const port = Number(process.env.METRICS_PORT ?? 9464);
const path = process.argv[2] ?? '/healthz';
try {
  if (path !== '/healthz' && path !== '/readyz') throw new Error(`unknown path ${path} (/healthz or /readyz)`);
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(2_500) });
  process.stdout.write(`${res.status} ${await res.text()}\n`);
  process.exitCode = res.ok ? 0 : 1;
} catch (e) {
  process.stdout.write(`unreachable: ${(e as Error).message}\n`);
  process.exitCode = 1;
}

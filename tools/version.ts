/**
 * The package's version, read from the package.json next to the sources
 * (`cli/…` in a checkout, `dist/cli/…` in the image).
 */
import { existsSync, readFileSync } from 'node:fs';

let cached: string | null = null;

export function packageVersion(): string {
  if (cached !== null) return cached;
  for (const rel of ['../package.json', '../../package.json']) {
    const url = new URL(rel, import.meta.url);
    if (!existsSync(url)) continue;
    const pkg = JSON.parse(readFileSync(url, 'utf8')) as { name?: string; version?: string };
    if (pkg.name === 'rollout-stream' && pkg.version) return (cached = pkg.version);
  }
  return (cached = 'unknown');
}

/** Config loading shared by the operations commands: `--config F` and `--prefix P` on top of env and file. */
import { loadConfig, type LoadedConfig } from '../config/load.js';
import { UsageError } from '../tools/command.js';

export function loadOpsConfig(values: { config?: string | undefined; prefix?: string | undefined }, extra: Array<[string[], unknown]> = []): LoadedConfig {
  const overrides: Array<[string[], unknown]> = [...extra];
  if (values.prefix !== undefined) overrides.push([['topics', 'prefix'], values.prefix]);
  return loadConfig({ file: values.config, overrides });
}

/** A non-negative integer flag, or a UsageError naming it. */
export function intFlag(name: string, value: string | undefined, fallback: number, min = 0): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`--${name} must be an integer ≥ ${min}, got ${value}`);
  return n;
}

/** A positive number flag, or a UsageError naming it. */
export function positiveFlag(name: string, value: string | undefined): number | null {
  if (value === undefined) return null;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--${name} must be a positive number, got ${value}`);
  return n;
}

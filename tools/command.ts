/**
 * The shape of a launcher command and the shared argument/exit helpers.
 * Every command has a one-line summary, a usage text with an example
 * (`--help`), and a `run` that returns the process exit code.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError, RolloutStreamError } from '../errors/index.js';

export interface Command {
  name: string;
  summary: string;
  usage: string;
  run(argv: string[]): Promise<number>;
  /** `<command> <sub> --help` goes to `run` (each subcommand prints its own usage); `<command> --help` still prints `usage`. */
  delegatesHelp?: boolean;
}

export function wantsHelp(argv: string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/** parseArgs with a clear message (and exit code 2) on unknown or malformed flags. */
export function parseFlags<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  allowPositionals = false,
) {
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

export class UsageError extends RolloutStreamError {
  constructor(message: string) {
    super('usage', message);
  }
}

/** Prints an error the way users should see it and returns the exit code. */
export function reportError(e: unknown, command: string): number {
  if (e instanceof UsageError) {
    process.stderr.write(`error: ${e.message}\nsee ./rollout-stream ${command} --help\n`);
    return 2;
  }
  if (e instanceof ConfigError) {
    process.stderr.write(`config error: ${e.message}\n`);
    return 2;
  }
  if (e instanceof RolloutStreamError) {
    process.stderr.write(`error [${e.code}]: ${e.message}\n`);
    return 1;
  }
  process.stderr.write(`unexpected error: ${(e as Error)?.stack ?? String(e)}\n`);
  return 1;
}

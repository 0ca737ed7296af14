/**
 * README: every command has `--help` with an example. Each command (and each
 * `bench` subcommand, which prints its own usage) is run with `--help` in a
 * child process, as a user would.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, test } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const run = promisify(execFile);

const COMMANDS = [
  ['topics'],
  ['offline'],
  ['run'],
  ['loadgen'],
  ['produce'],
  ['replay'],
  ['trace'],
  ['dlq'],
  ['demo'],
  ['bench'],
  ['bench', 'pack'],
  ['bench', 'e2e'],
  ['bench', 'tx'],
  ['bench', 'ingest'],
];

test('every command answers --help with its own usage and an example', async () => {
  const results = await Promise.all(
    COMMANDS.map(async (args) => {
      const { stdout } = await run(process.execPath, ['--import', 'tsx', join(ROOT, 'cli', 'main.ts'), ...args, '--help'], { cwd: ROOT });
      return { args, stdout };
    }),
  );
  for (const { args, stdout } of results) {
    expect(stdout, args.join(' ')).toMatch(new RegExp(`^usage: \\./rollout-stream ${args.join(' ')}\\b`));
    expect(stdout, args.join(' ')).toMatch(/Example/);
  }
}, 120_000);

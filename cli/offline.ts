/**
 * `./rollout-stream offline <accumulate|postprocess|pack|all> [--config F]`
 * (SPEC §9): runs a stage on JSON lines from stdin and writes JSON lines to
 * stdout, one record per line; logs go to stderr only, so stdout stays data.
 * The config is loaded and resolved before any input is read; an invalid one
 * exits with code 2 naming the key.
 */
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { resolveIngestConfig, type ResolvedIngestConfig } from '../processors/ingest-config.js';
import { resolvePostprocessConfig } from '../processors/postprocess.js';
import { formatJsonLine } from '../json-form/form.js';
import { parseFlags, reportError, UsageError, type Command } from '../tools/command.js';
import { OFFLINE_STAGES, OfflinePipeline, type OfflineCounts, type OfflineStage } from './offline-pipeline.js';

export { OFFLINE_STAGES, type OfflineCounts, type OfflineStage } from './offline-pipeline.js';

export interface OfflineOptions {
  /** Folder of the config file: a relative `tokenizer_path` resolves against it. Default: the working directory. */
  configDir?: string;
}

/**
 * Runs `stage` over `input` (JSON-form lines, no trailing newlines needed)
 * and passes every output line, without newline, to `output` in order
 * (awaited when it returns a promise, so a caller can honour backpressure).
 * Input: `accumulate`/`all` read row lines and `{"batch_end": …}` lines,
 * `postprocess` reads `group` lines, `pack` reads `penalized` lines; a line
 * of another kind, or one that is not valid JSON, becomes an `undecodable`
 * dead letter. Output: `accumulate` writes group and dead_letter lines;
 * `postprocess` penalized, group metrics and dead_letter lines; `pack`
 * packed and dead_letter lines; `all` packed, metrics and dead_letter lines.
 * Batch metrics lines come last. Throws ConfigError (before reading any
 * input) when the postprocess block cannot be resolved.
 */
export async function runOffline(
  stage: OfflineStage,
  config: Config,
  input: AsyncIterable<string> | Iterable<string>,
  output: (line: string) => void | Promise<void>,
  options: OfflineOptions = {},
): Promise<OfflineCounts> {
  const configDir = options.configDir ?? process.cwd();
  const resolved = resolvePostprocessConfig(config.postprocess, { configDir });
  const pending: string[] = [];
  const pipeline = new OfflinePipeline(stage, config, resolved, offlineIngestConfig(config, configDir), (out) => pending.push(formatJsonLine(out)));
  const flush = async () => {
    for (const line of pending.splice(0)) await output(line);
  };
  for await (const text of input) {
    pipeline.feed(text);
    await flush();
  }
  pipeline.finish();
  await flush();
  return pipeline.counts;
}

/** The `ingest` block resolved against the config file's folder (the tokenizer is loaded here). */
export function offlineIngestConfig(config: Config, configDir: string): ResolvedIngestConfig {
  return resolveIngestConfig(config.ingest, { configDir, postprocessTokenizerPath: config.postprocess.reward_penalties?.tokenizer_path ?? null });
}

const USAGE = `usage: ./rollout-stream offline <ingest|accumulate|postprocess|pack|all> [--config F]

Runs one stage (or all of them chained) on JSON lines from stdin and writes
JSON lines to stdout; logs go to stderr. No Kafka is involved.

  ingest       NeMo-Gym result lines (docs/formats.md#gymresult-lines) → row lines and {"dead_letter": …};
               {"batch_end": …} lines pass through
  accumulate   row lines, NeMo-Gym result lines and {"batch_end": …} lines → {"group": …} and {"dead_letter": …}
  postprocess  {"group": …} lines → {"penalized": …}, {"metrics": …}, {"dead_letter": …}
  pack         {"penalized": …} lines → {"packed": …}, {"dead_letter": …}
  all          row and NeMo-Gym result lines → {"packed": …}, {"metrics": …}, {"dead_letter": …}

A NeMo-Gym result line is a plain object with the row identity fields plus
gym_row and gym_result (no message_log). End of input acts as BatchEnd for
every open batch. The JSON form is described in docs/formats.md.

Options:
  --config F   config file, JSON or YAML (else ROLLOUT_STREAM_CONFIG, else defaults)

Examples:
  ./rollout-stream offline all --config docs/examples/config.yaml < docs/examples/rows.jsonl
  ./rollout-stream offline ingest < docs/examples/gym-result.jsonl`;

function isStage(value: string | undefined): value is OfflineStage {
  return (OFFLINE_STAGES as readonly string[]).includes(value ?? '');
}

/** Writes to stdout, waiting for a drain when the pipe is full. */
async function writeStdout(line: string): Promise<void> {
  if (!process.stdout.write(line + '\n')) {
    await new Promise<void>((resolve) => process.stdout.once('drain', resolve));
  }
}

/**
 * The command: `argv` is what follows `offline` (`<stage> [--config F]`).
 * Returns the exit code: 0 after a full run (dead letters are data, not
 * failures), 2 for bad usage or an invalid config (nothing read from stdin).
 */
export async function main(argv: string[]): Promise<number> {
  try {
    const { values, positionals } = parseFlags(argv, { config: { type: 'string' } }, true);
    const stage = positionals[0];
    if (!isStage(stage) || positionals.length !== 1) {
      throw new UsageError(`expected one stage of ${OFFLINE_STAGES.join('|')}, got ${positionals.join(' ') || 'nothing'}`);
    }
    const { config, configDir, source } = loadConfig({ file: values.config });
    // Resolve once here too, so a config error stops us before stdin is touched.
    resolvePostprocessConfig(config.postprocess, { configDir });
    offlineIngestConfig(config, configDir);
    process.stderr.write(`offline ${stage}: config from ${source}\n`);
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    const counts = await runOffline(stage, config, lines, writeStdout, { configDir });
    process.stderr.write(`offline ${stage}: ${summary(counts)}\n`);
    return 0;
  } catch (e) {
    return reportError(e, 'offline');
  }
}

function summary(c: OfflineCounts): string {
  const dead = Object.entries(c.dead_letters).map(([reason, n]) => `${reason}=${n}`);
  return (
    `${c.lines} lines in; ${c.ingested ? `${c.ingested} NeMo-Gym results converted, ` : ''}${c.groups} groups, ${c.penalized} penalized, ${c.packed} packed, ` +
    `${c.metrics} metrics lines, ${c.replays} replays dropped; dead letters: ${dead.length ? dead.join(' ') : 'none'}`
  );
}

export const offlineCommand: Command = {
  name: 'offline',
  summary: 'run a stage on JSON lines from stdin to stdout, no Kafka',
  usage: USAGE,
  run: main,
};

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}

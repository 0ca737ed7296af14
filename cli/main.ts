/**
 * Entry point of `./rollout-stream <command>` for the commands implemented in
 * TypeScript (the launcher handles `kafka`, `image` and `test` itself).
 */
import '../streams/kafka/kafkajs/speedups.js'; // before anything loads kafkajs (see that module)
import { reportError, wantsHelp, type Command } from '../tools/command.js';
import { topicsCommand } from './topics.js';
import { packageVersion } from '../tools/version.js';

type Loader = () => Promise<Command>;

const COMMANDS: Record<string, { summary: string; load: Loader }> = {
  topics: { summary: topicsCommand.summary, load: async () => topicsCommand },
  offline: {
    summary: 'run a stage on JSON lines from stdin to stdout, no Kafka',
    load: async () => (await import('./offline.js')).offlineCommand,
  },
  run: {
    summary: 'run stage services (accumulate, postprocess, pack) against Kafka, exactly once',
    load: async () => (await import('./run.js')).runCommand,
  },
  loadgen: {
    summary: 'synthetic rollout rows (realistic shapes, out of order, faults) to rollout.row-completed',
    load: async () => (await import('./loadgen.js')).loadgenCommand,
  },
  produce: {
    summary: 'publish JSON lines (rows, NeMo-Gym results, batch ends) from stdin to rollout.row-completed',
    load: async () => (await import('./produce.js')).produceCommand,
  },
  replay: {
    summary: 'read a topic from an offset or time, filter, print JSON lines or re-publish',
    load: async () => (await import('./replay.js')).replayCommand,
  },
  trace: {
    summary: "a group's journey over all topics: offsets, times, stage latencies, dead letters, tags",
    load: async () => (await import('./trace.js')).traceCommand,
  },
  dlq: {
    summary: 'dead letters: list (filter by reason, stage, group) and redrive to their source topic',
    load: async () => (await import('./dlq.js')).dlqCommand,
  },
  bench: {
    summary: 'benchmarks (pack, e2e); each prints ratios against a baseline measured in the same run',
    load: async () => (await import('./bench.js')).benchCommand,
  },
  demo: {
    summary: 'the whole pipeline end to end on a local broker, with a summary',
    load: async () => (await import('./demo.js')).demoCommand,
  },
};

const LAUNCHER_ONLY: Record<string, string> = {
  kafka: 'the local broker and registry: up | down | status',
  image: 'the container image: build [--tag T] (podman, from Debian packages) | name',
  test: 'every test suite (TypeScript and Python, unit and integration) on a real broker',
};

function help(): string {
  const lines = [
    'rollout-stream: RL rollouts from rollout workers to a Python trainer over Kafka',
    '',
    'usage: ./rollout-stream <command> [options]     (./rollout-stream <command> --help for details)',
    '',
    'commands:',
  ];
  const all = { ...Object.fromEntries(Object.entries(COMMANDS).map(([k, v]) => [k, v.summary])), ...LAUNCHER_ONLY };
  for (const name of Object.keys(all).sort()) lines.push(`  ${name.padEnd(10)} ${all[name]}`);
  lines.push('', 'Environment: KAFKA_BROKERS, SCHEMA_REGISTRY_URL, ROLLOUT_STREAM_CONFIG, TOPIC_PREFIX, METRICS_HOST, METRICS_PORT, LOG_FORMAT (see README).');
  lines.push(`Version: rollout-stream ${packageVersion()} (--version)`);
  lines.push('Example: ./rollout-stream demo');
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    console.log(help());
    return 0;
  }
  if (name === '--version' || name === 'version' || (rest.includes('--version') && COMMANDS[name])) {
    console.log(`rollout-stream ${packageVersion()}`);
    return 0;
  }
  const entry = COMMANDS[name];
  if (!entry) {
    process.stderr.write(`unknown command '${name}'\n\n${help()}\n`);
    return 2;
  }
  const command = await entry.load();
  const subcommand = rest[0] !== undefined && !rest[0].startsWith('-');
  if (wantsHelp(rest) && !(command.delegatesHelp && subcommand)) {
    console.log(command.usage);
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (e) {
    return reportError(e, name);
  }
}

process.exitCode = await main(process.argv.slice(2));
// A failed command must end even if a client library left a timer or socket
// behind: give it a few seconds to flush, then exit (unref: a process that is
// done anyway exits at once).
if (process.exitCode !== 0) setTimeout(() => process.exit(), 5_000).unref();

/** `run`: stage services against Kafka, until SIGTERM/SIGINT. */
import { kafkaCrcImplementation } from '../streams/kafka/kafkajs/client.js';
import { loadConfig } from '../config/load.js';
import { PIPELINE_STAGES } from '../config/schema.js';
import { startPipeline } from '../streams/runtime/pipeline.js';
import { parseFault } from '../streams/runtime/faults.js';
import { armCrashPoint, parseCrashPoint } from '../streams/runtime/crash-points.js';
import { parseFlags, UsageError, type Command } from '../tools/command.js';
import { formatLogLine, type LogLevel } from '../streams/runtime/logger.js';


function logger(quiet: boolean, format: 'text' | 'json') {
  const line = (level: LogLevel, msg: string) => process.stderr.write(`${formatLogLine(format, level, msg)}\n`);
  return {
    info: (m: string) => (quiet ? undefined : line('info', m)),
    warn: (m: string) => line('warn', m),
    error: (m: string) => line('error', m),
  };
}

export const runCommand: Command = {
  name: 'run',
  summary: 'run stage services (accumulate, postprocess, pack) against Kafka, exactly once',
  usage: `usage: ./rollout-stream run [--stages accumulate,postprocess,pack] [--fused | --separate] [--config F]
                            [--metrics-port N] [--quiet]

Consumes each stage's input topic with read_committed and writes its outputs,
state changes and input offsets in one Kafka transaction per batch. Several
processes running the same stage share its partitions (consumer group
<prefix>rollout-stream.<stage>); start more to scale out, stop one to scale in.
SIGTERM/SIGINT finish or abort the open transaction and leave the group
within runtime.shutdown_timeout_ms (default 20 s; then the process exits 1
and the partition's next owner aborts what was open). /readyz answers 200
once every stage has its partitions and their state; /healthz is liveness.

A process running all three stages runs them fused (runtime.fused: auto):
one transaction per input batch for accumulate, postprocess and pack, with
the same records on the same topics, a third of the transactions and no
fetch between stages (lower latency, more throughput). Scale it by starting
more such processes. Fused and separate runners refuse to start while the
other kind runs on the prefix; the first fused process after separate
stages first drains what they left. See docs/design-fused-stages.md.

Options:
  --stages S        comma-separated subset of accumulate,postprocess,pack (default: all)
  --fused           require fused mode (all three stages; runtime.fused: true)
  --separate        one transaction per stage even with all three (runtime.fused: false)
  --config F        config file (else ROLLOUT_STREAM_CONFIG)
  --prefix P        topic prefix (else TOPIC_PREFIX)
  --metrics-port N  /metrics, /healthz and /readyz on port N (0 = off; default 9464, env METRICS_PORT)
                    of runtime.metrics_host (default 127.0.0.1, env METRICS_HOST; 0.0.0.0 in the image)
  --quiet           only warnings and errors on stderr

Example: ./rollout-stream run --stages accumulate --metrics-port 9465`,
  async run(argv) {
    const { values } = parseFlags(argv, {
      stages: { type: 'string' },
      config: { type: 'string' },
      prefix: { type: 'string' },
      'metrics-port': { type: 'string' },
      quiet: { type: 'boolean' },
      fused: { type: 'boolean' },
      separate: { type: 'boolean' },
      // Hidden, test-only: arms a fault-injection point (streams/runtime/faults.ts).
      fault: { type: 'string', multiple: true },
      // Hidden, test-only: SIGKILL at a named crash point (streams/runtime/crash-points.ts).
      'crash-at': { type: 'string', multiple: true },
    });
    let faults;
    try {
      faults = (values.fault ?? []).map(parseFault);
      for (const spec of values['crash-at'] ?? []) {
        const { point, at } = parseCrashPoint(spec);
        armCrashPoint(point, at);
      }
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    const overrides: Array<[string[], unknown]> = [];
    if (values.prefix !== undefined) overrides.push([['topics', 'prefix'], values.prefix]);
    if (values.stages !== undefined) overrides.push([['runtime', 'stages'], values.stages.split(',').map((s) => s.trim())]);
    if (values.fused && values.separate) throw new UsageError('--fused and --separate exclude each other');
    if (values.fused) overrides.push([['runtime', 'fused'], true]);
    if (values.separate) overrides.push([['runtime', 'fused'], false]);
    if (values['metrics-port'] !== undefined) {
      const port = Number(values['metrics-port']);
      if (!Number.isInteger(port)) throw new UsageError(`--metrics-port must be an integer, got ${values['metrics-port']}`);
      overrides.push([['runtime', 'metrics_port'], port]);
    }
    const { config, configDir } = loadConfig({ file: values.config, overrides });
    const stages = PIPELINE_STAGES.filter((s) => config.runtime.stages.includes(s));
    const log = logger(values.quiet ?? false, config.logging.format);
    const pipeline = await startPipeline({ config, configDir, stages, log, faults });
    log.info(
      `running ${stages.join(', ')}${pipeline.fused ? ' fused (one transaction per batch)' : ''} on ${config.kafka.brokers.join(',')} (prefix '${config.topics.prefix}')` +
        (pipeline.server ? `; metrics, /healthz and /readyz on http://${config.runtime.metrics_host}:${config.runtime.metrics_port}` : '') +
        `; record-batch CRC-32C: ${kafkaCrcImplementation}`,
    );
    const signalled = new Promise<void>((resolve) => {
      const stop = (signal: string) => {
        log.info(`${signal}: stopping (finishing the transaction in progress, leaving the groups)`);
        resolve();
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
    // A fatal error (error policy: authorization, a restore that keeps failing, ...) stops every stage; main prints it in one line and exits 1.
    const fatal = await Promise.race([signalled.then(() => null), pipeline.failed]);
    if (fatal) log.error(`stopping: fatal error in a stage: [${fatal.code}] ${fatal.message}`);
    // Bounded: a stop that hangs (a broker gone for good) must not outlive the
    // orchestrator's grace period; the open transaction is then aborted by the
    // partition's next owner (or the broker's transaction timeout).
    const limit = config.runtime.shutdown_timeout_ms;
    let timer: NodeJS.Timeout | undefined;
    const stopped = await Promise.race([
      pipeline.stop().then(() => true),
      new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), limit))),
    ]);
    clearTimeout(timer);
    if (!stopped) {
      log.error(`stop did not finish within runtime.shutdown_timeout_ms (${limit} ms); exiting, the open transaction will be aborted by the next owner`);
      return 1;
    }
    log.info('stopped');
    if (fatal) throw fatal;
    return 0;
  },
};

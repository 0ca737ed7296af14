/**
 * Prometheus metrics of the stage services (one prefix, snake_case, base
 * units, counters end in _total, no ids in labels) and the HTTP endpoint
 * serving /metrics and /healthz.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

const P = 'rollout_stream_';

export class RuntimeMetrics {
  readonly registry = new Registry();
  readonly recordsIn = new Counter({ name: `${P}records_in_total`, help: 'Input records processed', labelNames: ['stage'], registers: [this.registry] });
  readonly recordsOut = new Counter({ name: `${P}records_out_total`, help: 'Output records committed', labelNames: ['stage', 'topic'], registers: [this.registry] });
  readonly deadLetters = new Counter({ name: `${P}dead_letters_total`, help: 'Dead letters committed', labelNames: ['stage', 'reason'], registers: [this.registry] });
  readonly events = new Counter({ name: `${P}events_total`, help: 'Stage events (e.g. idempotent replays)', labelNames: ['stage', 'event'], registers: [this.registry] });
  readonly transactionFailures = new Counter({ name: `${P}transaction_failures_total`, help: 'Aborted transactions', labelNames: ['stage', 'fenced'], registers: [this.registry] });
  readonly transactionSeconds = new Histogram({
    name: `${P}transaction_seconds`,
    help: 'Time to write and commit one transaction',
    labelNames: ['stage'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly transactionPhaseSeconds = new Histogram({
    name: `${P}transaction_phase_seconds`,
    help: 'Time inside a transaction by phase: send (one step\'s outputs), process (a fused downstream stage), send_offsets (one consumer group), commit',
    labelNames: ['stage', 'phase'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  readonly batchSeconds = new Histogram({
    name: `${P}batch_seconds`,
    help: 'Time to process and commit one consumed batch',
    labelNames: ['stage'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly restoreSeconds = new Histogram({ name: `${P}restore_seconds`, help: 'State restore time', labelNames: ['stage'], registers: [this.registry] });
  readonly consumerLag = new Gauge({ name: `${P}consumer_lag_records`, help: 'Records behind the end of the input topic', labelNames: ['stage'], registers: [this.registry] });
  readonly openGroups = new Gauge({ name: `${P}open_groups`, help: 'Groups waiting for rows (accumulate)', registers: [this.registry] });
  readonly openWeightVersion = new Gauge({
    name: `${P}open_weight_version`,
    help: 'Oldest (bound=min) and newest (bound=max) weight version among the rows of the groups a stage holds open',
    labelNames: ['stage', 'bound'],
    registers: [this.registry],
  });
  readonly oldestOpenGroup = new Gauge({ name: `${P}oldest_open_group_seconds`, help: 'Age of the oldest group accumulate holds open (0 when none is open)', registers: [this.registry] });
  readonly runnerHealthy = new Gauge({ name: `${P}runner_healthy`, help: '1 while the runner is healthy (what /healthz reports), else 0', labelNames: ['runner'], registers: [this.registry] });
  readonly runnerReady = new Gauge({ name: `${P}runner_ready`, help: '1 while the runner has its partitions and their state (what /readyz reports), else 0', labelNames: ['runner'], registers: [this.registry] });
  readonly openBatches = new Gauge({ name: `${P}open_batches`, help: 'Batches the batch-metrics aggregator holds open (waiting for their groups and partitions)', registers: [this.registry] });
}

type Probe = () => { ok: boolean; detail: unknown };

/**
 * Serves /metrics, /healthz (liveness: `healthy`) and /readyz (readiness:
 * `ready`) on `host`:`port` (port 0 = off). Each probe answers 200 or 503
 * with its JSON detail.
 */
export function serveMetrics(metrics: RuntimeMetrics, listen: { host: string; port: number }, healthy: Probe, ready: Probe): Promise<Server | null> {
  if (listen.port === 0) return Promise.resolve(null);
  const probe = (res: ServerResponse, p: Probe) => {
    const h = p();
    res.writeHead(h.ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(h.detail));
  };
  const server = createServer((req, res) => {
    if (req.url === '/metrics') {
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (e: Error) => res.writeHead(500).end(e.message),
      );
    } else if (req.url === '/healthz') {
      probe(res, healthy);
    } else if (req.url === '/readyz') {
      probe(res, ready);
    } else {
      res.writeHead(404).end('try /metrics, /healthz or /readyz\n');
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => resolve(server));
  });
}

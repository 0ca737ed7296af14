/**
 * The topology test driver (issue 13 item 6; in the spirit of Kafka
 * Streams' TopologyTestDriver): the real stage runners — the ones
 * `startPipeline` builds, with their tasks, transactions, aborts, restores,
 * rebalances, error policy and health — on the in-memory cluster, in
 * milliseconds, for unit tests of the runtime. It never replaces the
 * real-broker integration tests.
 *
 * ```ts
 * const d = await TopologyTestDriver.create({ partitions: 2, config });
 * const a = await d.startInstance('a', { fused: false });
 * d.produce('rowCompleted', events);
 * await d.runUntilIdle();
 * a.crashAt('tx.after-send');             // a stops dead there: no abort, no leave
 * const b = await d.startInstance('b');
 * await d.runUntilIdle();
 * expect(d.health(b).status).toBe(200);
 * ```
 *
 * Instances run on real timers with their own loops; `runUntilIdle` waits
 * until every group's committed offset is at the end of its input and no
 * transaction is open. Topics are created from the config's topic specs
 * under a prefix; codecs use an in-memory registry (fixed ids from 1).
 */
import type { Config, PipelineStage } from '../../config/schema.js';
import { PIPELINE_STAGES } from '../../config/schema.js';
import type { RecordKind } from '../../schemas/index.js';
import { TopicCodec, type RecordTypes } from '../codecs/codec.js';
import type { FetchedRecord, OutgoingRecord, RecordPosition } from '../kafka/types.js';
import type { CrashPoint } from '../runtime/crash-points.js';
import type { Fault } from '../runtime/faults.js';
import { healthReport } from '../runtime/health.js';
import { consumerGroupId, startPipeline, type RunningPipeline } from '../runtime/pipeline.js';
import { subjectOf, topicNames, topicSpecs, type TopicNames } from '../topics/names.js';
import { DriverInstance, releaseInstanceHooks, retainInstanceHooks } from './driver-instance.js';
import { MemoryCluster } from './memory-cluster.js';
import { MemoryRegistry } from './memory-registry.js';
import { chunkedClient, chunkReaderOptions } from '../chunks/chunked-client.js';
import { ChunkedOffsetReader } from '../chunks/chunked-offset-reader.js';
import { writeChunkSets, type SetPosition } from './chunk-sets.js';

export { DriverInstance, type InstanceState } from './driver-instance.js';

export interface TopologyDriverOptions {
  /** What instances run unless `startInstance` says otherwise (default all three). */
  stages?: readonly PipelineStage[];
  /** Partitions of every topic. */
  partitions: number;
  /** The configuration (parsed); the driver sets `topics.prefix`, `topics.partitions` and `runtime.stages`. */
  config: Config;
  /** Topic prefix and consumer-group prefix (default `ttd.`). */
  prefix?: string;
}

export interface InstanceOptions {
  /** `runtime.fused` for this instance (default 'auto': fused when it runs all three stages). */
  fused?: boolean | 'auto';
  stages?: readonly PipelineStage[];
  /** Fault-injection points (streams/runtime/faults.ts). */
  faults?: Fault[];
  /** Armed before it starts: it stops dead at the `at`-th arrival at `point`. */
  crashAt?: CrashPoint | { point: CrashPoint; at: number };
}

/** What /healthz would answer: null status for a process that is not running (it answers nothing). */
export interface HealthAnswer {
  status: 200 | 503 | null;
  body: unknown;
}

const codecKinds: RecordKind[] = ['rowCompleted', 'groupComplete', 'penalized', 'packed', 'deadLetter', 'metrics'];
type Codecs = { [K in RecordKind]: TopicCodec<K> };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class TopologyTestDriver {
  readonly cluster = new MemoryCluster();
  readonly registry = new MemoryRegistry();
  readonly topics: TopicNames;
  private readonly instances = new Map<string, DriverInstance>();
  private codecs!: Codecs;
  private closed = false;
  private chunkWriters = 0;

  private constructor(
    readonly config: Config,
    readonly stages: readonly PipelineStage[],
  ) {
    this.topics = topicNames(config.topics.prefix);
  }

  /** A driver with every topic of the config created (`partitions` each) and the codecs registered. */
  static async create(o: TopologyDriverOptions): Promise<TopologyTestDriver> {
    const stages = o.stages ?? PIPELINE_STAGES;
    const config: Config = {
      ...o.config,
      topics: { ...o.config.topics, prefix: o.prefix ?? 'ttd.', partitions: o.partitions },
      runtime: { ...o.config.runtime, stages: [...stages] },
    };
    const d = new TopologyTestDriver(config, stages);
    for (const spec of topicSpecs(config)) d.cluster.createTopic(spec.topic, spec.numPartitions);
    const entries = await Promise.all(
      codecKinds.map(async (kind) => {
        const options = kind === 'packed' ? { packedWire: config.pack.wire_dtypes } : {};
        return [kind, await new TopicCodec(kind, subjectOf(d.topics[kind]), d.registry.asClient(), options).init()] as const;
      }),
    );
    d.codecs = Object.fromEntries(entries) as unknown as Codecs;
    retainInstanceHooks();
    return d;
  }

  /**
   * Starts a process named `name` running `startPipeline` on its own
   * connection; resolves once every runner joined its group (or when the
   * instance stopped dead during start-up). A refused start (e.g.
   * `mode_conflict`) rejects with startPipeline's error.
   */
  async startInstance(name: string, o: InstanceOptions = {}): Promise<DriverInstance> {
    if (this.instances.get(name)?.alive) throw new Error(`instance ${name} is already running`);
    const stages = o.stages ?? this.stages;
    const instance = new DriverInstance(name, this.cluster.connect(name), stages, (i, point) => this.crash(i, { at: point }));
    if (o.crashAt) typeof o.crashAt === 'string' ? instance.crashAt(o.crashAt) : instance.crashAt(o.crashAt.point, o.crashAt.at);
    this.instances.set(name, instance);
    const log = {
      info: (m: string) => instance.log('info', m),
      warn: (m: string) => instance.log('warn', m),
      error: (m: string) => instance.log('error', m),
    };
    const starting = instance.run(() =>
      startPipeline({
        config: { ...this.config, runtime: { ...this.config.runtime, stages: [...stages] } },
        configDir: '.',
        stages: [...stages],
        log,
        metricsPort: 0,
        fused: o.fused ?? 'auto',
        faults: o.faults ?? [],
        // The readers the factories apply (createClient, createRowReader): the runtime sees whole records only.
        io: {
          client: () => chunkedClient(instance.connection, chunkReaderOptions(this.config.kafka, this.config.runtime)),
          rowReader: () => new ChunkedOffsetReader(instance.connection.offsetReader(), chunkReaderOptions(this.config.kafka, this.config.runtime)),
          registry: this.registry.asClient(),
        },
      }),
    );
    const outcome = await Promise.race([
      starting.then(
        (pipeline) => ({ pipeline }),
        (error: unknown) => ({ error }),
      ),
      instance.died.then(() => null),
    ]);
    if (outcome === null) return instance;
    if ('error' in outcome) {
      instance.state = 'refused';
      instance.connection.kill();
      throw outcome.error;
    }
    instance.pipeline = outcome.pipeline;
    if (instance.alive) instance.state = 'running';
    void outcome.pipeline.failed.then((e) => (instance.fatal ??= e));
    return instance;
  }

  instance(i: DriverInstance | string): DriverInstance {
    const found = typeof i === 'string' ? this.instances.get(i) : i;
    if (!found) throw new Error(`no instance ${String(i)}`);
    return found;
  }

  /**
   * The instance stops dead (at a crash point, or now): no abort, no leave,
   * no timer fires again. Its group members are removed at once, as a
   * session timeout would, unless `keepSession` (then `expireSession`).
   */
  crash(i: DriverInstance | string, o: { at?: CrashPoint; keepSession?: boolean } = {}): void {
    const instance = this.instance(i);
    if (!instance.alive) return;
    instance.die(o.at ?? 'crash');
    if (!o.keepSession) instance.connection.expireSessions();
  }

  /**
   * A crashed instance's session timed out: its members leave their groups.
   * `unnoticed`: the instance is alive and was only paused past its session
   * timeout; it wakes up not knowing, still fetching its old partitions (a
   * zombie: MemoryGroupSource.expire).
   */
  expireSession(i: DriverInstance | string, o: { unnoticed?: boolean } = {}): void {
    this.instance(i).connection.expireSessions(o);
  }

  /** Graceful stop: the transaction in progress finishes, the instance leaves its groups. */
  async stopInstance(i: DriverInstance | string): Promise<void> {
    const instance = this.instance(i);
    if (!instance.alive) return;
    instance.state = 'stopped';
    await instance.pipeline?.stop();
  }

  /** A new generation of every group with members (or of `groupIds`), the first member moved last, so partitions move. */
  rebalance(groupIds?: string[]): void {
    for (const id of groupIds ?? [...this.cluster.groups.keys()]) if (this.cluster.group(id).members.length > 0) this.cluster.rebalance(id, true);
  }

  /** Writes `values` to the topic of `topic` (non-transactional), keyed as the pipeline keys them; a BatchEnd goes to every partition. */
  produce<K extends RecordKind>(topic: K, values: ReadonlyArray<RecordTypes[K]>): RecordPosition[] {
    return this.cluster.append(this.encoded(topic, values), null);
  }

  /**
   * As `produce`, in one transaction, every value longer than `payloadBytes`
   * as a chunk set (streams/testing/chunk-sets.ts); one position per value
   * (a BatchEnd's: its first partition's).
   */
  async produceChunked<K extends RecordKind>(topic: K, values: ReadonlyArray<RecordTypes[K]>, payloadBytes: number): Promise<SetPosition[]> {
    const sink = this.cluster.transactionalSink(`ttd.chunk-writer.${++this.chunkWriters}`);
    await sink.init();
    try {
      return await writeChunkSets(sink, this.encoded(topic, values), { payloadBytes, partitionsOf: (t) => this.cluster.partitions(t) });
    } finally {
      await sink.close();
    }
  }

  private encoded<K extends RecordKind>(topic: K, values: ReadonlyArray<RecordTypes[K]>): OutgoingRecord[] {
    const name = this.topics[topic];
    const codec = this.codecs[topic] as TopicCodec<K>;
    const records: OutgoingRecord[] = [];
    for (const v of values) {
      const value = codec.encode(v);
      const e = v as RecordTypes['rowCompleted'];
      if (topic === 'rowCompleted' && e.kind === 'batch_end') {
        for (let p = 0; p < this.cluster.partitions(name); p++) records.push({ topic: name, key: e.end.batch_id, value, partition: p });
        continue;
      }
      records.push({ topic: name, key: keyOf(topic, v), value });
    }
    return records;
  }

  /** Writes raw records (e.g. garbage bytes) to a topic of `topics`. */
  produceRaw(topic: keyof TopicNames, records: Array<{ key: string | Buffer | null; value: Buffer | null; partition?: number }>): RecordPosition[] {
    return this.cluster.append(records.map((r) => ({ ...r, topic: this.topics[topic] })), null);
  }

  /** Committed records of a topic (read_committed), in partition-offset order. */
  committedRecords(topic: keyof TopicNames): FetchedRecord[] {
    return this.cluster.committedRecords(this.topics[topic]);
  }

  /** The decoded values of a topic's committed records, in partition-offset order. */
  async committedValues<K extends RecordKind>(topic: K): Promise<Array<RecordTypes[K]>> {
    const codec = this.codecs[topic] as TopicCodec<K>;
    return Promise.all(this.committedRecords(topic).map((r) => codec.decode(r.value!)));
  }

  /** What the instance's /healthz would answer (healthReport over its runners). */
  health(i: DriverInstance | string): HealthAnswer {
    const instance = this.instance(i);
    const p = instance.pipeline;
    if (!p || !instance.alive) return { status: null, body: null };
    const h = healthReport(
      p.runners.map((r) => r.healthState()),
      { stages: p.runners.flatMap((r) => r.stageNames), fused: p.fused },
    );
    return { status: h.ok ? 200 : 503, body: h.detail };
  }

  /**
   * Waits until nothing is left to do: every group of the stages some
   * instance runs has committed past every record of its input, no
   * transaction is open anywhere, and the cluster stayed unchanged for a few
   * polls. Throws naming what is behind after `timeoutMs`, or at once when a
   * running instance failed.
   */
  async runUntilIdle(o: { timeoutMs?: number } = {}): Promise<void> {
    const timeoutMs = o.timeoutMs ?? 10_000;
    const deadline = Date.now() + timeoutMs;
    let lastVersion = -1;
    let quiet = 0;
    for (;;) {
      for (const i of this.instances.values()) {
        if (i.alive && i.fatal) throw new Error(`instance ${i.name} failed: [${i.fatal.code}] ${i.fatal.message}`);
      }
      const behind = this.behind();
      quiet = behind.length === 0 && this.cluster.version === lastVersion ? quiet + 1 : 0;
      if (quiet >= 3) return;
      lastVersion = this.cluster.version;
      if (Date.now() > deadline) {
        const states = [...this.instances.values()].map((i) => `${i.name}: ${i.state}${i.alive ? ` ${JSON.stringify(this.health(i).body)}` : ''}`);
        throw new Error(`not idle after ${timeoutMs} ms: ${behind.join('; ') || 'the cluster kept changing'} (instances: ${states.join('; ')})`);
      }
      await sleep(5);
    }
  }

  /** Waits until `condition()` holds (polling every 5 ms); throws naming `what` after `timeoutMs`. */
  async waitFor(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await sleep(5);
    }
  }

  /** Group and input topic of every stage some instance was started with (batch metrics wherever postprocess runs). */
  private consumed(): Array<{ groupId: string; topic: string }> {
    const names = new Set<string>();
    for (const i of this.instances.values()) for (const s of i.stages) names.add(s);
    if (names.has('postprocess')) names.add('batch-metrics');
    const input: Record<string, string> = {
      accumulate: this.topics.rowCompleted,
      postprocess: this.topics.groupComplete,
      pack: this.topics.penalized,
      'batch-metrics': this.topics.batchProgress,
    };
    return [...names].map((s) => ({ groupId: consumerGroupId(this.config.topics.prefix, s as PipelineStage), topic: input[s]! }));
  }

  /** What keeps the topology from being idle, one line each. */
  private behind(): string[] {
    const c = this.cluster;
    const out: string[] = [];
    for (const { groupId, topic } of this.consumed()) {
      const committed = c.group(groupId).committed;
      for (let p = 0; p < c.partitions(topic); p++) {
        const at = committed.get(`${topic}/${p}`);
        const from = at === undefined ? c.logStartOffset(topic, p) : BigInt(at);
        const next = c.readCommitted(topic, p, from, 1).records[0];
        if (next) out.push(`${groupId} on ${topic}/${p}: committed ${at ?? 'nothing'}, record at ${next.offset}`);
      }
    }
    for (const id of c.openTransactions()) out.push(`transaction ${id} is open`);
    return out;
  }

  /** Stops every running instance gracefully; the driver is done. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await Promise.all([...this.instances.values()].map((i) => this.stopInstance(i)));
    } finally {
      releaseInstanceHooks();
    }
  }

  /** The pipeline of a running instance. */
  pipelineOf(i: DriverInstance | string): RunningPipeline {
    const p = this.instance(i).pipeline;
    if (!p) throw new Error(`instance ${String(i)} has no pipeline (not started, or it died starting)`);
    return p;
  }
}

/** The key the pipeline's writers use: a row's group id, else a record's group id or batch id. */
function keyOf<K extends RecordKind>(topic: K, v: RecordTypes[K]): string | null {
  if (topic === 'rowCompleted') {
    const e = v as RecordTypes['rowCompleted'];
    return e.kind === 'row' ? e.row.group_id : e.kind === 'gym_result' ? e.result.group_id : e.end.batch_id;
  }
  const r = v as { group_id?: string | null; batch_id?: string | null };
  return r.group_id ?? r.batch_id ?? null;
}

/**
 * The stage runner's start-up and crash policy, against a scripted stand-in
 * for kafkajs's consumer (the Kafka behaviour itself is covered by the
 * integration suite's broker-restart tests): transient errors are retried with
 * a fresh consumer, anything else fails start-up, and a crash kafkajs will not
 * recover from gets a new consumer instead of a silent stage; and the lag
 * gauge and stall warning count only this instance's partitions.
 */
import { EventEmitter } from 'node:events';
import type { Kafka } from 'kafkajs';
import { afterEach, describe, expect, test } from 'vitest';
import { RuntimeMetrics } from '../../../streams/runtime/metrics.js';
import { StageRunner } from '../../../streams/runtime/stage-runner.js';
import { KafkajsClient } from '../../../streams/kafka/kafkajs/adapter.js';
import { isTransientKafkaError } from '../../../streams/kafka/kafkajs/errors.js';
import type { Stage } from '../../../streams/api/stage.js';

const EVENTS = { GROUP_JOIN: 'consumer.group_join', CRASH: 'consumer.crash', END_BATCH_PROCESS: 'consumer.end_batch_process' };

class ScriptedConsumer extends EventEmitter {
  readonly events = EVENTS;
  disconnected = false;
  ran = false;
  constructor(private readonly runResult: () => Promise<void>) {
    super();
  }
  async connect() {}
  async subscribe() {}
  async run() {
    await this.runResult();
    this.ran = true;
    // kafkajs's run resolves once the member joined, after GROUP_JOIN.
    this.emit(EVENTS.GROUP_JOIN, { payload: { memberAssignment: {} } });
  }
  async disconnect() {
    this.disconnected = true;
  }
  crash(error: Error, restart: boolean) {
    this.emit(EVENTS.CRASH, { payload: { error, restart } });
  }
}

function kafkaError(name: string, message: string, retriable: boolean): Error {
  return Object.assign(new Error(message), { name, retriable });
}

const COORDINATOR_LOADING = () => kafkaError('KafkaJSProtocolError', "The coordinator is loading and hence can't process requests", true);
const NOT_AUTHORIZED = () => kafkaError('KafkaJSProtocolError', 'Not authorized to access topics: [Topic authorization failed]', false);

let runner: StageRunner | undefined;
afterEach(async () => {
  await runner?.stop();
  runner = undefined;
});

/** Four input partitions, each 10 records behind its committed offset. */
const BACKLOG = {
  fetchTopicOffsets: async () => [0, 1, 2, 3].map((partition) => ({ partition, low: '0', high: '20', offset: '20' })),
  fetchOffsets: async () => [{ topic: 't.in', partitions: [0, 1, 2, 3].map((partition) => ({ partition, offset: '10' })) }],
};

function setup(runResults: Array<() => Promise<void>>, admin: Record<string, unknown> = {}) {
  const consumers: ScriptedConsumer[] = [];
  const logs: string[] = [];
  const kafka = {
    consumer: () => {
      const c = new ScriptedConsumer(runResults[Math.min(consumers.length, runResults.length - 1)]!);
      consumers.push(c);
      return c;
    },
    admin: () => ({
      connect: async () => undefined,
      disconnect: async () => undefined,
      fetchTopicOffsets: async () => {
        throw new Error('no broker in this test');
      },
      ...admin,
    }),
  } as unknown as Kafka;
  const metrics = new RuntimeMetrics();
  const log = { info: (m: string) => logs.push(`info ${m}`), warn: (m: string) => logs.push(`warn ${m}`), error: (m: string) => logs.push(`error ${m}`) };
  runner = new StageRunner({
    client: new KafkajsClient(kafka),
    reader: { read: async () => new Map(), close: async () => undefined },
    stage: { name: 'pack', inputTopic: 't.in', outputTopics: [], createProcessor: () => ({ process: async () => ({ messages: [], deadLetters: [], changelog: [] }) }) } as unknown as Stage,
    groupId: 'g',
    deadLetterTopic: 't.dl',
    deadLetterCodec: {} as never,
    maxMessageBytes: 1 << 20,
    maxInflightBytes: 1 << 24,
    transactionTimeoutMs: 60_000,
    sessionTimeoutMs: 30_000,
    stallWarnMs: 1_000,
    metrics,
    log,
  });
  return { consumers, logs, runner, metrics };
}

describe('stage runner start-up', () => {
  test('a transient failure to join is retried with a new consumer until it works', async () => {
    const { consumers, logs, runner } = setup([() => Promise.reject(COORDINATOR_LOADING()), () => Promise.reject(COORDINATOR_LOADING()), async () => undefined]);
    await runner.start();
    expect(consumers).toHaveLength(3);
    expect(consumers.map((c) => [c.ran, c.disconnected])).toEqual([[false, true], [false, true], [true, false]]);
    expect(logs.filter((l) => l.startsWith('warn'))).toEqual([
      "warn pack: start-up failed (attempt 1): joining group g: The coordinator is loading and hence can't process requests; retrying in 1 s",
      "warn pack: start-up failed (attempt 2): joining group g: The coordinator is loading and hence can't process requests; retrying in 2 s",
    ]);
    expect(logs).toContain('info pack: start-up succeeded on attempt 3');
  }, 10_000);

  test('a failure that is not transient stops start-up at once', async () => {
    const { consumers, runner } = setup([() => Promise.reject(NOT_AUTHORIZED())]);
    await expect(runner.start()).rejects.toThrow(/Not authorized/);
    expect(consumers[0]!.disconnected).toBe(true);
  });

  test('a crash kafkajs restarts itself is left to kafkajs; one it gives up on gets a new consumer', async () => {
    const { consumers, logs, runner } = setup([async () => undefined]);
    await runner.start();
    consumers[0]!.crash(COORDINATOR_LOADING(), true);
    await new Promise((r) => setTimeout(r, 50));
    expect(consumers).toHaveLength(1);
    expect(logs).toContain("error pack: consumer crashed: The coordinator is loading and hence can't process requests; the client restarts it");
    consumers[0]!.crash(NOT_AUTHORIZED(), false);
    await new Promise((r) => setTimeout(r, 50));
    expect(consumers).toHaveLength(2);
    expect(consumers[1]!.ran).toBe(true);
    expect(logs.some((l) => l.includes('the client will not restart it'))).toBe(true);
    // Events of the replaced consumer are ignored.
    consumers[0]!.crash(NOT_AUTHORIZED(), false);
    await new Promise((r) => setTimeout(r, 50));
    expect(consumers).toHaveLength(2);
  });

  test('a new consumer after a lost membership that cannot join for a non-transient reason is fatal, not retried forever', { timeout: 10_000 }, async () => {
    const { consumers, logs, runner } = setup([async () => undefined, () => Promise.reject(NOT_AUTHORIZED())]);
    await runner.start();
    consumers[0]!.crash(NOT_AUTHORIZED(), false);
    await new Promise((r) => setTimeout(r, 1_500));
    const made = consumers.length;
    await new Promise((r) => setTimeout(r, 2_500)); // a retry would have come after 1 s, then 2 s
    expect(consumers).toHaveLength(made);
    expect(consumers.filter((c) => c.ran)).toEqual([consumers[0]]);
    expect(runner.healthState()).toMatchObject({ runner: 'pack', state: 'failed', reason: expect.stringMatching(/^\[authorization_failed\] /) });
    expect(logs.filter((l) => l.startsWith('error pack: fatal'))).toEqual([
      expect.stringMatching(/^error pack: fatal \[authorization_failed\]: joining group g: Not authorized/),
    ]);
  });

  test.each([
    [COORDINATOR_LOADING(), true],
    [NOT_AUTHORIZED(), false],
    [kafkaError('KafkaJSNumberOfRetriesExceeded', 'retries exceeded', false), true],
    [Object.assign(kafkaError('KafkaJSNonRetriableError', 'wrapped', false), { cause: kafkaError('KafkaJSConnectionError', 'Connection error: ECONNREFUSED', true) }), true],
    [new TypeError('x is undefined'), false],
  ])('isTransientKafkaError(%s) is %s', (e, want) => {
    expect(isTransientKafkaError(e)).toBe(want);
  });
});

describe('stage runner lag and stall checks', () => {
  test('count only the partitions assigned to this instance', async () => {
    const { consumers, logs, runner, metrics } = setup([async () => undefined], BACKLOG);
    await runner.start();
    // This instance owns 2 of the group's 4 partitions; another instance owns the rest.
    consumers[0]!.emit(EVENTS.GROUP_JOIN, { payload: { memberAssignment: { 't.in': [0, 1] } } });
    await new Promise((r) => setTimeout(r, 5_600)); // the lag check runs every 5 s
    const lag = (await metrics.consumerLag.get()).values.find((v) => v.labels.stage === 'pack')?.value;
    expect(lag).toBe(20);
    expect(logs.filter((l) => l.includes('input records behind'))).toEqual([
      expect.stringMatching(/^warn pack: 20 input records behind and nothing committed for \d+ s \(assigned partitions \[0,1\]/),
    ]);
  }, 15_000);

  test('partitions read to their end with nothing to hand out (aborted records, markers) count as lag but not as a stall', async () => {
    const { consumers, logs, runner, metrics } = setup([async () => undefined], BACKLOG);
    await runner.start();
    consumers[0]!.emit(EVENTS.GROUP_JOIN, { payload: { memberAssignment: { 't.in': [0, 1] } } });
    // kafkajs skipped offsets 10..19 of both partitions without calling eachBatch: all aborted.
    for (const partition of [0, 1]) {
      consumers[0]!.emit(EVENTS.END_BATCH_PROCESS, { payload: { topic: 't.in', partition, batchSize: 0, firstOffset: null, lastOffset: '19' } });
    }
    await new Promise((r) => setTimeout(r, 5_600));
    expect((await metrics.consumerLag.get()).values.find((v) => v.labels.stage === 'pack')?.value).toBe(20);
    expect(logs.filter((l) => l.includes('input records behind'))).toEqual([]);
    expect(runner.healthState().state).not.toBe('stalled');
  }, 15_000);

  test('an instance with no partitions reports no lag and no stall, whatever the group is behind', async () => {
    const { consumers, logs, runner, metrics } = setup([async () => undefined], BACKLOG);
    await runner.start();
    consumers[0]!.emit(EVENTS.GROUP_JOIN, { payload: { memberAssignment: {} } });
    await new Promise((r) => setTimeout(r, 5_600));
    expect((await metrics.consumerLag.get()).values.find((v) => v.labels.stage === 'pack')?.value).toBe(0);
    expect(logs.filter((l) => l.includes('input records behind'))).toEqual([]);
  }, 15_000);
});

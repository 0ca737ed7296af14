/**
 * bench/log-sizes.ts, the pure part: LogDirsCommand's answer read back into
 * one size per partition (topic names with dashes and dots, every broker's
 * replica, the leader's counted), and the bytes written between two
 * snapshots.
 */
import { describe, expect, test } from 'vitest';
import { growthByTopic, leaderSizes, parseLogDirs, splitPartitionName } from '../../../bench/log-sizes.js';

const T = 'bench.1a2b-3c4d.rollout.row-completed';
const C = 'bench.1a2b-3c4d.rollout-stream.accumulate-changelog';

/** What the tool prints: log lines, two progress lines, then one JSON line. */
function output(brokers: Array<{ broker: number; dirs: Array<{ error?: string; partitions: Array<[string, number, boolean?]> }> }>): string {
  const json = {
    brokers: brokers.map((b) => ({
      broker: b.broker,
      logDirs: b.dirs.map((d, i) => ({
        partitions: d.partitions.map(([partition, size, isFuture]) => ({ partition, size, offsetLag: 0, isFuture: isFuture ?? false })),
        error: d.error ?? null,
        logDir: `/data/${b.broker}/${i}`,
      })),
    })),
    version: 1,
  };
  return `[main] INFO org.apache.kafka.common.config.AbstractConfig - AdminClientConfig values:\n\tbootstrap.servers = [127.0.0.1:9092]\nQuerying brokers for log directories information\nReceived log directory information from brokers 1,2\n${JSON.stringify(json)}\n`;
}

describe('log sizes', () => {
  test('a <topic>-<partition> name splits at its last dash, so topic names keep theirs', () => {
    expect(splitPartitionName(`${T}-11`)).toEqual({ topic: T, partition: 11 });
    expect(splitPartitionName(`${C}-0`)).toEqual({ topic: C, partition: 0 });
    expect(splitPartitionName('a-b-c-3')).toEqual({ topic: 'a-b-c', partition: 3 });
    expect(() => splitPartitionName('row-completed')).toThrow(/not a <topic>-<partition> name/);
  });

  test("every broker's replica is read from the JSON line, over several log dirs, leaving out a future replica", () => {
    const sizes = parseLogDirs(
      output([
        { broker: 1, dirs: [{ partitions: [[`${T}-0`, 100], [`${T}-1`, 0]] }, { partitions: [[`${C}-0`, 7], [`${T}-1`, 999, true]] }] },
        { broker: 2, dirs: [{ partitions: [[`${T}-0`, 90], [`${T}-1`, 5]] }] },
      ]),
    );
    expect([...sizes.keys()].sort()).toEqual([T, C].sort());
    expect(sizes.get(T)!.get(0)).toEqual(new Map([[1, 100], [2, 90]]));
    expect(sizes.get(T)!.get(1)).toEqual(new Map([[1, 0], [2, 5]]));
    expect(sizes.get(C)!.get(0)).toEqual(new Map([[1, 7]]));
  });

  test('a log dir reporting an error, or output without the JSON line, throws naming it', () => {
    expect(() => parseLogDirs(output([{ broker: 3, dirs: [{ error: 'KafkaStorageException', partitions: [] }] }]))).toThrow(/broker 3's log dir \/data\/3\/0: KafkaStorageException/);
    expect(() => parseLogDirs('Querying brokers for log directories information\n')).toThrow(/no log-dir description/);
  });

  test("each partition is counted once: its leader's copy, or the largest replica where the leader did not answer", () => {
    const replicas = parseLogDirs(
      output([
        { broker: 1, dirs: [{ partitions: [[`${T}-0`, 100], [`${T}-1`, 40]] }] },
        { broker: 2, dirs: [{ partitions: [[`${T}-0`, 90], [`${T}-1`, 50], [`${T}-2`, 30]] }] },
      ]),
    );
    const leaders: Record<number, number> = { 0: 2, 1: 1, 2: 3 };
    expect(leaderSizes(replicas, (_t, p) => leaders[p])).toEqual(new Map([[T, new Map([[0, 90], [1, 40], [2, 30]])]]));
    expect(leaderSizes(replicas, () => undefined).get(T)).toEqual(new Map([[0, 100], [1, 50], [2, 30]]));
  });

  test('bytes written per topic are the growth of its partitions, one absent before counting from zero', () => {
    const before = new Map([[T, new Map([[0, 10], [1, 0]])]]);
    const after = new Map([
      [T, new Map([[0, 110], [1, 50], [2, 5]])],
      [C, new Map([[0, 7]])],
    ]);
    expect(growthByTopic(before, after)).toEqual(new Map([[T, 155], [C, 7]]));
  });
});

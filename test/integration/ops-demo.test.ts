import { describe, expect, test } from 'vitest';
import { launcher } from './launcher.js';
import { createKafka } from '../../streams/kafka/kafkajs/client.js';
import { loadConfig } from '../../config/load.js';



describe('the demo command', () => {
  test('a shortened demo runs the pipeline end to end, prints the summary and a group decoded by the Python client, and removes its topics', async () => {
    const run = await launcher(['demo', '--batches', '1', '--groups', '4', '--profile', 'small']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const prefix = /prefix '(demo\.[0-9a-f]{8}\.)'/.exec(run.stdout)?.[1];
    expect(prefix).toBeDefined();

    expect(run.stdout).toContain('demo summary');
    expect(run.stdout).toMatch(/accumulate\s+\d+\s+\d+ rollout\.group-complete/);
    expect(run.stdout).toMatch(/pack\s+\d+\s+\d+ rollout\.packed/);
    expect(run.stdout).toMatch(/packed\s+(\d+) of \1 expected groups/);
    expect(run.stdout).toMatch(/latency\s+last row produced → packed: p50 \d+ ms, p99 \d+ ms/);
    expect(run.stdout).toMatch(/throughput\s+[\d.k]+ rows\/s/);

    const decoded = /packed group (\S+) decoded by the Python client[^\n]*\n([\s\S]*)/.exec(run.stdout);
    expect(decoded).not.toBeNull();
    expect(decoded![2]).toContain(`group_id: ${decoded![1]}`);
    expect(decoded![2]).toMatch(/input_ids: jagged \[4, j\]/);
    expect(decoded![2]).toContain(`${decoded![1]}_g3: {`);

    const admin = createKafka(loadConfig({ file: undefined }).config.kafka, 'test-demo').admin();
    await admin.connect();
    // Deletion reaches the metadata shortly after the demo exits.
    let left: string[] = [];
    for (let i = 0; i < 20; i++) {
      left = (await admin.listTopics()).filter((t) => t.startsWith(prefix!));
      if (left.length === 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    await admin.disconnect();
    expect(left).toEqual([]);
  });
});

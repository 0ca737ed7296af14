/**
 * kafkajs can write one partition's records twice in one send when a
 * partition moves between brokers during the send's retries (found on the
 * three-broker cluster, test/cluster/registry-outage.test.ts on a freshly
 * started cluster: the same records twice in one transaction, consecutive
 * sequence numbers). Its answer then names that partition twice; the sink
 * refuses such a send so the transaction is aborted, both copies with it.
 */
import { describe, expect, test } from 'vitest';
import { RolloutStreamError } from '../../../errors/index.js';
import { sendPlaced } from '../../../streams/kafka/kafkajs/sink.js';

const options = { partitionsOf: async () => 4 };
const records = [
  { topic: 't', partition: 1, key: 'a', value: Buffer.from('1') },
  { topic: 't', partition: 1, key: 'b', value: Buffer.from('2') },
  { topic: 't', partition: 2, key: 'c', value: Buffer.from('3') },
];

describe('the transactional sink and the answers of a send', () => {
  test('one answer per partition maps back to each record, in input order', async () => {
    const positions = await sendPlaced(async () => [
      { topicName: 't', partition: 2, baseOffset: '7' },
      { topicName: 't', partition: 1, baseOffset: '40' },
    ], records, options);
    expect(positions.map((p) => `${p.partition}@${p.offset}`)).toEqual(['1@40', '1@41', '2@7']);
  });

  test('a partition answered twice (written twice) refuses the send as an unknown outcome', async () => {
    const err = await sendPlaced(async () => [
      { topicName: 't', partition: 1, baseOffset: '40' },
      { topicName: 't', partition: 2, baseOffset: '7' },
      { topicName: 't', partition: 1, baseOffset: '42' },
    ], records, options).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RolloutStreamError);
    expect((err as RolloutStreamError).code).toBe('transaction_outcome_unknown');
    expect((err as Error).message).toMatch(/t\/1 were written twice by one send/);
  });

  test('a partition not answered at all refuses the send too', async () => {
    const err = await sendPlaced(async () => [{ topicName: 't', partition: 1, baseOffset: '40' }], records, options).catch((e: unknown) => e);
    expect((err as RolloutStreamError).code).toBe('transaction_outcome_unknown');
  });
});

import { createRequire } from 'node:module';
import { describe, expect, test } from 'vitest';
import { murmur2, partitionForKey } from '../../../streams/topics/partitioner.js';

const require = createRequire(import.meta.url);
const kafkajsMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2.js') as (key: string | Buffer) => number;

describe('partition computation', () => {
  test('murmur2 equals the Java client on the vectors of Kafka UtilsTest', () => {
    const vectors: Array<[string, number]> = [
      ['21', -973932308],
      ['foobar', -790332482],
      ['a-little-bit-long-string', -985981536],
      ['a-little-bit-longer-string', -1486304829],
      ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
      ['abc', 479470107],
    ];
    for (const [key, hash] of vectors) expect(murmur2(key), key).toBe(hash);
  });

  test('murmur2 equals kafkajs on group ids of every length, multi-byte characters included', () => {
    for (let i = 0; i < 2000; i++) {
      const key = `lg${i}-b${String(i % 97).padStart(6, '0')}-g${i % 13}${'é✓'.repeat(i % 3)}`.slice(0, 1 + (i % 40));
      expect(murmur2(key), key).toBe(kafkajsMurmur2(key));
    }
  });

  test('a key lands where the kafkajs default partitioner puts it', async () => {
    const { Partitioners } = (await import('kafkajs')) as unknown as {
      Partitioners: { DefaultPartitioner: () => (a: { topic: string; partitionMetadata: Array<{ partitionId: number; leader: number }>; message: { key: string } }) => number };
    };
    const partitioner = Partitioners.DefaultPartitioner();
    for (const n of [1, 3, 4, 12]) {
      const partitionMetadata = Array.from({ length: n }, (_, partitionId) => ({ partitionId, leader: 0 }));
      for (let i = 0; i < 200; i++) {
        const key = `demo-1a2b-b000001-g${String(i).padStart(4, '0')}`;
        expect(partitionForKey(key, n)).toBe(partitioner({ topic: 't', partitionMetadata, message: { key } }));
      }
    }
  });

  test('a partition count below one is refused', () => {
    expect(() => partitionForKey('x', 0)).toThrow(RangeError);
  });
});

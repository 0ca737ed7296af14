/**
 * Which partition a keyed record lands in, computed the way our producers
 * place it: kafkajs 2.x's DefaultPartitioner (the Java client's murmur2,
 * `toPositive(murmur2(key)) % partitions`). `trace` uses it to read one
 * partition per topic instead of all of them. Pure; no Kafka here.
 */

const SEED = 0x9747b28c;
const M = 0x5bd1e995;

/**
 * Kafka's murmur2 of `key` as a signed 32-bit integer (the Java client's
 * `Utils.murmur2`, which kafkajs reimplements). A string key is hashed as
 * its UTF-8 bytes.
 */
export function murmur2(key: string | Uint8Array): number {
  const data = typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
  const length = data.length;
  let h = (SEED ^ length) | 0;
  const length4 = length >>> 2;
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4;
    let k = data[i4]! | (data[i4 + 1]! << 8) | (data[i4 + 2]! << 16) | (data[i4 + 3]! << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  const tail = length & ~3;
  const rest = length % 4;
  if (rest === 3) h ^= data[tail + 2]! << 16;
  if (rest >= 2) h ^= data[tail + 1]! << 8;
  if (rest >= 1) {
    h ^= data[tail]!;
    h = Math.imul(h, M);
  }
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/** The partition (of `numPartitions`) a record with `key` is written to by the default partitioner. */
export function partitionForKey(key: string | Uint8Array, numPartitions: number): number {
  if (!Number.isInteger(numPartitions) || numPartitions < 1) throw new RangeError(`numPartitions must be a positive integer, got ${numPartitions}`);
  return (murmur2(key) & 0x7fffffff) % numPartitions;
}

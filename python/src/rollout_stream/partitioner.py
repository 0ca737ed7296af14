"""Which partition a keyed ``rollout.row-completed`` record goes to (SPEC §2.2).

Every publisher, in either language, must send a group's rows to the same
partition, so the partition is computed here the way Kafka's Java client
(and kafkajs, and ``streams/topics/partitioner.ts``) does it: murmur2 of the key's
UTF-8 bytes, sign bit cleared, modulo the partition count. librdkafka's
default partitioner (``consistent_random``, CRC32) would disagree, which is
why the publisher passes the partition to ``produce()`` explicitly.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's murmur2 of ``data`` as a signed 32-bit integer.

    Bit for bit the Java client's ``Utils.murmur2``: unsigned 32-bit
    arithmetic here, the result reinterpreted as a Java ``int`` at the end.
    """
    b = bytes(data)
    length = len(b)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(b[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= b[whole + 2] << 16
    if rest >= 2:
        h ^= b[whole + 1] << 8
    if rest >= 1:
        h ^= b[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: str | bytes, num_partitions: int) -> int:
    """The partition (of ``num_partitions``) the Java client's default partitioner picks for ``key``.

    Args:
        key: The record key; a ``str`` is hashed as its UTF-8 bytes.
        num_partitions: The topic's partition count (>= 1).

    Raises:
        ValueError: ``num_partitions`` is not a positive integer.
        UnicodeEncodeError: ``key`` holds a lone surrogate (not encodable as UTF-8).
    """
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
        raise ValueError(f"num_partitions must be a positive integer, got {num_partitions!r}")
    data = key.encode("utf-8") if isinstance(key, str) else key
    return (murmur2(data) & 0x7FFFFFFF) % num_partitions

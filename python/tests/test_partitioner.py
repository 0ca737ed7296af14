"""The partitioner agrees with Kafka's Java client, so Python and TypeScript rows of a group meet."""

from __future__ import annotations

import pytest

from rollout_stream.partitioner import murmur2, partition_for_key

# Apache Kafka's own expectations for Utils.murmur2 (clients/src/test/java/.../utils/UtilsTest.java,
# testMurmur2): what the Java producer computes for these keys.
KAFKA_UTILS_TEST = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize("key,expected", KAFKA_UTILS_TEST)
def test_murmur2_gives_what_kafkas_java_client_gives(key, expected):
    assert murmur2(key) == expected


def test_murmur2_is_a_signed_32_bit_int_for_every_tail_length():
    for n in range(0, 40):
        h = murmur2(bytes(range(n)))
        assert -(2**31) <= h < 2**31


# What streams/topics/partitioner.ts (kafkajs's DefaultPartitioner arithmetic) computed for these keys,
# multi-byte UTF-8 and the empty key included: [murmur2, partitions for n = 1, 3, 4, 12, 64].
TYPESCRIPT = {
    "vec-group/ü-2": (-672532266, [0, 2, 2, 2, 22]),
    "py-group/é-1": (250844018, [0, 2, 2, 2, 50]),
    "g-0": (753332672, [0, 2, 0, 8, 0]),
    "batch-7/g3": (1097316102, [0, 0, 2, 6, 6]),
    "日本語": (1431860170, [0, 1, 2, 10, 10]),
    "": (275646681, [0, 0, 1, 9, 25]),
}


@pytest.mark.parametrize("key", list(TYPESCRIPT))
def test_a_string_key_lands_where_the_typescript_publisher_puts_it(key):
    h, parts = TYPESCRIPT[key]
    assert murmur2(key.encode("utf-8")) == h
    assert [partition_for_key(key, n) for n in (1, 3, 4, 12, 64)] == parts


def test_the_sign_bit_is_cleared_not_the_absolute_value_taken():
    # murmur2("21") = -973932308: Java's toPositive gives 1173551340, abs() would give 973932308.
    assert partition_for_key(b"21", 2**31 - 1) == 1173551340


def test_str_and_utf8_bytes_keys_agree():
    assert partition_for_key("grüße", 7) == partition_for_key("grüße".encode(), 7)


@pytest.mark.parametrize("n", [0, -1, 2.0, True])
def test_a_partition_count_that_is_not_a_positive_int_is_refused(n):
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key("k", n)

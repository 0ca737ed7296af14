"""The publisher's chunk path without a broker: which records become chunk sets, where they
go, how they are counted, and the ceiling (the broker-side behaviour is in
test_publisher_chunks_kafka.py)."""

from __future__ import annotations

import pytest
from fake_producer import FakeProducer
from test_publisher_validation import good_row

from rollout_stream import RolloutPublisher, partition_for_key
from rollout_stream.chunk_producer import ChunkProducer, chunk_budget, producer_settings
from rollout_stream.errors import RecordTooLargeError


class FakeChunks:
    transactional_id = "fake"

    def __init__(self, limit: int) -> None:
        self.limit, self.sent = limit, []

    def budget(self, key, headers=None):
        return chunk_budget(self.limit, key, headers)

    def send(self, key, value, partition, headers=None):
        self.sent.append((key, len(value), partition))
        return -(-len(value) // self.budget(key))

    def close(self):
        pass


def test_a_row_above_the_topic_limit_goes_to_its_key_s_partition_as_one_chunk_set_counted_once():
    import numpy as np

    fake, chunks = FakeProducer(partitions=3), FakeChunks(64 * 1024)
    pub = RolloutPublisher(producer=fake, schema_id=1, topic_prefix="", chunk_producer=chunks, max_message_bytes=64 * 1024)
    big = good_row() | {"group_id": "g-big"}
    big["message_log"][1]["routed_experts"] = np.zeros((2, 200, 100), np.int16)  # 80 KB > 64 KiB
    p = pub.publish_row(big)
    pub.publish_row(good_row() | {"group_id": "g-small"})
    pub.flush()
    assert p == partition_for_key("g-big", 3)
    assert [(k, part) for k, _, part in chunks.sent] == [(b"g-big", p)]
    assert [x.key for x in fake.produced] == [b"g-small"], "only the small row went through the idempotent producer"
    s = pub.stats
    assert (s.records, s.rows, s.chunk_sets, s.delivered) == (2, 2, 1, 2) and s.chunks == 2
    assert s.per_partition[p] >= 1


def test_the_chunk_budget_leaves_room_for_framing_and_is_a_multiple_of_64():
    b = chunk_budget(1024 * 1024, b"group-key", [("batch_id", b"b1")])
    assert b % 64 == 0 and b + 48 + len(b"group-key") + 61 + 32 + 1024 <= 1024 * 1024
    assert chunk_budget(1024 * 1024, b"k" * 1000) < b


def test_the_chunk_producer_keeps_one_chunk_per_batch_and_is_transactional():
    conf = producer_settings("127.0.0.1:1", 1024 * 1024, "tid-1", {"linger.ms": 50, "sasl.username": "u"})
    assert conf["batch.size"] == 1024 * 1024 and conf["message.max.bytes"] == 2 * 1024 * 1024
    assert conf["transactional.id"] == "tid-1" and conf["enable.idempotence"] is True and conf["sasl.username"] == "u"


def test_a_value_above_the_ceiling_is_record_too_large_before_anything_is_sent():
    cp = ChunkProducer("t", "127.0.0.1:1", 1024 * 1024, max_value_bytes=4096)
    with pytest.raises(RecordTooLargeError, match="above the ceiling of 4096") as e:
        cp.send(b"k", b"x" * 4097, 0)
    assert e.value.code == "record_too_large" and cp._producer is None
    assert cp.transactional_id.startswith("rollout-stream.publisher.")

"""Failed committed-offset lookups inside a real rebalance (broker and registry), injected in the client.

``PackedConsumer._client_class`` is swapped for a ``confluent_kafka.Consumer``
subclass whose ``committed`` fails a set number of times: librdkafka's own
assignment callback then hits the failure, as it would when the group
coordinator does not answer.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException

from builders import versioned_group
from kafka_helpers import committed_offsets, headers_for, packed_value, produce
from rollout_stream import OffsetLookupError, PackedConsumer, feed

pytestmark = pytest.mark.integration


def failing_consumer(times: int) -> type[PackedConsumer]:
    """A PackedConsumer whose client's first ``times`` committed-offset lookups fail (``-1``: every one)."""
    left = {"n": times}

    class FailingClient(Consumer):
        def committed(self, partitions, timeout=None):
            if left["n"]:
                left["n"] -= 1
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "coordinator did not answer (injected)"))
            return super().committed(partitions, timeout=timeout)

    class Failing(PackedConsumer):
        _client_class = FailingClient

    Failing.left = left  # type: ignore[attr-defined]
    return Failing


def publish(kafka_env, packed_schema, topic, schema_id, n, partitions):
    recs = [versioned_group(f"g{i}", 1) for i in range(n)]
    produce(kafka_env.brokers, topic, [(r["group_id"], packed_value(schema_id, packed_schema, r), headers_for(r), i % partitions)
                                       for i, r in enumerate(recs)])


def make(cls, kafka_env, topic, group_id, **kw) -> PackedConsumer:
    return cls(topic, group_id, kafka_env.brokers, kafka_env.registry_url, jagged="numpy", instance_id=False, **kw)


def test_a_committed_lookup_that_fails_twice_is_retried_and_resumes_at_the_committed_offsets(kafka_env, packed_topics, packed_schema):
    topic, schema_id = packed_topics(partitions=2)
    publish(kafka_env, packed_schema, topic, schema_id, 12, 2)  # g0,g2,..@p0; g1,g3,..@p1
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    with make(PackedConsumer, kafka_env, topic, group_id) as c:
        feed(c, lambda *a: None, stop_after=12, poll_timeout=0.5, idle_timeout=20)
        c.commit({topic: {"0": 2, "1": 3}})  # as if only these were trained
    cls = failing_consumer(2)
    got: list[str] = []
    with make(cls, kafka_env, topic, group_id, offset_lookup_timeout=20) as c:
        feed(c, lambda s, f, t: got.append(t[0]["group_id"]), poll_timeout=0.5, idle_timeout=3)
        assert c.position() == {topic: {"0": 6, "1": 6}}
    assert cls.left["n"] == 0  # both failures were hit, inside the assignment callback
    assert sorted(got) == sorted(["g4", "g6", "g8", "g10", "g7", "g9", "g11"])


def test_a_committed_lookup_that_keeps_failing_fails_poll_and_feed_reads_nothing_and_loses_nothing(
    kafka_env, packed_topics, packed_schema
):
    topic, schema_id = packed_topics(partitions=2)
    publish(kafka_env, packed_schema, topic, schema_id, 6, 2)
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    got: list[str] = []
    c = make(failing_consumer(-1), kafka_env, topic, group_id, offset_lookup_timeout=1.5)
    try:
        with pytest.raises(OffsetLookupError) as info:
            feed(c, lambda s, f, t: got.append(t[0]["group_id"]), poll_timeout=0.5, idle_timeout=20)
        e = info.value
        assert e.partitions == [(topic, 0), (topic, 1)] and e.code == "offset_lookup"
        assert f"{topic}[0], {topic}[1]" in str(e) and "coordinator did not answer (injected)" in str(e)
        assert isinstance(e.__cause__, KafkaException)
        with pytest.raises(OffsetLookupError):  # every poll after it too
            c.poll_record(0.5)
        assert got == [] and c.assigned() == [] and c._consumer.assignment() == []  # not read at a guessed offset
    finally:
        c.close()
    assert committed_offsets(kafka_env.brokers, group_id, topic, 2) == {}
    with make(PackedConsumer, kafka_env, topic, group_id) as c:  # a new consumer: nothing was lost
        feed(c, lambda s, f, t: got.append(t[0]["group_id"]), poll_timeout=0.5, idle_timeout=3)
    assert sorted(got) == sorted(f"g{i}" for i in range(6))

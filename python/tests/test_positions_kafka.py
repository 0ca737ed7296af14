"""SPEC §6.1 pieces on the real broker: position(), commit modes, start_offsets across a rebalance."""

from __future__ import annotations

import time
import uuid

import pytest

from builders import versioned_group
from kafka_helpers import committed_offsets, headers_for, packed_value, produce
from rollout_stream import PackedConsumer, feed

pytestmark = pytest.mark.integration


def publish(kafka_env, packed_schema, topic, schema_id, n, partitions):
    recs = [versioned_group(f"g{i}", 1) for i in range(n)]
    produce(kafka_env.brokers, topic, [(r["group_id"], packed_value(schema_id, packed_schema, r), headers_for(r), i % partitions)
                                       for i, r in enumerate(recs)])


def consumer(kafka_env, topic, group_id, **kw):
    return PackedConsumer(topic, group_id, kafka_env.brokers, kafka_env.registry_url, jagged="numpy", **kw)


def test_on_checkpoint_commits_nothing_until_commit_is_called_with_the_saved_position(kafka_env, packed_topics, packed_schema):
    topic, schema_id = packed_topics()
    publish(kafka_env, packed_schema, topic, schema_id, 8, 1)
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    with consumer(kafka_env, topic, group_id, commit="on_checkpoint") as c:
        stats = feed(c, lambda *a: None, stop_after=6, poll_timeout=0.5, idle_timeout=20)
        saved = c.position()
        assert saved == {topic: {"0": 6}} and stats.committed == {} and stats.done == {(topic, 0): 6}
        assert committed_offsets(kafka_env.brokers, group_id, topic, 1) == {}
        feed(c, lambda *a: None, stop_after=2, poll_timeout=0.5, idle_timeout=20)
        c.commit(saved)  # the checkpoint holding offset 6 is durable; 7 and 8 are not checkpointed yet
        assert committed_offsets(kafka_env.brokers, group_id, topic, 1) == {(topic, 0): 6}
        assert c.position() == {topic: {"0": 8}} and c.committed() == saved


def test_start_offsets_resume_exactly_there_whatever_the_group_committed(kafka_env, packed_topics, packed_schema):
    topic, schema_id = packed_topics()
    publish(kafka_env, packed_schema, topic, schema_id, 8, 1)
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    with consumer(kafka_env, topic, group_id) as c:
        feed(c, lambda *a: None, stop_after=8, poll_timeout=0.5, idle_timeout=20)
    assert committed_offsets(kafka_env.brokers, group_id, topic, 1) == {(topic, 0): 8}
    got = []
    with consumer(kafka_env, topic, group_id, start_offsets={topic: {"0": 3}}, commit="on_checkpoint") as c:
        feed(c, lambda s, f, t: got.append(t[0]["group_id"]), poll_timeout=0.5, idle_timeout=3)
    assert got == [f"g{i}" for i in range(3, 8)]  # an older checkpoint replays from its own position


def test_a_partition_assigned_later_by_a_rebalance_starts_at_its_saved_offset(kafka_env, packed_topics, packed_schema):
    topic, schema_id = packed_topics(partitions=2)
    publish(kafka_env, packed_schema, topic, schema_id, 12, 2)  # g0,g2,..@p0; g1,g3,..@p1: 6 each
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    other = consumer(kafka_env, topic, group_id)  # holds one partition first, commits it to the end
    try:
        feed(other, lambda *a: None, stop_after=12, poll_timeout=0.3, idle_timeout=3)
        saved = {topic: {"0": 2, "1": 4}}
        revoked = []
        with consumer(kafka_env, topic, group_id, start_offsets=saved, commit="on_checkpoint",
                      on_revoke=lambda c, parts: revoked.append(parts)) as c:
            got = []
            deadline = time.monotonic() + 30
            while not c.assigned() and time.monotonic() < deadline:  # the rebalance: each gets one partition
                feed(c, lambda s, f, t: got.append(t[0]["group_id"]), poll_timeout=0.1, idle_timeout=0.1)
                feed(other, lambda *a: None, poll_timeout=0.1, idle_timeout=0.1)
            first = c.assigned()
            assert len(first) == 1, first
            other.close()  # leaves: the second rebalance hands its partition over
            feed(c, lambda s, f, t: got.append(t[0]["group_id"]), poll_timeout=0.3, idle_timeout=8)
            assert c.assigned() == [(topic, 0), (topic, 1)]
            assert c.position() == {topic: {"0": 6, "1": 6}}
        by_part = {p: [g for g in got if int(g[1:]) % 2 == p] for p in (0, 1)}
        assert by_part == {0: ["g4", "g6", "g8", "g10"], 1: ["g9", "g11"]}  # p0 from 2, p1 from 4
        assert revoked and revoked[0] == first  # the hook ran before the partition was taken away
    finally:
        other.close()

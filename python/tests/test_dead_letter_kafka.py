"""Issue 13: a packed record the consumer cannot decode either raises (default) or goes to a dead-letter topic."""

from __future__ import annotations

import io
import uuid

import fastavro
import pytest
from confluent_kafka import Consumer, TopicPartition

from builders import versioned_group
from kafka_helpers import committed_offsets, headers_for, packed_value, produce
from rollout_stream import DecodeError, PackedConsumer, feed
from rollout_stream.dead_letters import DEAD_LETTER_SCHEMA
from rollout_stream.framing import parse_header

pytestmark = pytest.mark.integration


def publish_with_bad_ones(kafka_env, packed_schema, topic, schema_id):
    good = [versioned_group(f"g{i}", 3, batch_id="b1") for i in range(3)]
    truncated = packed_value(schema_id, packed_schema, versioned_group("cut", 3, batch_id="b1"))[:40]
    items = [
        ("g0", packed_value(schema_id, packed_schema, good[0]), headers_for(good[0]), 0),
        ("cut", truncated, [("weight_version", b"3"), ("batch_id", b"b1")], 0),
        ("g1", packed_value(schema_id, packed_schema, good[1]), headers_for(good[1]), 0),
        ("junk", b"not a frame at all", None, 0),
        ("g2", packed_value(schema_id, packed_schema, good[2]), headers_for(good[2]), 0),
    ]
    produce(kafka_env.brokers, topic, items)
    return items


def read_all(brokers, topic, n):
    c = Consumer({"bootstrap.servers": brokers, "group.id": f"pytest-dl-{uuid.uuid4().hex[:6]}", "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        for _ in range(200):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m)
            if len(out) >= n:
                break
    finally:
        c.close()
    return out


def test_by_default_an_undecodable_group_raises_and_stays_unconsumed(kafka_env, packed_topics, packed_schema):
    topic, schema_id = packed_topics()
    publish_with_bad_ones(kafka_env, packed_schema, topic, schema_id)
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    got = []
    with PackedConsumer(topic, group_id, kafka_env.brokers, kafka_env.registry_url, jagged="numpy") as c:
        with pytest.raises(DecodeError) as e:
            feed(c, lambda s, f, t: got.append(t[0]["group_id"]), poll_timeout=0.5, idle_timeout=10)
        assert e.value.code == "undecodable" and e.value.details["offset"] == 1
        assert c.position() == {topic: {"0": 1}}
    assert got == ["g0"] and committed_offsets(kafka_env.brokers, group_id, topic, 1) == {(topic, 0): 1}


def test_dead_letter_mode_writes_the_pipelines_dead_letter_record_and_goes_on(kafka_env, packed_topics, packed_schema):
    topic, schema_id = packed_topics()
    dl_topic, _ = packed_topics(suffix="rollout.dead-letter")
    items = publish_with_bad_ones(kafka_env, packed_schema, topic, schema_id)
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    got = []
    with PackedConsumer(topic, group_id, kafka_env.brokers, kafka_env.registry_url, jagged="numpy",
                        on_undecodable="dead-letter", dead_letter_topic=dl_topic) as c:
        stats = feed(c, lambda s, f, t: got.append(t[0]["group_id"]), poll_timeout=0.5, idle_timeout=5)
        assert c.position() == {topic: {"0": 5}}
    assert got == ["g0", "g1", "g2"] and stats.dead_lettered == 2
    assert committed_offsets(kafka_env.brokers, group_id, topic, 1) == {(topic, 0): 5}

    letters = read_all(kafka_env.brokers, dl_topic, 2)
    assert len(letters) == 2
    parsed = fastavro.parse_schema(DEAD_LETTER_SCHEMA)
    decoded = []
    for m in letters:
        parse_header(m.value())
        decoded.append(fastavro.schemaless_reader(io.BytesIO(m.value()[5:]), parsed))
    assert [d["reason"] for d in decoded] == ["undecodable", "undecodable"]
    assert [d["stage"] for d in decoded] == ["trainer", "trainer"]
    assert decoded[0]["message"].startswith("[undecodable] ") and decoded[1]["message"].startswith("[framing] ")
    assert [(r["topic"], r["partition"], r["offset"], r["key"], r["value"]) for d in decoded for r in d["records"]] == [
        (topic, 0, 1, b"cut", items[1][1]),
        (topic, 0, 3, b"junk", items[3][1]),
    ]
    assert [d["group_id"] for d in decoded] == ["cut", "junk"] and decoded[0]["batch_id"] == "b1"
    assert dict(letters[0].headers()) == {"weight_version": b"3", "batch_id": b"b1"}


def test_dead_letter_mode_needs_a_topic(kafka_env):
    with pytest.raises(ValueError, match="needs dead_letter_topic"):
        PackedConsumer("t", "g", kafka_env.brokers, kafka_env.registry_url, on_undecodable="dead-letter")
    with pytest.raises(ValueError, match="on_undecodable must be one of"):
        PackedConsumer("t", "g", kafka_env.brokers, kafka_env.registry_url, on_undecodable="skip")

"""Against the real broker and registry: produce framed packed records, consume through feed.

Each test has its own topic (``pytest.<uuid>.rollout.packed``, schema under
``<topic>-value``) and consumer group id.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Producer

from builders import clean, text_group
from rollout_stream import (
    BrokerUnavailableError,
    PackedConsumer,
    RegistryUnavailableError,
    UnknownSchemaError,
    decode_packed,
    feed,
    frame,
)
from rollout_stream.encode import encode_packed_body

pytestmark = pytest.mark.integration


def produce(brokers: str, topic: str, values: dict[str, bytes], transactional: bool = False, abort: bool = False) -> None:
    conf = {"bootstrap.servers": brokers, "enable.idempotence": True}
    if transactional:
        conf["transactional.id"] = f"pytest-{uuid.uuid4().hex[:8]}"
    p = Producer(conf)
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    for key, value in values.items():
        p.produce(topic, key=key.encode(), value=value)
    if transactional:
        (p.abort_transaction if abort else p.commit_transaction)(30)
    assert p.flush(30) == 0


def framed_groups(schema_id: int, schema: dict, names: list[str]) -> dict[str, bytes]:
    return {n: frame(schema_id, encode_packed_body(clean(text_group(n, lengths=(3, 1))), schema)) for n in names}


def consumer(kafka_env, topic, group_id, **kw) -> PackedConsumer:
    return PackedConsumer(topic, group_id, kafka_env.brokers, kafka_env.registry_url, **kw)


def test_feed_hands_each_group_to_put_samples_once_and_commits(kafka_env, packed_topic, packed_schema):
    topic, schema_id = packed_topic
    names = [f"g{i}" for i in range(4)]
    produce(kafka_env.brokers, topic, framed_groups(schema_id, packed_schema, names))
    got = []
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    with consumer(kafka_env, topic, group_id) as c:
        stats = feed(c, lambda s, f, t: got.append((s, f, t)), stop_after=4, poll_timeout=0.5, idle_timeout=30)
    assert [t[0]["group_id"] for _, _, t in got] == names
    assert stats.groups == 4 and stats.rows == 8
    sample_ids, fields, _ = got[0]
    assert sample_ids == ["g0_g0", "g0_g1"] and fields["input_ids"].is_nested
    assert stats.committed == {(topic, 0): 4}
    with consumer(kafka_env, topic, group_id) as c:  # everything committed: nothing comes again
        assert feed(c, lambda *a: pytest.fail("redelivered"), poll_timeout=0.5, idle_timeout=4).groups == 0


def test_a_group_whose_put_samples_failed_arrives_again_after_a_restart_and_no_other_twice(kafka_env, packed_topic, packed_schema):
    topic, schema_id = packed_topic
    names = [f"g{i}" for i in range(5)]
    produce(kafka_env.brokers, topic, framed_groups(schema_id, packed_schema, names))
    arrivals: list[str] = []
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"

    def failing_on_g2(sample_ids, fields, tags):
        arrivals.append(tags[0]["group_id"])
        if tags[0]["group_id"] == "g2":
            raise RuntimeError("trainer store rejected g2")

    with consumer(kafka_env, topic, group_id) as c:
        with pytest.raises(RuntimeError, match="rejected g2"):
            feed(c, failing_on_g2, stop_after=5, poll_timeout=0.5, idle_timeout=30)
    assert arrivals == ["g0", "g1", "g2"]

    with consumer(kafka_env, topic, group_id) as c:  # the restart: same group id, new consumer
        stats = feed(c, lambda s, f, t: arrivals.append(t[0]["group_id"]), stop_after=3, poll_timeout=0.5, idle_timeout=30)
        assert stats.groups == 3
        assert feed(c, lambda s, f, t: arrivals.append(t[0]["group_id"]), poll_timeout=0.5, idle_timeout=3).groups == 0
    assert arrivals == ["g0", "g1", "g2", "g2", "g3", "g4"]


def test_read_committed_skips_groups_of_aborted_transactions(kafka_env, packed_topic, packed_schema):
    topic, schema_id = packed_topic
    produce(kafka_env.brokers, topic, framed_groups(schema_id, packed_schema, ["aborted"]), transactional=True, abort=True)
    produce(kafka_env.brokers, topic, framed_groups(schema_id, packed_schema, ["kept"]), transactional=True)
    got = []
    with consumer(kafka_env, topic, f"pytest-{uuid.uuid4().hex[:8]}", jagged="numpy") as c:
        feed(c, lambda s, f, t: got.append(t[0]["group_id"]), poll_timeout=0.5, idle_timeout=6)
    assert got == ["kept"]


def test_max_groups_per_call_merges_groups_and_commits_them_together(kafka_env, packed_topic, packed_schema):
    topic, schema_id = packed_topic
    produce(kafka_env.brokers, topic, framed_groups(schema_id, packed_schema, ["a", "b", "c"]))
    calls = []
    with consumer(kafka_env, topic, f"pytest-{uuid.uuid4().hex[:8]}") as c:
        stats = feed(c, lambda s, f, t: calls.append(s), max_groups_per_call=3, stop_after=3, poll_timeout=2, idle_timeout=30)
    assert stats.groups == 3 and stats.committed == {(topic, 0): 3}
    assert [sid for call in calls for sid in call] == ["a_g0", "a_g1", "b_g0", "b_g1", "c_g0", "c_g1"]


def test_decode_packed_fetches_the_writer_schema_from_the_registry(kafka_env, packed_topic, packed_schema):
    _, schema_id = packed_topic
    value = framed_groups(schema_id, packed_schema, ["r"])["r"]
    group = decode_packed(value, kafka_env.registry_url, jagged="numpy")
    assert group.schema_id == schema_id and group.group_id == "r"
    with pytest.raises(UnknownSchemaError, match="unknown to the registry"):
        decode_packed(frame(987_654_321, value[5:]), kafka_env.registry_url)


def test_an_unreachable_broker_is_a_clear_error(kafka_env):
    with pytest.raises(BrokerUnavailableError, match="no Kafka broker answered at 127.0.0.1:1") as e:
        PackedConsumer("t", "g", "127.0.0.1:1", kafka_env.registry_url, connect_timeout=2)
    assert e.value.retriable and e.value.code == "broker_unavailable"


def test_an_unreachable_registry_is_a_clear_error(kafka_env):
    with pytest.raises(RegistryUnavailableError, match="schema registry at http://127.0.0.1:1 is unreachable"):
        PackedConsumer("t", "g", kafka_env.brokers, "http://127.0.0.1:1", connect_timeout=5)


def test_inspect_prints_a_decoded_group(kafka_env, packed_topic, packed_schema):
    topic, schema_id = packed_topic
    produce(kafka_env.brokers, topic, framed_groups(schema_id, packed_schema, ["first", "wanted"]))
    out = subprocess.run(
        [sys.executable, "-m", "rollout_stream", "inspect", "--topic", topic, "--group", "wanted",
         "--brokers", kafka_env.brokers, "--registry", kafka_env.registry_url],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "group_id: wanted" in out.stdout
    assert "input_ids: jagged [2, j] row lengths [3, 1] int64 (wire int32)" in out.stdout
    assert '"weight_version": 11' in out.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "rollout_stream", "inspect", "--topic", topic, "--group", "nope",
         "--brokers", kafka_env.brokers, "--registry", kafka_env.registry_url],
        capture_output=True, text=True, timeout=120,
    )
    assert missing.returncode == 1 and "not found" in missing.stderr

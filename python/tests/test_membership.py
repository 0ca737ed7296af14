"""Which group.instance.id a PackedConsumer joins with (static membership), and that librdkafka gets it."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer

from rollout_stream import PackedConsumer
from rollout_stream.membership import resolve_instance_id


@pytest.mark.parametrize(
    "instance_id, config, env, want",
    [
        ("trainer-3", {}, {"RANK": "1", "RS_TRAINER_INSTANCE_ID": "x"}, ("trainer-3", "instance_id")),
        (None, {"group.instance.id": "cfg-1"}, {"RANK": "1"}, ("cfg-1", "config")),
        ("cfg-1", {"group.instance.id": "cfg-1"}, {}, ("cfg-1", "instance_id")),
        (None, {}, {"RS_TRAINER_INSTANCE_ID": "job7-r2", "RANK": "2"}, ("job7-r2", "RS_TRAINER_INSTANCE_ID")),
        (None, {}, {"RS_TRAINER_INSTANCE_ID": "", "RANK": "2"}, (None, "none")),
        (None, {}, {"RANK": "5", "LOCAL_RANK": "1"}, ("rank-5", "RANK")),
        (None, {}, {"LOCAL_RANK": "1"}, (None, "none")),  # repeats on every node: never an id by itself
        (None, {}, {}, (None, "none")),
        (False, {}, {"RANK": "5", "RS_TRAINER_INSTANCE_ID": "x"}, (None, "none")),
    ],
)
def test_the_instance_id_comes_from_the_argument_then_config_then_our_variable_then_rank(instance_id, config, env, want):
    assert resolve_instance_id(instance_id, config, env) == want


@pytest.mark.parametrize(
    "instance_id, config, env, message",
    [
        ("a", {"group.instance.id": "b"}, {}, "disagree"),
        (False, {"group.instance.id": "b"}, {}, "contradicts"),
        ("", {}, {}, "non-empty string"),
        (True, {}, {}, "non-empty string"),
        (3, {}, {}, "must be a string"),
        ("rank 0", {}, {}, "from instance_id"),
        (None, {}, {"RS_TRAINER_INSTANCE_ID": "job/7"}, "from RS_TRAINER_INSTANCE_ID"),
        (None, {}, {"RANK": "0 1"}, "from RANK"),
        ("x" * 250, {}, {}, "1-249 characters"),
    ],
)
def test_a_bad_or_contradicted_instance_id_is_refused_saying_where_it_came_from(instance_id, config, env, message):
    with pytest.raises(ValueError, match=message):
        resolve_instance_id(instance_id, config, env)


class NoDecoder:
    resolver = None


def built(monkeypatch, env: dict, **kw) -> tuple[PackedConsumer, dict]:
    for name in ("RANK", "RS_TRAINER_INSTANCE_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen: dict = {}

    class Capture(Consumer):
        def __init__(self, conf):
            seen.update(conf)
            super().__init__(conf)

    class Captured(PackedConsumer):
        _client_class = Capture

    c = Captured("rollout.packed", "trainer", "127.0.0.1:1", check=False, deserializer=NoDecoder(),
                 config={"log_level": 0, **kw.pop("config", {})}, **kw)
    return c, seen


def test_the_consumer_hands_librdkafka_the_instance_id_from_rank(monkeypatch):
    c, conf = built(monkeypatch, {"RANK": "3"})
    try:
        assert c.instance_id == "rank-3" and conf["group.instance.id"] == "rank-3"
    finally:
        c.close()


def test_an_explicit_instance_id_wins_and_false_joins_dynamically(monkeypatch):
    c, conf = built(monkeypatch, {"RANK": "3", "RS_TRAINER_INSTANCE_ID": "env-id"}, instance_id="trainer-a")
    c.close()
    assert c.instance_id == "trainer-a" and conf["group.instance.id"] == "trainer-a"
    c, conf = built(monkeypatch, {"RANK": "3"}, instance_id=False)
    c.close()
    assert c.instance_id is None and "group.instance.id" not in conf
    c, conf = built(monkeypatch, {})
    c.close()
    assert c.instance_id is None and "group.instance.id" not in conf


def test_an_instance_id_in_config_is_kept_and_a_contradicting_one_refused_before_connecting(monkeypatch):
    c, conf = built(monkeypatch, {"RANK": "3"}, config={"group.instance.id": "cfg-9"})
    c.close()
    assert c.instance_id == "cfg-9" and conf["group.instance.id"] == "cfg-9"
    with pytest.raises(ValueError, match="disagree"):
        built(monkeypatch, {}, instance_id="a", config={"group.instance.id": "b"})

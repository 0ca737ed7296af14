"""Small real-broker helpers for the trainer-side integration tests (producing, offsets, groups)."""

from __future__ import annotations

import uuid
from typing import Iterable, Sequence

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from rollout_stream import frame
from rollout_stream.encode import encode_packed_body


def packed_value(schema_id: int, schema: dict, record: dict) -> bytes:
    return frame(schema_id, encode_packed_body(record, schema))


def headers_for(record: dict) -> list[tuple[str, bytes]]:
    """The headers the stages write: the group's (oldest row's) weight version and its batch id."""
    wv = min(t["weight_version"] for t in record["tags"])
    return [("weight_version", str(wv).encode()), ("batch_id", record["batch_id"].encode())]


def produce(
    brokers: str,
    topic: str,
    items: Iterable[tuple[str, bytes, Sequence[tuple[str, bytes]] | None, int | None]],
    transactional: bool = False,
) -> None:
    """Produces ``(key, value, headers, partition)`` items (partition None: by key), waits for all."""
    conf = {"bootstrap.servers": brokers, "enable.idempotence": True, "linger.ms": 5}
    if transactional:
        conf["transactional.id"] = f"pytest-{uuid.uuid4().hex[:8]}"
    p = Producer(conf)
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    errors: list = []
    for key, value, headers, partition in items:
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, key=key.encode(), value=value, headers=list(headers or []),
                  on_delivery=lambda err, _m: errors.append(err) if err else None, **kw)
    if transactional:
        p.commit_transaction(30)
    assert p.flush(30) == 0 and not errors, errors


def end_offsets(brokers: str, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    c = Consumer({"bootstrap.servers": brokers, "group.id": f"pytest-probe-{uuid.uuid4().hex[:8]}", "isolation.level": "read_committed"})
    try:
        return {(topic, p): c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1] for p in range(partitions)}
    finally:
        c.close()


def committed_offsets(brokers: str, group_id: str, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    c = Consumer({"bootstrap.servers": brokers, "group.id": group_id, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {(tp.topic, tp.partition): tp.offset for tp in got if tp.offset >= 0}
    finally:
        c.close()


def consumer_groups(brokers: str) -> set[str]:
    """Every group id the broker lists (the admin client is kept alive until the answer is in)."""
    admin = AdminClient({"bootstrap.servers": brokers})
    res = admin.list_consumer_groups().result(timeout=30)
    assert not res.errors, res.errors
    return {g.group_id for g in res.valid}


def group_state(brokers: str, group_id: str) -> tuple[str, list]:
    """``(state name, committed partitions)`` of one group: ``("DEAD", [])`` when it does not exist."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": brokers})
    state = admin.describe_consumer_groups([group_id])[group_id].result(timeout=30).state
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)])[group_id].result(timeout=30)
    return state.name, list(offsets.topic_partitions or [])

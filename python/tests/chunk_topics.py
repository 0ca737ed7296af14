"""Real-broker helpers of the chunk tests: topics with a small ``max.message.bytes`` on a fresh
prefix, and chunk sets written the way every writer writes them (the transactional
:class:`~rollout_stream.chunk_producer.ChunkProducer`)."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from rollout_stream.chunk_producer import ChunkProducer, topic_record_limit

MIB = 1024 * 1024


def make_topics(brokers: str, names: list[str], *, max_message_bytes: int, partitions: int = 1) -> tuple[str, list[str]]:
    """``pytest.<uuid>.<name>`` for each name, created with ``max.message.bytes``; returns (prefix, topics)."""
    prefix = f"pytest.{uuid.uuid4().hex[:12]}."
    topics = [prefix + n for n in names]
    admin = AdminClient({"bootstrap.servers": brokers})
    new = [NewTopic(t, num_partitions=partitions, replication_factor=1, config={"max.message.bytes": str(max_message_bytes)})
           for t in topics]
    for fut in admin.create_topics(new).values():
        fut.result(timeout=30)
    return prefix, topics


def delete_topics(brokers: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": brokers})
    for fut in admin.delete_topics(topics).values():
        try:
            fut.result(timeout=30)
        except Exception:
            pass


def chunk_writer(brokers: str, topic: str) -> ChunkProducer:
    """A chunk producer for ``topic`` with the limit discovered from the broker."""
    return ChunkProducer(topic, brokers, topic_record_limit(brokers, topic), timeout=30)


def set_record_limit(brokers: str, topic: str, max_message_bytes: int) -> None:
    """Sets an existing topic's ``max.message.bytes``."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": brokers})
    entry = ConfigEntry("max.message.bytes", str(max_message_bytes), incremental_operation=AlterConfigOpType.SET)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(timeout=30)

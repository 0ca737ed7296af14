"""Which rows of a batch are already on ``rollout.row-completed`` (for re-running a batch after a crash).

A real policy samples: running a rollout again gives a different row for the
same index, which accumulate refuses as ``duplicate_row_index``. So a
collector that starts a batch again first reads back the row indices this
batch already has on the topic, and runs only the others.

Only the partitions that hold the batch's groups are read (the publishers key
by group id and place keys as Kafka's Java client does), from a start time
(``since_ms``; default the beginning) to their current end; of each record
only the key and the leading fields of its value are looked at
(``batch_id``, ``group_id``, ``group_index``, ``row_index`` lead both the
``RolloutRow`` and the ``GymResult`` branch of the row-completed schema).
A row sent as a chunk set (above the topic's limit) has those fields in its
first chunk's payload: they are read from there and the other chunks are
passed over, nothing is reassembled.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterable, Mapping

from .. import kafka_env
from ..chunks import ChunkFormatError, is_chunk, parse_chunk
from ..errors import BrokerUnavailableError, DecodeError, KafkaOperationError
from ..framing import HEADER_SIZE
from ..packed_reader import _long as avro_long
from ..partitioner import partition_for_key
from ..replay_reader import _ranges as offset_ranges

BATCH_END_BRANCH = 1  # index of BatchEnd in row-completed's event union


def avro_string(buf: bytes, pos: int) -> tuple[str, int]:
    """The Avro string at ``pos``: ``(text, next position)``."""
    n, pos = avro_long(buf, pos)
    return buf[pos : pos + n].decode("utf-8"), pos + n


def row_identity(value: bytes) -> tuple[str, str, int] | None:
    """``(batch_id, group_id, row_index)`` of a row-completed value; ``None`` for a ``BatchEnd``.

    Raises:
        ValueError: Too short, not Confluent-framed, or cut short.
    """
    if len(value) < HEADER_SIZE + 1 or value[0] != 0:
        raise ValueError("not a Confluent-framed Avro value")
    try:
        branch, pos = avro_long(value, HEADER_SIZE)
        if branch == BATCH_END_BRANCH:
            return None
        batch_id, pos = avro_string(value, pos)
        group_id, pos = avro_string(value, pos)
        _group_index, pos = avro_long(value, pos)
        row_index, _ = avro_long(value, pos)
    except (IndexError, UnicodeDecodeError, DecodeError) as e:
        raise ValueError(f"not a row-completed value: {e}") from e
    return batch_id, group_id, row_index


def leading_bytes(value: bytes) -> bytes | None:
    """The bytes a row's leading fields are read from: the value, or a first chunk's payload; ``None`` for a later chunk.

    Raises:
        ValueError: A chunk whose header does not parse.
    """
    if not is_chunk(value):
        return value
    try:
        header, payload = parse_chunk(value)
    except ChunkFormatError as e:
        raise ValueError(str(e)) from e
    return bytes(payload) if header.index == 0 else None


def published_row_indices(
    brokers: str,
    topic: str,
    batch_id: str,
    group_ids: Iterable[str],
    *,
    since_ms: int | None = None,
    config: Mapping[str, Any] | None = None,
    timeout: float = 30.0,
) -> set[int]:
    """The row indices of ``batch_id`` whose rows (of the given groups) are on ``topic`` now.

    Raises:
        BrokerUnavailableError: No broker answered.
        KafkaOperationError: The topic does not exist.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    groups = {g.encode() for g in group_ids}
    c = Consumer(
        {
            **kafka_env.client_config(brokers, config),
            "group.id": f"rollout-stream-collect-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 64 << 20,
        }
    )
    try:
        try:
            md = c.list_topics(topic, timeout=timeout)
        except KafkaException as e:
            raise BrokerUnavailableError(f"no Kafka broker answered at {brokers} ({e})", cause=e) from e
        t = md.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            raise KafkaOperationError(f"topic {topic} is not usable at {brokers}", topic=topic)
        n = len(t.partitions)
        parts = sorted({partition_for_key(g, n) for g in groups})
        ranges = offset_ranges(c, topic, from_time=since_ms, to_time=None, offsets={p: 0 for p in parts}, timeout=timeout)
        todo = {p: r for p, r in ranges.items() if r[0] < r[1]}
        found: set[int] = set()
        if not todo:
            return found
        c.assign([TopicPartition(topic, p, lo) for p, (lo, _) in todo.items()])
        deadline = time.monotonic() + timeout
        while todo:
            m = c.poll(0.5)
            if m is None:
                if time.monotonic() > deadline:
                    raise KafkaOperationError(
                        f"reading back batch {batch_id} from {topic}: partitions {sorted(todo)} did not reach their end "
                        f"within {timeout} s (an open transaction on the topic?)",
                        topic=topic,
                    )
                # read_committed stops short of control records at the end: check the position.
                for p in list(todo):
                    pos = c.position([TopicPartition(topic, p)])[0].offset
                    if pos >= todo[p][1]:
                        del todo[p]
                continue
            if m.error():
                continue
            deadline = time.monotonic() + timeout
            p = m.partition()
            if m.key() in groups and m.value():
                try:
                    head = leading_bytes(m.value())
                    ident = None if head is None else row_identity(head)
                except ValueError:
                    ident = None  # not a row of ours (accumulate dead-letters it as undecodable)
                if ident is not None and ident[0] == batch_id:
                    found.add(ident[2])
            if p in todo and m.offset() + 1 >= todo[p][1]:
                del todo[p]
        return found
    finally:
        c.close()

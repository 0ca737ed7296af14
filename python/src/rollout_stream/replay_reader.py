"""Replaying past packed groups into a trainer (SPEC §6.3), outside any consumer group.

:func:`replay_records` reads ``rollout.packed`` partition by partition, in
offset order, over a range fixed when it starts — chosen batches
(``batch_ids``), a time range (``from_time``/``to_time``) and/or explicit
offsets — and stops at the end of that range by itself. It uses
``assign()``, never ``subscribe()``, and commits nothing, so it joins no
consumer group and moves no trainer's offsets (confluent-kafka insists on a
``group.id``; a throw-away one is set and never used on the broker). Groups
of other batches are passed over from their ``batch_id`` header without
decoding when the header is there. :func:`replay` hands the groups to
``put_samples`` or writes them as JSON lines (the SPEC §9 JSON form).

Chunk sets (values above the topic's limit) are reassembled, their CRC
checked, and handed on whole at their first chunk's offset
(:func:`whole_records`, which reads any topic that way). A set whose first
chunk lies before the range start is left out and counted
(``skipped_incomplete``); one that is broken inside the range raises.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from . import kafka_env
from .chunk_stream import ChunkedPartitions, record_error
from .codec import JaggedMode, PackedGroup
from .consumer import MAX_MESSAGE_BYTES
from .deserializer import PackedDeserializer
from .errors import BrokerUnavailableError, KafkaOperationError
from .record_meta import Record
from .registry import SchemaResolver

log = logging.getLogger(__name__)

Progress = Callable[["ReplayStats", int, int, int], Any]  # (stats, partition, offset, end)


@dataclass
class ReplayedGroup:
    """A replayed group and where it was read."""

    group: PackedGroup
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None


@dataclass
class ReplayStats:
    """What a replay read and handed on.

    Attributes:
        ranges: ``{partition: (start, end)}`` read, end exclusive.
        records: Records read in those ranges.
        groups, rows: Groups (and their rows) that matched and were handed on.
        skipped_by_header: Records of other batches passed over from the header, undecoded.
        skipped_decoded: Records that had to be decoded to see they did not match.
        skipped_by_time: Records in the offset range whose timestamp is outside the time range.
        skipped_incomplete: Chunk sets left out because their first chunk is before the range
            (or below the log start); each is logged.
        stopped_early: Partitions whose end was not reached within ``timeout``
            quiet seconds (e.g. an open transaction holds read_committed back).
        seconds: Wall time.
        client_group_id: The throw-away ``group.id`` the client was configured
            with (never joined or committed: it does not exist on the broker).
    """

    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    records: int = 0
    groups: int = 0
    rows: int = 0
    skipped_by_header: int = 0
    skipped_decoded: int = 0
    skipped_by_time: int = 0
    skipped_incomplete: int = 0
    stopped_early: list[int] = field(default_factory=list)
    seconds: float = 0.0
    client_group_id: str = ""

    def summary(self, topic: str) -> str:
        parts = ", ".join(f"{p}:{s}-{e}" for p, (s, e) in sorted(self.ranges.items())) or "none"
        early = f"; stopped before the end on partitions {self.stopped_early}" if self.stopped_early else ""
        return (
            f"replayed {self.groups} groups ({self.rows} rows) of {self.records} records from {topic} "
            f"[partition:start-end {parts}] in {self.seconds:.2f} s; skipped {self.skipped_by_header} by header, "
            f"{self.skipped_decoded} after decoding, {self.skipped_by_time} by time"
            f"{f', {self.skipped_incomplete} incomplete chunk sets' if self.skipped_incomplete else ''}{early}"
        )


def to_millis(t: Any) -> int:
    """Milliseconds since the epoch from an int/float (ms), a ``datetime`` or an ISO-8601 string.

    Raises:
        ValueError: An unreadable string.
    """
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return int(t.timestamp() * 1000)
    if isinstance(t, str):
        if t.lstrip("-").isdigit():
            return int(t)
        return to_millis(_dt.datetime.fromisoformat(t.replace("Z", "+00:00")))
    return int(t)


def _consumer(brokers: str | None, config: Mapping[str, Any] | None, group_id: str) -> Consumer:
    return Consumer(
        {
            **kafka_env.client_config(brokers),
            # Required by confluent-kafka; assign() without commits never creates it on the broker.
            "group.id": group_id,
            "enable.auto.offset.store": False,
            "fetch.max.bytes": MAX_MESSAGE_BYTES,
            "max.partition.fetch.bytes": MAX_MESSAGE_BYTES,
            "receive.message.max.bytes": MAX_MESSAGE_BYTES + 1024 * 1024,
            **dict(config or {}),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )


def _ranges(
    consumer: Consumer,
    topic: str,
    *,
    from_time: Any,
    to_time: Any,
    offsets: Mapping[int, Any] | None,
    timeout: float,
) -> dict[int, tuple[int, int]]:
    try:
        md = consumer.list_topics(topic, timeout=timeout)
    except KafkaException as e:
        raise BrokerUnavailableError(f"no Kafka broker answered: {e.args[0]}", cause=e) from e
    tmd = md.topics.get(topic)
    if tmd is None or tmd.error is not None or not tmd.partitions:
        raise KafkaOperationError(f"topic {topic!r} not found", topic=topic)
    parts = sorted(tmd.partitions)
    wanted: dict[int, tuple[int | None, int | None]] = {}
    if offsets is not None:
        for p, rng in offsets.items():
            p = int(p)
            if p not in tmd.partitions:
                raise ValueError(f"{topic} has no partition {p} (it has {parts})")
            start, end = (rng, None) if isinstance(rng, int) else (rng[0], rng[1] if len(rng) > 1 else None)
            wanted[p] = (start, end)
    else:
        wanted = {p: (None, None) for p in parts}

    def at_time(t: Any) -> dict[int, int]:
        ms = to_millis(t)
        found = consumer.offsets_for_times([TopicPartition(topic, p, ms) for p in wanted], timeout=timeout)
        return {tp.partition: tp.offset for tp in found}

    t_from = at_time(from_time) if from_time is not None else {}
    t_to = at_time(to_time) if to_time is not None else {}
    out: dict[int, tuple[int, int]] = {}
    for p, (start, end) in sorted(wanted.items()):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
        s = low if start is None else max(low, int(start))
        e = high if end is None else min(high, int(end))
        if p in t_from:
            s = max(s, high if t_from[p] < 0 else t_from[p])  # -1: nothing at or after from_time
        if p in t_to and t_to[p] >= 0:
            e = min(e, t_to[p])
        out[p] = (s, max(s, e))
    return out


def replay_records(
    topic: str,
    brokers: str | None = None,
    registry_url: str | None = None,
    *,
    batch_ids: Iterable[str] | None = None,
    from_time: Any = None,
    to_time: Any = None,
    offsets: Mapping[int, Any] | None = None,
    jagged: JaggedMode = "auto",
    deserializer: PackedDeserializer | None = None,
    config: Mapping[str, Any] | None = None,
    timeout: float = 10.0,
    stats: ReplayStats | None = None,
    progress: Progress | None = None,
) -> Iterator[ReplayedGroup]:
    """Yields the matching packed groups of a fixed range, partition by partition in offset order.

    Args:
        topic: The packed topic.
        brokers, registry_url: Where the broker and registry are; ``None``:
            ``$KAFKA_BROKERS`` / ``$SCHEMA_REGISTRY_URL``, else the local defaults.
        batch_ids: Only groups of these batches (header ``batch_id`` first; decoded
            ``batch_id`` when the header is missing). ``None``: every group.
        from_time, to_time: Only records with ``from_time <= timestamp < to_time``
            (ms since the epoch, ``datetime`` or ISO-8601; either may be ``None``).
        offsets: ``{partition: start}`` or ``{partition: (start, end)}`` (end
            exclusive, ``None``: the end); only these partitions are read.
        jagged, deserializer: How values are decoded (as :class:`PackedConsumer`).
        config: Extra librdkafka settings; they win over the environment's
            SASL/TLS settings (:mod:`rollout_stream.kafka_env`).
        timeout: Seconds for metadata/offset requests, and the quiet time after
            which a partition whose end cannot be reached is left (``stopped_early``).
        stats: A :class:`ReplayStats` to fill in (also readable while iterating).
        progress: ``progress(stats, partition, offset, end)`` after every record.

    Raises:
        BrokerUnavailableError: No broker answered.
        KafkaOperationError: The topic does not exist, or a fatal consumer error.
        ValueError: A partition in ``offsets`` does not exist; a bad time.
        FramingError, DecodeError, UnknownSchemaError, RegistryUnavailableError:
            A record in the range that has to be decoded cannot be.
    """
    st = stats if stats is not None else ReplayStats()
    want = None if batch_ids is None else set(batch_ids)
    t_lo = None if from_time is None else to_millis(from_time)
    t_hi = None if to_time is None else to_millis(to_time)
    deser = deserializer or PackedDeserializer(SchemaResolver(kafka_env.registry_url(registry_url)), jagged=jagged)
    for rec in whole_records(topic, brokers, from_time=from_time, to_time=to_time, offsets=offsets, config=config,
                             timeout=timeout, stats=st, progress=progress):
        ts = rec.timestamp_ms
        in_time = ts is None or ((t_lo is None or ts >= t_lo) and (t_hi is None or ts < t_hi))
        if not in_time:
            st.skipped_by_time += 1
        elif want is not None and rec.batch_id is not None and rec.batch_id not in want:
            st.skipped_by_header += 1
        else:
            group = deser.decode(rec.value)
            if want is not None and group.batch_id not in want:
                st.skipped_decoded += 1
            else:
                st.groups += 1
                st.rows += len(group.sample_ids)
                yield ReplayedGroup(group, rec.topic, rec.partition, rec.offset, ts)


def whole_records(
    topic: str,
    brokers: str | None = None,
    *,
    from_time: Any = None,
    to_time: Any = None,
    offsets: Mapping[int, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    timeout: float = 10.0,
    stats: ReplayStats | None = None,
    progress: Progress | None = None,
) -> Iterator[Record]:
    """Yields the records of a fixed range of any topic, partition by partition, chunk sets reassembled.

    A chunk set counts as in the range when its first chunk is; its later
    chunks are read past the end if need be. Each record's ``value`` is the
    whole value (for a set: one read-only, 64-byte-aligned buffer whose CRC
    was checked), ``offset`` its first chunk's. Arguments as :func:`replay_records`.

    Raises:
        BrokerUnavailableError, KafkaOperationError, ValueError: As :func:`replay_records`.
        IncompleteRecordError: A set in the range that cannot be reassembled
            (a chunk that does not continue it, a CRC or length mismatch).
        ChunkFormatError: A chunk whose header does not parse.
    """
    st = stats if stats is not None else ReplayStats()
    st.client_group_id = f"rollout-stream-replay-{uuid.uuid4().hex[:12]}"
    consumer = _consumer(brokers, config, st.client_group_id)

    def log_start(t: str, p: int) -> int:
        return int(consumer.get_watermark_offsets(TopicPartition(t, p), timeout=timeout, cached=False)[0])

    chunks = ChunkedPartitions(log_start, verify_crc=True)
    started = time.monotonic()
    try:
        st.ranges = _ranges(consumer, topic, from_time=from_time, to_time=to_time, offsets=offsets, timeout=timeout)
        for p, (start, end) in sorted(st.ranges.items()):
            if start >= end:
                continue
            key = (topic, p)
            # A range start is no resume offset: a set begun before it is reported, not skipped as delivered.
            chunks.start(key, start, trusted=False)
            consumer.assign([TopicPartition(topic, p, start)])
            quiet_since = time.monotonic()
            while True:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is not None:
                    err = msg.error()
                    if err.fatal():
                        raise KafkaOperationError(f"fatal consumer error: {err}", cause=KafkaException(err))
                    if err.code() != KafkaError._PARTITION_EOF:
                        quiet_since = time.monotonic()
                    msg = None
                if msg is not None:
                    quiet_since = time.monotonic()
                    if msg.offset() >= end and not chunks.open_sets(key):
                        break
                    for rec in chunks.push(msg):
                        if rec.offset >= end:
                            continue  # began past the range: read only to finish an older set
                        bad = record_error(rec)
                        if rec.incomplete is not None and rec.incomplete.detail in ("headless", "log_start"):
                            st.skipped_incomplete += 1
                            log.warning("skipped incomplete set %s at %s[%d]@%d..%d: its first chunk is before the start",
                                        rec.incomplete.set_id, topic, p, rec.incomplete.first_offset, rec.incomplete.last_offset)
                            continue
                        if bad is not None:
                            raise bad
                        st.records += 1
                        yield rec
                    if progress is not None:
                        progress(st, p, msg.offset(), end)
                    if msg.offset() + 1 >= end and not chunks.open_sets(key):
                        break
                    continue
                (pos,) = consumer.position([TopicPartition(topic, p)])
                if pos.offset >= end and not chunks.open_sets(key):  # only control records (transaction markers) were left
                    break
                if time.monotonic() - quiet_since > timeout:
                    st.stopped_early.append(p)
                    break
            chunks.drop(key)
            consumer.unassign()
    finally:
        st.seconds = time.monotonic() - started
        consumer.close()


def replay(
    topic: str,
    put_samples: Callable[[list[str], dict[str, Any], list[dict[str, Any]]], Any] | None = None,
    *,
    to_jsonl: IO[str] | None = None,
    **kwargs: Any,
) -> ReplayStats:
    """Replays the matching groups into ``put_samples`` and/or as JSON lines into ``to_jsonl``.

    Takes every keyword of :func:`replay_records`. Each group is one
    ``put_samples(sample_ids, fields, tags)`` call, in partition-offset order;
    a JSON line is the group's SPEC §9 JSON form.

    Returns:
        :class:`ReplayStats` (``summary(topic)`` is a one-line report).

    Raises:
        ValueError: Neither ``put_samples`` nor ``to_jsonl``.
        Whatever :func:`replay_records` or ``put_samples`` raises.
    """
    if put_samples is None and to_jsonl is None:
        raise ValueError("replay needs put_samples or to_jsonl")
    stats = kwargs.pop("stats", None) or ReplayStats()
    if to_jsonl is not None:
        from .json_form import group_to_json
    for item in replay_records(topic, stats=stats, **kwargs):
        if to_jsonl is not None:
            to_jsonl.write(json.dumps(group_to_json(item.group)) + "\n")
        if put_samples is not None:
            put_samples(*item.group)
    if to_jsonl is not None:
        to_jsonl.flush()
    return stats

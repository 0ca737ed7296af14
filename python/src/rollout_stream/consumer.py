"""Reading ``rollout.packed`` with confluent-kafka: read_committed, manual commits.

The trainer's loop is :func:`feed`: decode a group, hand it to
``put_samples``, and commit the Kafka offset only after that call returned.
A crash or an exception before the commit means the group is delivered again
(at-least-once into ``put_samples``; its sample ids are stable, so a keyed
store such as TransferQueue simply overwrites).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from .codec import JaggedMode, PackedGroup
from .deserializer import PackedDeserializer
from .devices import fields_to, placement
from .errors import BrokerUnavailableError, KafkaOperationError, RolloutStreamError
from .merge import merge_groups
from .registry import DEFAULT_REGISTRY_URL, SchemaResolver

log = logging.getLogger(__name__)

DEFAULT_BROKERS = "127.0.0.1:9092"
# The largest record the local broker accepts (scripts/local-kafka.sh
# RS_MAX_MESSAGE_BYTES); the consumer must be able to fetch one whole.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_FIXED = {"isolation.level": "read_committed", "enable.auto.commit": False}


@dataclass
class Delivery:
    """A decoded group and the Kafka message it came from (for committing)."""

    group: PackedGroup
    message: Message

    @property
    def topic(self) -> str:
        return self.message.topic()

    @property
    def partition(self) -> int:
        return self.message.partition()

    @property
    def offset(self) -> int:
        return self.message.offset()


class PackedConsumer:
    """Consumer of packed groups for one topic and consumer group.

    Args:
        topic: The packed topic (``rollout.packed`` with any prefix).
        group_id: Kafka consumer group; offsets are committed under it.
        brokers: Bootstrap servers (``host:port,...``).
        registry_url: Confluent-API schema registry URL.
        jagged: ``"auto"`` (torch when importable), ``"torch"`` or ``"numpy"``.
        config: Extra librdkafka settings (SASL/TLS, ``client.id``, ...);
            ``isolation.level`` and ``enable.auto.commit`` are fixed.
        check: Fail fast when broker or registry cannot be reached.
        connect_timeout: Seconds the start-up check waits for the broker.
        auto_offset_reset: Where a group without committed offsets starts.
        deserializer: A ready :class:`PackedDeserializer` (then ``registry_url``,
            ``jagged`` and ``device`` are ignored).
        device: ``None``/``"cpu"`` (default) or a CUDA device: decode into
            pinned host memory and copy asynchronously to it (see
            :class:`PackedDeserializer`).

    Raises:
        BrokerUnavailableError: No broker answered within ``connect_timeout``.
        RegistryUnavailableError: The registry did not answer.
        ValueError: ``config`` tries to change read_committed or auto-commit;
            a bad ``device``.
        DeviceUnavailableError: ``device`` is CUDA but CUDA is not available.
    """

    def __init__(
        self,
        topic: str,
        group_id: str,
        brokers: str = DEFAULT_BROKERS,
        registry_url: str = DEFAULT_REGISTRY_URL,
        *,
        jagged: JaggedMode = "auto",
        config: Mapping[str, Any] | None = None,
        check: bool = True,
        connect_timeout: float = 10.0,
        auto_offset_reset: str = "earliest",
        deserializer: PackedDeserializer | None = None,
        device: Any = None,
    ) -> None:
        extra = dict(config or {})
        for key, want in _FIXED.items():
            if key in extra and str(extra[key]).lower() != str(want).lower():
                raise ValueError(f"{key} must stay {want!r} for the packed consumer (got {extra[key]!r})")
        conf: dict[str, Any] = {
            "bootstrap.servers": brokers,
            "group.id": group_id,
            "auto.offset.reset": auto_offset_reset,
            "enable.auto.offset.store": False,
            "fetch.max.bytes": MAX_MESSAGE_BYTES,
            "max.partition.fetch.bytes": MAX_MESSAGE_BYTES,
            "receive.message.max.bytes": MAX_MESSAGE_BYTES + 1024 * 1024,
            "error_cb": self._on_error,
            **extra,
            **_FIXED,
        }
        self.topic = topic
        self.brokers = brokers
        self.deserializer = deserializer or PackedDeserializer(SchemaResolver(registry_url), jagged=jagged, device=device)
        self._last_error: KafkaError | None = None
        self._consumer = Consumer(conf)
        self._closed = False
        try:
            if check:
                self.check(connect_timeout)
            self._consumer.subscribe([topic])
        except BaseException:
            self.close()
            raise

    # -- connectivity -----------------------------------------------------
    def _on_error(self, err: KafkaError) -> None:
        self._last_error = err
        log.warning("kafka: %s", err)

    def check(self, timeout: float = 10.0) -> None:
        """Fails unless a broker answers a metadata request and the registry answers.

        Raises:
            BrokerUnavailableError: No metadata within ``timeout`` seconds.
            RegistryUnavailableError: The registry cannot be reached.
        """
        try:
            self._consumer.list_topics(timeout=timeout)
        except KafkaException as e:
            last = f"; last client error: {self._last_error}" if self._last_error else ""
            raise BrokerUnavailableError(
                f"no Kafka broker answered at {self.brokers} within {timeout:g}s ({e.args[0]}){last}; "
                "check KAFKA_BROKERS",
                brokers=self.brokers,
                cause=e,
            ) from e
        self.deserializer.resolver.check()

    # -- reading ----------------------------------------------------------
    def poll(self, timeout: float = 1.0) -> Delivery | None:
        """The next decoded group, or ``None`` when none arrived within ``timeout``.

        Raises:
            KafkaOperationError: A fatal consumer error.
            FramingError, DecodeError, UnknownSchemaError, RegistryUnavailableError:
                The record at the current position cannot be decoded; its offset
                is not committed and the consumer is rewound to it.
        """
        msg = self._consumer.poll(timeout)
        if msg is None:
            return None
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                return None
            if err.fatal():
                raise KafkaOperationError(f"fatal consumer error: {err}", cause=KafkaException(err))
            log.warning("kafka consumer: %s", err)
            return None
        try:
            group = self.deserializer.decode(msg.value())
        except RolloutStreamError as e:
            e.details.update(topic=msg.topic(), partition=msg.partition(), offset=msg.offset())
            e.args = (f"{e.args[0]} (at {msg.topic()}[{msg.partition()}]@{msg.offset()})",)
            self._seek(msg.topic(), msg.partition(), msg.offset())
            raise
        return Delivery(group, msg)

    def __iter__(self) -> Iterator[Delivery]:
        while True:
            d = self.poll(1.0)
            if d is not None:
                yield d

    # -- offsets ------------------------------------------------------------
    def commit(self, deliveries: Delivery | Sequence[Delivery]) -> None:
        """Synchronously commits past the given deliveries (highest offset + 1 per partition).

        Raises:
            KafkaOperationError: The commit failed (e.g. the partition was revoked).
        """
        items = [deliveries] if isinstance(deliveries, Delivery) else list(deliveries)
        nxt: dict[tuple[str, int], int] = {}
        for d in items:
            key = (d.topic, d.partition)
            nxt[key] = max(nxt.get(key, -1), d.offset + 1)
        if not nxt:
            return
        try:
            self._consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in nxt.items()], asynchronous=False)
        except KafkaException as e:
            raise KafkaOperationError(f"offset commit failed: {e.args[0]}", cause=e) from e

    def rewind(self, deliveries: Sequence[Delivery]) -> None:
        """Seeks back so the given (uncommitted) deliveries are read again."""
        first: dict[tuple[str, int], int] = {}
        for d in deliveries:
            key = (d.topic, d.partition)
            first[key] = min(first.get(key, d.offset), d.offset)
        for (t, p), o in first.items():
            self._seek(t, p, o)

    def _seek(self, topic: str, partition: int, offset: int) -> None:
        try:
            self._consumer.seek(TopicPartition(topic, partition, offset))
        except KafkaException as e:  # partition revoked meanwhile: the next owner re-reads it anyway
            log.warning("seek back to %s[%d]@%d failed: %s", topic, partition, offset, e)

    def close(self) -> None:
        """Leaves the group without committing anything more."""
        if not self._closed:
            self._closed = True
            self._consumer.close()

    def __enter__(self) -> "PackedConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@dataclass
class FeedStats:
    """What :func:`feed` did: groups and rows handed over, ``put_samples`` calls."""

    groups: int = 0
    rows: int = 0
    calls: int = 0
    committed: dict[tuple[str, int], int] = field(default_factory=dict)


PutSamples = Callable[[list[str], dict[str, Any], list[dict[str, Any]]], Any]


def feed(
    consumer: PackedConsumer,
    put_samples: PutSamples,
    *,
    max_groups_per_call: int = 1,
    stop_after: int | None = None,
    poll_timeout: float = 1.0,
    idle_timeout: float | None = None,
    device: Any = None,
) -> FeedStats:
    """Hands decoded groups to ``put_samples`` and commits each after it returned.

    ``put_samples(sample_ids, fields, tags)`` gets one group, or up to
    ``max_groups_per_call`` groups merged row-wise when their fields line up
    (same names, dtypes, inner/trailing shapes); groups that do not line up go
    in separate calls. Offsets are committed synchronously right after a call
    returned, never before.

    Args:
        consumer: The :class:`PackedConsumer` to read from.
        put_samples: The transfer-queue write.
        max_groups_per_call: Most groups merged into one call (≥ 1).
        stop_after: Return after this many groups were handed over (None: never).
        poll_timeout: Seconds one poll waits; a partial batch is flushed when
            a poll comes back empty.
        idle_timeout: Return when no record arrived for this many seconds.
        device: ``None``/``"cpu"`` (default): fields go to ``put_samples`` as
            decoded. A CUDA device: each call's fields (after merging) are
            moved there first, host tensors through pinned memory with
            ``non_blocking`` copies; fields already there (a consumer built
            with ``device=``) stay as they are.

    Returns:
        :class:`FeedStats`.

    Raises:
        Exception: Whatever ``put_samples`` raised; the groups of that call stay
            uncommitted and the consumer is rewound to them, so they are
            delivered again (to this consumer if used again, or to the next
            member of the group after a restart).
        RolloutStreamError: Decode or Kafka errors (the bad record stays uncommitted).
        DeviceUnavailableError: ``device`` is CUDA but CUDA is not available
            (raised before anything is read).
    """
    if max_groups_per_call < 1:
        raise ValueError("max_groups_per_call must be >= 1")
    pl = placement(device)
    stats = FeedStats()
    pending: list[Delivery] = []
    last_seen = time.monotonic()

    def flush() -> None:
        nonlocal pending
        if not pending:
            return
        batch, pending = pending, []
        sample_ids, fields, tags = merge_groups([d.group for d in batch]) if len(batch) > 1 else tuple(batch[0].group)
        try:
            if pl is not None:
                fields = fields_to(fields, pl)
            put_samples(sample_ids, fields, tags)
        except BaseException:
            consumer.rewind(batch)
            raise
        consumer.commit(batch)
        stats.calls += 1
        stats.groups += len(batch)
        stats.rows += len(sample_ids)
        for d in batch:
            stats.committed[(d.topic, d.partition)] = d.offset + 1

    while stop_after is None or stats.groups + len(pending) < stop_after:
        try:
            d = consumer.poll(poll_timeout)
        except BaseException:
            consumer.rewind(pending)
            raise
        if d is None:
            flush()
            if idle_timeout is not None and time.monotonic() - last_seen >= idle_timeout:
                break
            continue
        last_seen = time.monotonic()
        if pending and merge_groups([pending[0].group, d.group], check_only=True) is None:
            flush()
        pending.append(d)
        if len(pending) >= max_groups_per_call:
            flush()
    flush()
    return stats

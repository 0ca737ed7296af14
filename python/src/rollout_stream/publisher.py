"""Publishing rollouts to ``rollout.row-completed`` from a Python rollout worker (SPEC §2.2).

:class:`RolloutPublisher` validates each row or NeMo-Gym result against
SPEC §2 / §2.1 before anything is sent (:mod:`rollout_stream.row_input`),
encodes it with the schema and content the TypeScript codec writes
(:mod:`rollout_stream.row_encoder`; the same value gives the same bytes
every time), keys it by ``group_id`` and sends it,
with an idempotent ``acks=all`` confluent-kafka producer, to the partition
Kafka's Java client would pick (:mod:`rollout_stream.partitioner`), so rows
from Python and TypeScript publishers meet in one partition. ``end_batch``
writes the batch's ``BatchEnd`` to every partition once its rows are
acknowledged. A record the broker did not take raises
:class:`~rollout_stream.errors.DeliveryError` from the next ``flush``,
``end_batch`` or ``close``; it is never dropped silently.

A record larger than the topic's limit (its ``max.message.bytes``, read once
at start-up) is sent as a chunk set by a second, transactional producer
(:mod:`rollout_stream.chunk_producer`), in one transaction that commits before
``publish_row`` returns, to the partition the record's key maps to; readers
reassemble it. Only a value above ``max_value_bytes`` (4 GiB) is refused.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import kafka_env, row_completed_schema, row_encoder, row_input
from .errors import (
    BrokerUnavailableError,
    DeliveryError,
    KafkaOperationError,
    PublisherClosedError,
    RegistryUnavailableError,
    SchemaRegistrationError,
)
from .chunk_producer import ChunkProducer, topic_record_limit
from .chunks import DEFAULT_MAX_VALUE_BYTES
from .partitioner import partition_for_key

if TYPE_CHECKING:  # pragma: no cover
    from .batch_stamping import BatchPublisher

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "rollout.row-completed"
DEFAULT_BROKERS = kafka_env.DEFAULT_BROKERS
# The broker's and the TypeScript side's record limit (config kafka.max_message_bytes).
MAX_MESSAGE_BYTES = 67_108_864
# How long a topic the broker does not know yet is asked about again (see _partition_count).
UNKNOWN_TOPIC_WAIT_S = 3.0
_FIXED = {"enable.idempotence": True, "acks": "all"}
# Settings the chunk producer decides itself (one chunk per batch), whatever producer_config says.
_CHUNK_OWN = {"batch.size", "message.max.bytes", "transactional.id", "linger.ms", "batch.num.messages"}


def producer_settings(brokers: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The librdkafka settings of the publisher's producer (``bench publish`` gives its raw producer the same).

    The environment's SASL/TLS settings (:mod:`rollout_stream.kafka_env`) are
    in; ``extra`` wins over them.

    Raises:
        ValueError: ``extra`` tries to change idempotence or acks.
        ConfigError: A SASL/TLS environment variable is unusable.
    """
    extra = dict(extra or {})
    for key, want in _FIXED.items():
        if key in extra and str(extra[key]).lower() != str(want).lower():
            raise ValueError(f"{key} must stay {want!r} for the rollout publisher (got {extra[key]!r})")
    return {
        **kafka_env.client_config(brokers),
        "message.max.bytes": MAX_MESSAGE_BYTES,
        # Only reached by a produce without a partition; ours always name one.
        "partitioner": "murmur2_random",
        # An unknown topic must be an error, not a one-partition topic made by the broker.
        "allow.auto.create.topics": False,
        **extra,
        **_FIXED,
    }


@dataclass(frozen=True)
class FailedDelivery:
    """One record the broker did not take."""

    topic: str
    partition: int
    key: bytes | None
    error: str
    code: int | None = None


@dataclass
class PublisherStats:
    """What a publisher has sent (records handed to the producer) and what came back.

    Attributes:
        records: Records produced (rows + results + BatchEnds, one per partition each).
        rows: ``RolloutRow`` records. results: ``GymResult`` records.
        batch_ends: ``BatchEnd`` records (``end_batch`` calls × partitions).
        bytes: Value bytes produced (framed Avro).
        delivered / failed: Delivery reports received so far.
        per_partition: Records produced per partition.
        chunk_sets, chunks: Records above the topic's limit sent as chunk sets
            (each counted once in ``records``), and their chunks.
    """

    records: int = 0
    rows: int = 0
    results: int = 0
    batch_ends: int = 0
    bytes: int = 0
    delivered: int = 0
    failed: int = 0
    per_partition: dict[int, int] = field(default_factory=dict)
    chunk_sets: int = 0
    chunks: int = 0


class RolloutPublisher:
    """Publisher of rows, NeMo-Gym results and batch ends to ``rollout.row-completed``.

    Args:
        topic: Base topic name; the prefix is put in front of it.
        brokers: Bootstrap servers; default ``$KAFKA_BROKERS`` or ``127.0.0.1:9092``.
        registry_url: Confluent-API registry; default ``$SCHEMA_REGISTRY_URL`` or
            Apicurio's local ``http://127.0.0.1:8081/apis/ccompat/v7``.
        topic_prefix: Sandbox prefix; default ``$TOPIC_PREFIX`` or none.
        producer_config: More librdkafka settings (``client.id``, ``linger.ms``,
            ``compression.type``, SASL/TLS over the environment's, ...).
            ``enable.idempotence`` and ``acks`` are fixed (true, all).
        registry_config: More registry client settings (``basic.auth.user.info``, ...).
        schema_id: Use this registry id instead of registering (offline tools, tests).
        schema: The row-completed schema (parsed JSON); default ``schemas/row-completed.avsc``.
        connect_timeout: Seconds to wait for the topic's metadata.
        flush_timeout: Default seconds ``flush``/``end_batch``/``close`` wait for acknowledgements.
        producer: For unit tests only: an object with confluent-kafka
            ``Producer``'s ``produce``, ``poll``, ``flush`` and ``list_topics``.
        transactional_id: The ``transactional.id`` of the chunk producer (used
            only for records above the topic's limit); default
            ``rollout-stream.publisher.<uuid4>``. A publisher restarted with
            the same id aborts a chunk set its predecessor left open at once,
            instead of after the broker's transaction timeout. The principal
            needs WRITE on it.
        max_message_bytes: The record limit used when the topic's
            ``max.message.bytes`` cannot be read (default 64 MiB); with
            ``producer`` given it is the limit, undiscovered.
        max_value_bytes: The ceiling: a larger record is refused (default 4 GiB).
        chunk_producer: For unit tests only: stands in for the :class:`ChunkProducer`.

    Raises:
        BrokerUnavailableError: No broker answered within ``connect_timeout``.
        KafkaOperationError: The topic does not exist (create it with
            ``./rollout-stream topics create``).
        RegistryUnavailableError: The registry did not answer.
        SchemaRegistrationError: The registry refused the schema.
        ValueError: ``producer_config`` tries to change idempotence or acks.
        ConfigError: A SASL/TLS environment variable is unusable
            (:mod:`rollout_stream.kafka_env`).
    """

    def __init__(
        self,
        topic: str = DEFAULT_TOPIC,
        *,
        brokers: str | None = None,
        registry_url: str | None = None,
        topic_prefix: str | None = None,
        producer_config: Mapping[str, Any] | None = None,
        registry_config: Mapping[str, Any] | None = None,
        schema_id: int | None = None,
        schema: dict[str, Any] | None = None,
        connect_timeout: float = 10.0,
        flush_timeout: float = 60.0,
        producer: Any = None,
        transactional_id: str | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        chunk_producer: Any = None,
    ) -> None:
        self.topic = kafka_env.topic(topic, topic_prefix)
        self.brokers = kafka_env.brokers(brokers)
        self.registry_url = kafka_env.registry_url(registry_url)
        self.flush_timeout = flush_timeout
        self.stats = PublisherStats()
        self._schema = schema or row_completed_schema.load()
        row_completed_schema.check_layout(self._schema)
        self._lock = threading.Lock()
        self._failures: list[FailedDelivery] = []
        self._fatal: str | None = None
        self._closed = False
        # The connection settings a reader of the same cluster needs (the collector reads a batch back).
        self.client_config = {k: v for k, v in (producer_config or {}).items() if k.startswith(("security.", "sasl.", "ssl."))}
        self._producer = producer if producer is not None else self._make_producer(producer_config)
        self.num_partitions = self._partition_count(connect_timeout)
        self.record_limit = max_message_bytes if producer is not None else topic_record_limit(
            self.brokers, self.topic, self.client_config, fallback=max_message_bytes, timeout=connect_timeout)
        self._chunk_producer = chunk_producer or ChunkProducer(
            self.topic, self.brokers, self.record_limit, transactional_id=transactional_id,
            config={k: v for k, v in (producer_config or {}).items() if k not in _CHUNK_OWN},
            timeout=flush_timeout, max_value_bytes=max_value_bytes,
        )
        self.transactional_id = self._chunk_producer.transactional_id
        self.schema_id = schema_id if schema_id is not None else self._register(registry_config)

    # ------------------------------------------------------------ set-up

    def _make_producer(self, extra: Mapping[str, Any] | None) -> Any:
        from confluent_kafka import Producer

        return Producer({"error_cb": self._on_error, **producer_settings(self.brokers, extra)})

    def _partition_count(self, timeout: float) -> int:
        from confluent_kafka import KafkaError, KafkaException

        # A topic created a moment ago can be missing from the answering
        # broker's metadata for a short while (seen right after `topics
        # create`): an unknown topic is asked about again for up to
        # UNKNOWN_TOPIC_WAIT_S before it is reported.
        deadline = time.monotonic() + min(timeout, UNKNOWN_TOPIC_WAIT_S)
        while True:
            try:
                md = self._producer.list_topics(self.topic, timeout=timeout)
            except KafkaException as e:
                raise BrokerUnavailableError(
                    f"no Kafka broker answered at {self.brokers} within {timeout} s ({e}); check KAFKA_BROKERS",
                    cause=e,
                ) from e
            t = md.topics.get(self.topic)
            code = getattr(t.error, "code", None) if t is not None else None
            unknown = t is None or (callable(code) and code() == KafkaError.UNKNOWN_TOPIC_OR_PART)
            if not unknown or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if t is None or t.error is not None or not t.partitions:
            why = t.error if t is not None and t.error is not None else "no partitions"
            raise KafkaOperationError(
                f"topic {self.topic} is not usable at {self.brokers} ({why}); create it with "
                "`./rollout-stream topics create` (with the same TOPIC_PREFIX)",
                topic=self.topic,
            )
        return len(t.partitions)

    def _register(self, registry_config: Mapping[str, Any] | None) -> int:
        """Registers the schema text the TypeScript side registers, BACKWARD on first registration."""
        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        from .registry import make_registry_client

        subject = f"{self.topic}-value"
        client = make_registry_client(self.registry_url, dict(registry_config or {}))
        text = row_completed_schema.registered_text(self._schema)
        try:
            try:
                level = client.get_compatibility(subject)
                first = False
            except SchemaRegistryError as e:
                if e.http_status_code != 404:
                    raise
                level, first = None, True
            if level is not None and level.upper() != "BACKWARD":
                raise SchemaRegistrationError(
                    f"subject {subject} at {self.registry_url} has compatibility {level}, expected BACKWARD",
                    subject=subject,
                )
            schema_id = client.register_schema(subject, Schema(text, "AVRO"))
            if first:
                client.set_compatibility(subject, "BACKWARD")
            return int(schema_id)
        except SchemaRegistrationError:
            raise
        except SchemaRegistryError as e:
            if e.http_status_code is not None and 400 <= e.http_status_code < 500:
                raise SchemaRegistrationError(
                    f"registry at {self.registry_url} refused the row-completed schema for {subject}: "
                    f"HTTP {e.http_status_code}: {e.error_message}",
                    subject=subject,
                    cause=e,
                ) from e
            raise RegistryUnavailableError(
                f"registry at {self.registry_url} failed registering {subject}: HTTP {e.http_status_code}: {e.error_message}",
                cause=e,
            ) from e
        except Exception as e:  # httpx connection errors and timeouts
            raise RegistryUnavailableError(
                f"schema registry at {self.registry_url} is unreachable ({type(e).__name__}: {e}); check SCHEMA_REGISTRY_URL",
                cause=e,
            ) from e

    # ------------------------------------------------------------ publishing

    def publish_row(self, row: Mapping[str, Any]) -> int:
        """Validates and sends one NeMo-RL row dict as a ``RolloutRow``; returns its partition.

        ``row`` holds the identity of SPEC §2 (``batch_id``, ``group_id``,
        ``group_index``, ``row_index``, ``num_generations``, ``prompt_idx``,
        ``weight_version``, optional ``task_index`` (or ``_ng_task_index``),
        ``instance_label``, ``timing``, ``produced_at``), ``agent_ref``,
        ``request`` (or ``responses_create_params``), ``input_message_log``,
        ``message_log`` and ``full_result``. Message tensors may be torch
        tensors, numpy arrays or lists (lists: int32 token ids and routes,
        float32 logprobs and media). Other keys are not sent.

        Raises:
            InvalidRowError: The row breaks SPEC §2 (``.field`` names where); nothing was sent.
            PublisherClosedError: After ``close()``.
            KafkaOperationError: The producer refused the record, or its chunk
                transaction did not commit (nothing of it is visible).
            RecordTooLargeError: The encoded row is above ``max_value_bytes``.
        """
        wire = row_input.row(row)
        return self._send(wire.identity.group_id, row_encoder.row_parts(wire), "rows")

    def publish_result(
        self,
        gym_row: Mapping[str, Any],
        gym_result: Mapping[str, Any],
        *,
        batch_id: str,
        group_id: str,
        group_index: int,
        row_index: int,
        num_generations: int,
        prompt_idx: int,
        weight_version: int,
        task_index: int | None = None,
        instance_label: str | None = None,
        timing: Mapping[str, float] | None = None,
        produced_at: Any = None,
    ) -> int:
        """Validates and sends one NeMo-Gym result as a ``GymResult`` (SPEC §2.1); returns its partition.

        Args:
            gym_row: The task row as sent to NeMo-Gym (``responses_create_params``, ``agent_ref``, ...).
            gym_result: NeMo-Gym's result for it (``response.output`` items with token ids, ``reward``, ...).
            produced_at: Epoch milliseconds or a ``datetime``; absent when None.
            Others: the stream identity of SPEC §2 (see :func:`stamp_batch`).

        Raises:
            InvalidRowError: The identity or the two objects break SPEC §2.1; nothing was sent.
            PublisherClosedError: After ``close()``.
            KafkaOperationError: The producer refused the record, or its chunk
                transaction did not commit (nothing of it is visible).
            RecordTooLargeError: The encoded row is above ``max_value_bytes``.
        """
        ident = row_input.identity(
            batch_id=batch_id,
            group_id=group_id,
            group_index=group_index,
            row_index=row_index,
            num_generations=num_generations,
            prompt_idx=prompt_idx,
            weight_version=weight_version,
            task_index=task_index,
            instance_label=instance_label,
            timing=timing,
            produced_at=produced_at,
        )
        wire = row_input.gym_result(gym_row, gym_result, ident)
        return self._send(ident.group_id, row_encoder.gym_result_parts(wire), "results")

    def end_batch(self, batch_id: str, num_rows: int, timeout: float | None = None) -> None:
        """Closes a batch: waits until every record so far is acknowledged, then writes its
        ``BatchEnd`` (keyed by ``batch_id``) to every partition and waits for those too.

        Raises:
            InvalidRowError: ``batch_id`` empty or ``num_rows`` negative.
            DeliveryError: A row of this publisher was lost (then no BatchEnd is
                written), or the BatchEnds were not all acknowledged in time.
        """
        wire = row_input.batch_end(batch_id, num_rows)
        self._check_open()
        self.flush(timeout)
        value = row_encoder.encode(wire, self.schema_id)
        for p in range(self.num_partitions):
            self._produce(wire.batch_id, value, p)
        with self._lock:
            self.stats.batch_ends += self.num_partitions
        self.flush(timeout)

    def refresh_partitions(self, timeout: float = 10.0) -> int:
        """Re-reads the topic's partition count (it is read once, at start-up) and returns it.

        Call it between batches after partitions were added: a group whose
        rows straddle the change would be split across partitions, exactly as
        with any other Kafka producer.
        """
        self.num_partitions = self._partition_count(timeout)
        return self.num_partitions

    def batch(self, task_rows: Sequence[Mapping[str, Any]], num_generations: int, batch_id: str, **stamp: Any) -> "BatchPublisher":
        """A :class:`~rollout_stream.batch_stamping.BatchPublisher` for one batch of NeMo-Gym task rows.

        ``stamp`` goes to :func:`~rollout_stream.batch_stamping.stamp_batch`
        (``weight_version`` is required).
        """
        from .batch_stamping import BatchPublisher

        return BatchPublisher(self, task_rows, num_generations, batch_id, **stamp)

    def _send(self, key: bytes, parts: list[Any], kind: str) -> int:
        self._check_open()
        partition = partition_for_key(key, self.num_partitions)
        parts.insert(0, row_encoder.header(self.schema_id))
        self._produce(key, b"".join(parts), partition)
        with self._lock:
            setattr(self.stats, kind, getattr(self.stats, kind) + 1)
        return partition

    def _produce(self, key: bytes, value: bytes, partition: int) -> None:
        from confluent_kafka import KafkaException

        if len(value) > self._chunk_producer.budget(key):
            self._produce_chunked(key, value, partition)
            return
        deadline = None
        while True:
            try:
                self._producer.produce(self.topic, value=value, key=key, partition=partition, on_delivery=self._on_delivery)
                break
            except BufferError:
                # librdkafka's local queue is full: serve delivery reports until there is room.
                deadline = deadline or time.monotonic() + self.flush_timeout
                if time.monotonic() > deadline:
                    raise KafkaOperationError(
                        f"producer queue for {self.topic} stayed full for {self.flush_timeout} s; is the broker up?",
                        topic=self.topic,
                    ) from None
                self._producer.poll(0.05)
            except KafkaException as e:
                raise KafkaOperationError(
                    f"producing a {len(value)}-byte record to {self.topic} partition {partition} failed: "
                    f"{e.args[0] if e.args else e}",
                    topic=self.topic,
                    partition=partition,
                    size=len(value),
                    cause=e,
                ) from e
        with self._lock:
            s = self.stats
            s.records += 1
            s.bytes += len(value)
            s.per_partition[partition] = s.per_partition.get(partition, 0) + 1
        self._producer.poll(0)

    def _produce_chunked(self, key: bytes, value: bytes, partition: int) -> None:
        """A record above the topic's limit: one chunk set, in one committed transaction, to ``partition``.

        Synchronous, so no chunk transaction is ever open when ``flush`` or
        ``end_batch`` runs: a BatchEnd always follows its chunked rows.
        """
        chunks = self._chunk_producer.send(key, value, partition)
        with self._lock:
            s = self.stats
            s.records += 1
            s.bytes += len(value)
            s.per_partition[partition] = s.per_partition.get(partition, 0) + 1
            s.delivered += 1  # committed: every chunk is on the broker
            s.chunk_sets += 1
            s.chunks += chunks

    # ------------------------------------------------------------ delivery

    def _on_delivery(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is None:
                self.stats.delivered += 1
                return
            self.stats.failed += 1
            code = err.code() if hasattr(err, "code") else None
            self._failures.append(FailedDelivery(msg.topic(), msg.partition(), msg.key(), str(err), code))

    def _on_error(self, err: Any) -> None:
        if getattr(err, "fatal", lambda: False)():
            with self._lock:
                self._fatal = str(err)
        log.warning("kafka producer: %s", err)

    def flush(self, timeout: float | None = None) -> None:
        """Waits until every record so far is acknowledged by the broker.

        Raises:
            DeliveryError: Some record was lost (each loss is reported once), the
                producer hit a fatal error, or records are still unacknowledged
                after ``timeout`` seconds (default ``flush_timeout``).
        """
        timeout = self.flush_timeout if timeout is None else timeout
        left = self._producer.flush(timeout)
        with self._lock:
            failures, self._failures = self._failures, []
            fatal = self._fatal
        if failures:
            first = failures[0]
            raise DeliveryError(
                f"{len(failures)} record(s) to {self.topic} were not delivered; first: partition "
                f"{first.partition} key {first.key!r}: {first.error}",
                failures,
                topic=self.topic,
            )
        if fatal:
            raise DeliveryError(f"the producer for {self.topic} failed fatally: {fatal}", [], topic=self.topic)
        if left:
            raise DeliveryError(
                f"{left} record(s) to {self.topic} still unacknowledged after {timeout} s; is the broker up?",
                [],
                topic=self.topic,
                pending=left,
            )

    def close(self, timeout: float | None = None) -> None:
        """Flushes (raising like :meth:`flush`) and releases the producer; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush(timeout)
        finally:
            self._chunk_producer.close()
            closer = getattr(self._producer, "close", None)
            if callable(closer):
                try:
                    closer()
                except Exception as e:  # an already-failed producer may refuse; the flush said why
                    log.debug("producer close: %s", e)

    def _check_open(self) -> None:
        if self._closed:
            raise PublisherClosedError(f"publisher for {self.topic} is closed")

    def __enter__(self) -> "RolloutPublisher":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Exception as e:  # do not hide the exception that is already on its way
            log.error("closing the publisher for %s while handling %s: %s", self.topic, exc_type.__name__, e)


__all__ = ["DEFAULT_TOPIC", "FailedDelivery", "PublisherStats", "RolloutPublisher", "producer_settings"]

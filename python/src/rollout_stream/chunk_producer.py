"""Writing values above a topic's record limit as chunk sets, one Kafka transaction each.

The publisher and the dead-letter writer send what fits as one record, as
before; a larger value goes through :class:`ChunkProducer`, a second,
transactional confluent-kafka producer: begin, the chunks to one partition,
commit. A read_committed reader therefore sees the whole set or nothing; a
writer killed inside the transaction leaves chunks that are aborted (by its
next ``init_transactions`` with the same id, or by the broker after
``transaction.timeout.ms``) and that no reader hands on.

The limit is the topic's ``max.message.bytes`` (which includes the broker's
``message.max.bytes`` default), read once with ``describe_configs``; when it
cannot be read the configured limit is used, with one log line.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

from . import kafka_env
from .chunk_stream import crash_now, crash_point
from .chunks import CHUNK_ALIGN, CHUNK_HEADER_SIZE, DEFAULT_MAX_VALUE_BYTES, split_into_chunks
from .errors import KafkaOperationError, RecordTooLargeError, RolloutStreamError

log = logging.getLogger(__name__)

# The configured record limit (kafka.max_message_bytes on the TypeScript side), used when a topic's is unreadable.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
BATCH_OVERHEAD = 61  # record batch header
RECORD_OVERHEAD = 32  # one record's framing, generously
SLACK = 1024


def chunk_budget(limit: int, key: bytes | None, headers: Any = None) -> int:
    """Payload bytes per chunk (a multiple of 64) for a topic whose records may be ``limit`` bytes.

    ``limit - batch header - record framing - key - headers - chunk header - 1 KiB``:
    the record that carries the chunk stays under the limit. A value of at
    most this many bytes is sent whole.
    """
    head = sum(len(n) + len(v or b"") + 8 for n, v in (headers or ()))
    room = limit - BATCH_OVERHEAD - RECORD_OVERHEAD - len(key or b"") - head - CHUNK_HEADER_SIZE - SLACK
    return max(CHUNK_ALIGN, room // CHUNK_ALIGN * CHUNK_ALIGN)


def topic_record_limit(brokers: str, topic: str, config: Mapping[str, Any] | None = None, *,
                       fallback: int = DEFAULT_MAX_MESSAGE_BYTES, timeout: float = 10.0) -> int:
    """The topic's ``max.message.bytes``, else ``fallback`` (one warning says why)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    why = "not reported"
    try:
        admin = AdminClient({**kafka_env.client_config(brokers), **dict(config or {})})
        res = ConfigResource(ResourceType.TOPIC, topic)
        entries = admin.describe_configs([res], request_timeout=timeout)[res].result(timeout=timeout)
        entry = entries.get("max.message.bytes")
        if entry is not None and entry.value is not None:
            return int(entry.value)
    except Exception as e:  # authorization_failed, timeouts, an unknown topic: fall back, loudly
        why = f"{type(e).__name__}: {e}"
    log.warning("record limit of %s unreadable (%s); using kafka.max_message_bytes = %d", topic, why, fallback)
    return fallback


def producer_settings(brokers: str, limit: int, transactional_id: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The chunk producer's librdkafka settings: transactional, and one chunk per batch.

    librdkafka makes its own batches, and the broker checks ``max.message.bytes``
    on a batch: ``batch.size`` = the limit keeps every batch to one chunk
    (a second would not fit), and ``message.max.bytes`` lets a chunk of up to
    the limit through the client.
    """
    return {
        **kafka_env.client_config(brokers),
        **dict(extra or {}),
        "transactional.id": transactional_id,
        "enable.idempotence": True,
        "acks": "all",
        "batch.size": limit,
        "message.max.bytes": limit + 1024 * 1024,
        "allow.auto.create.topics": False,
    }


class ChunkProducer:
    """Sends chunk sets to one topic, each inside its own transaction, synchronously.

    Args:
        topic: The topic written.
        brokers: Bootstrap servers.
        limit: The topic's record limit (:func:`topic_record_limit`).
        transactional_id: Its ``transactional.id``; default ``rollout-stream.publisher.<uuid4>``.
            A restarted writer with the same id aborts what its predecessor left open at once;
            a new id leaves that to the broker's ``transaction.timeout.ms``.
        config: More librdkafka settings (SASL/TLS, ...).
        timeout: Seconds a transaction may take (init, every chunk, commit).
        max_value_bytes: The ceiling; a larger value is :class:`RecordTooLargeError`.
        crash_name: The ``$RS_CRASH_AT`` point (``<name>:<k>``) that kills the
            process after chunk ``k`` was sent, inside the open transaction (tests).
    """

    def __init__(
        self,
        topic: str,
        brokers: str,
        limit: int,
        *,
        transactional_id: str | None = None,
        config: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        crash_name: str = "publisher.mid-set",
    ) -> None:
        self.topic = topic
        self.brokers = brokers
        self.limit = limit
        self.transactional_id = transactional_id or f"rollout-stream.publisher.{uuid.uuid4()}"
        self.timeout = timeout
        self.max_value_bytes = max_value_bytes
        self._config = dict(config or {})
        self._producer: Any = None
        self._crash_name = crash_name
        self._crash_at = crash_point(crash_name)
        self.sets = 0
        self.chunks = 0

    def budget(self, key: bytes | None, headers: Any = None) -> int:
        """Largest value sent whole to this topic; above it, a chunk set."""
        return chunk_budget(self.limit, key, headers)

    def _client(self) -> Any:
        if self._producer is None:
            from confluent_kafka import KafkaException, Producer

            p = Producer({**producer_settings(self.brokers, self.limit, self.transactional_id, self._config),
                          "error_cb": lambda err: log.warning("kafka chunk producer: %s", err)})
            try:
                p.init_transactions(self.timeout)
            except KafkaException as e:
                raise KafkaOperationError(
                    f"chunk producer for {self.topic} (transactional.id {self.transactional_id}) could not start its "
                    f"transactions: {e.args[0]}; the principal needs WRITE on that transactional id",
                    topic=self.topic, cause=e,
                ) from e
            self._producer = p
        return self._producer

    def send(self, key: bytes | None, value: bytes | bytearray | memoryview, partition: int, headers: Any = None) -> int:
        """Writes ``value`` as one chunk set to ``partition`` and commits it; returns the chunk count.

        Raises:
            RecordTooLargeError: ``value`` is above ``max_value_bytes``.
            KafkaOperationError: The transaction did not commit (it was aborted: nothing is visible).
        """
        from confluent_kafka import KafkaException

        size = len(value)
        if size > self.max_value_bytes:
            raise RecordTooLargeError(
                f"a {size}-byte value to {self.topic} is above the ceiling of {self.max_value_bytes} bytes "
                "(max_value_bytes); not even a chunk set carries it",
                topic=self.topic, size=size,
            )
        chunks = split_into_chunks(bytes(value), self.budget(key, headers), os.urandom(16))
        p = self._client()
        failed: list[str] = []
        ts = int(time.time() * 1000)  # every chunk carries the record's one timestamp (time lookups land on chunk 0)

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(str(err))

        try:
            p.begin_transaction()
            for i, chunk in enumerate(chunks):
                self._produce(p, key, chunk, partition, headers, ts, on_delivery)
                if self._crash_at == i:
                    p.flush(self.timeout)  # the chunks so far are on the broker, in the open transaction
                    crash_now(f"{self._crash_name}:{i}")
            p.commit_transaction(self.timeout)
            if failed:
                raise KafkaOperationError(f"chunk not delivered: {failed[0]}", topic=self.topic)
        except (KafkaException, RolloutStreamError) as e:
            self._abort()
            why = e.args[0] if e.args else e
            raise KafkaOperationError(
                f"writing a {size}-byte value as {len(chunks)} chunks to {self.topic} partition {partition} failed "
                f"(transaction aborted, nothing of it is visible): {why}",
                topic=self.topic, partition=partition, size=size, cause=e,
            ) from e
        self.sets += 1
        self.chunks += len(chunks)
        return len(chunks)

    def _produce(self, p: Any, key: bytes | None, chunk: bytes, partition: int, headers: Any, ts: int, on_delivery: Any) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                p.produce(self.topic, value=chunk, key=key, partition=partition, headers=headers, timestamp=ts,
                          on_delivery=on_delivery)
                p.poll(0)
                return
            except BufferError:
                if time.monotonic() > deadline:
                    raise KafkaOperationError(f"chunk producer queue for {self.topic} stayed full for {self.timeout} s",
                                              topic=self.topic) from None
                p.poll(0.05)

    def _abort(self) -> None:
        from confluent_kafka import KafkaException

        try:
            self._producer.abort_transaction(self.timeout)
        except KafkaException as e:  # fatal (fenced) or no transaction: start over with a new client
            log.warning("chunk producer for %s: abort failed (%s); it starts over", self.topic, e)
            self._producer = None

    def close(self) -> None:
        self._producer = None

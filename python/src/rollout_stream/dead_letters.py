"""Dead letters from the trainer side: a packed record the consumer cannot decode.

With ``PackedConsumer(on_undecodable="dead-letter", dead_letter_topic=T)`` such
a record is written to ``T`` in the pipeline's own ``DeadLetter`` format
(``schemas/dead-letter.avsc``, Confluent-framed, schema registered under
``T-value`` with the text the TypeScript side registers): reason
``undecodable``, stage ``trainer``, the error code and message, and the
original key and value bytes with their coordinates, so the usual
dead-letter tools can show and re-drive it. The write is synchronous; only
after the broker took it does the consumer move past the record.

A chunk set that cannot be handed on whole is reason ``incomplete_record``,
with its first chunk's coordinates and no value. A dead letter larger than
the topic's limit (an undecodable chunked record carries its whole value)
is written as a chunk set, in one transaction, like the publisher's.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import fastavro

from . import kafka_env, schema_files
from .errors import KafkaOperationError, RolloutStreamError
from .framing import frame
from .record_meta import BATCH_ID_HEADER, WEIGHT_VERSION_HEADER, Record

REASON = "undecodable"
INCOMPLETE_REASON = "incomplete_record"
STAGE = "trainer"

# The shipped copy of schemas/dead-letter.avsc (rollout_stream.schema_files).
DEAD_LETTER_SCHEMA: dict[str, Any] = schema_files.schema_json("dead-letter.avsc")


def dead_letter_for(record: Record, error: RolloutStreamError, now_ms: int | None = None) -> dict[str, Any]:
    """The ``DeadLetter`` record for an undecodable packed record (the TypeScript ``undecodableRecord``).

    An incomplete chunk set (``error.code == "incomplete_record"``) has no value to keep.
    """
    msg = record.message
    incomplete = error.code == INCOMPLETE_REASON
    value = None if incomplete else record.value
    return {
        "reason": INCOMPLETE_REASON if incomplete else REASON,
        "message": f"[{error.code}] {error.args[0] if error.args else error}",
        "stage": STAGE,
        "group_id": record.key,
        "batch_id": record.batch_id,
        "row_indices": [],
        "missing_row_indices": [],
        "records": [
            {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(), "key": msg.key(),
             "value": None if value is None else bytes(value)}
        ],
        "produced_at": int(time.time() * 1000) if now_ms is None else now_ms,
    }


class DeadLetterWriter:
    """Writes :func:`dead_letter_for` records to one topic, synchronously.

    Args:
        topic: The dead-letter topic (e.g. ``rollout.dead-letter`` with the pipeline's prefix).
        brokers: Bootstrap servers; ``None``: ``$KAFKA_BROKERS`` or the default.
        registry_client: A ``SchemaRegistryClient``; the schema is registered on first use.
        config: Extra librdkafka producer settings; they win over the SASL/TLS
            settings of the environment (:mod:`rollout_stream.kafka_env`).
        timeout: Seconds a write waits for the broker.
    """

    def __init__(self, topic: str, brokers: str | None, registry_client: Any, config: Mapping[str, Any] | None = None, timeout: float = 30.0) -> None:
        from confluent_kafka import Producer

        from .consumer import MAX_MESSAGE_BYTES

        self.topic = topic
        self.timeout = timeout
        self.brokers = kafka_env.brokers(brokers)
        self._config = dict(config or {})
        self._chunks: Any = None
        self._registry = registry_client
        self._schema_id: int | None = None
        self._parsed = fastavro.parse_schema(DEAD_LETTER_SCHEMA)
        self._producer = Producer(
            {
                **kafka_env.client_config(brokers),
                "enable.idempotence": True,
                "acks": "all",
                "message.max.bytes": MAX_MESSAGE_BYTES + 1024 * 1024,
                **dict(config or {}),
            }
        )

    def _id(self) -> int:
        if self._schema_id is None:
            from confluent_kafka.schema_registry import Schema

            from .row_completed_schema import registered_text

            self._schema_id = int(self._registry.register_schema(f"{self.topic}-value", Schema(registered_text(DEAD_LETTER_SCHEMA), "AVRO")))
        return self._schema_id

    def write(self, record: Record, error: RolloutStreamError) -> None:
        """Writes the dead letter of ``record`` and waits until the broker has it.

        Raises:
            KafkaOperationError: The broker did not take it within ``timeout``.
            RegistryUnavailableError / SchemaRegistryError: The schema could not be registered.
        """
        import io

        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, self._parsed, dead_letter_for(record, error))
        headers = [(n, v) for n, v in (record.message.headers() or []) if n in (WEIGHT_VERSION_HEADER, BATCH_ID_HEADER)]
        value = frame(self._id(), buf.getvalue())
        chunks = self._chunk_producer()
        if len(value) > chunks.budget(record.message.key(), headers):
            chunks.send(record.message.key(), value, self._partition_of(record.message.key()), headers)
            return
        failed: list[Any] = []
        self._producer.produce(
            self.topic,
            key=record.message.key(),
            value=value,
            headers=headers,
            on_delivery=lambda err, _msg: failed.append(err) if err is not None else None,
        )
        left = self._producer.flush(self.timeout)
        if left or failed:
            raise KafkaOperationError(
                f"dead letter for {record.topic}[{record.partition}]@{record.offset} not written to {self.topic}: "
                f"{failed[0] if failed else 'timed out'}",
                topic=self.topic,
            )

    def _chunk_producer(self) -> Any:
        if self._chunks is None:
            from .chunk_producer import ChunkProducer, topic_record_limit

            limit = topic_record_limit(self.brokers, self.topic, self._config, timeout=self.timeout)
            own = {"batch.size", "message.max.bytes", "transactional.id", "linger.ms", "enable.idempotence", "acks"}
            self._chunks = ChunkProducer(self.topic, self.brokers, limit, config={k: v for k, v in self._config.items() if k not in own},
                                         timeout=self.timeout, crash_name="dead-letter.mid-set")
        return self._chunks

    def _partition_of(self, key: bytes | None) -> int:
        """Where a chunked dead letter goes: where the key maps (the Java client's murmur2), a random one without a key."""
        import random

        from .partitioner import partition_for_key

        md = self._producer.list_topics(self.topic, timeout=self.timeout)
        t = md.topics.get(self.topic)
        if t is None or t.error is not None or not t.partitions:
            raise KafkaOperationError(f"dead-letter topic {self.topic} is not usable ({t.error if t else 'missing'})", topic=self.topic)
        n = len(t.partitions)
        return random.randrange(n) if key is None else partition_for_key(key, n)

    def close(self) -> None:
        self._producer.flush(self.timeout)
        if self._chunks is not None:
            self._chunks.close()

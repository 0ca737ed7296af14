"""Error types of the trainer client.

Every error carries a stable string ``code`` (for logs, metrics and tests)
and a ``retriable`` flag, mirroring the TypeScript side's error base.
"""

from __future__ import annotations

from typing import Any


class RolloutStreamError(Exception):
    """Base class of every error this package raises on purpose.

    Attributes:
        code: Stable machine-readable code, e.g. ``"framing"``.
        retriable: Whether retrying the same operation later may succeed.
        details: Structured context (topic, partition, offset, schema id, ...).
    """

    code = "rollout_stream"
    retriable = False

    def __init__(self, message: str, *, cause: BaseException | None = None, **details: Any) -> None:
        super().__init__(message)
        self.details = details
        if cause is not None:
            self.__cause__ = cause


class FramingError(RolloutStreamError):
    """The value is not a Confluent wire-format frame (magic byte, schema id)."""

    code = "framing"


class DecodeError(RolloutStreamError):
    """The Avro body or a packed field inside it is malformed."""

    code = "undecodable"


class UnknownSchemaError(RolloutStreamError):
    """The registry does not know the schema id named in the frame."""

    code = "unknown_schema"


class RegistryUnavailableError(RolloutStreamError):
    """The schema registry could not be reached or answered with a server error."""

    code = "registry_unavailable"
    retriable = True


class BrokerUnavailableError(RolloutStreamError):
    """No Kafka broker answered at the configured bootstrap address."""

    code = "broker_unavailable"
    retriable = True


class KafkaOperationError(RolloutStreamError):
    """A Kafka operation (poll, commit, seek) failed."""

    code = "kafka"


class RecordTooLargeError(KafkaOperationError):
    """A value above the ceiling (``max_value_bytes``, 4 GiB): not even a chunk set carries it."""

    code = "record_too_large"


class OffsetLookupError(RolloutStreamError):
    """Newly assigned partitions whose start offset could not be established; they are not being read.

    Looking up their committed offset or watermarks failed for the whole
    retry bound (or a callable ``start_offsets`` raised). Raised by every
    ``poll`` of that consumer until it is closed; a new consumer (a
    restarted trainer) looks them up again.

    Attributes:
        partitions: ``[(topic, partition)]`` left unread, sorted.
    """

    code = "offset_lookup"
    retriable = True

    def __init__(self, message: str, partitions: list[tuple[str, int]], **details: Any) -> None:
        super().__init__(message, partitions=partitions, **details)
        self.partitions = partitions


class DeviceUnavailableError(RolloutStreamError):
    """``device=`` names an accelerator this process cannot use (no CUDA, bad index)."""

    code = "device_unavailable"


class InvalidRowError(RolloutStreamError, ValueError):
    """A row or result handed to the publisher breaks SPEC §2 / §2.1; nothing was sent.

    Attributes:
        field: Path of the offending field, e.g. ``"message_log[2].token_ids"``
            or ``"gym_result.response.output"``; the message starts with it.
    """

    code = "invalid_row"

    def __init__(self, field: str, problem: str, **details: Any) -> None:
        super().__init__(f"{field} {problem}", field=field, **details)
        self.field = field


class DeliveryError(RolloutStreamError):
    """The broker did not take one or more published records (raised by flush, end_batch, close).

    Attributes:
        failures: One :class:`~rollout_stream.publisher.FailedDelivery` per lost
            record (topic, partition, key, error), oldest first.
    """

    code = "delivery"
    retriable = True

    def __init__(self, message: str, failures: list[Any], **details: Any) -> None:
        super().__init__(message, failures=failures, **details)
        self.failures = failures


class SchemaRegistrationError(RolloutStreamError):
    """The registry refused the writer schema (incompatible, or the subject's compatibility is not BACKWARD)."""

    code = "registry_error"


class PublisherClosedError(RolloutStreamError):
    """A publish call on a :class:`~rollout_stream.publisher.RolloutPublisher` after ``close()``."""

    code = "publisher_closed"


class SchemaLayoutError(RolloutStreamError):
    """The row-completed schema is not the layout the publisher's hand-written encoder writes."""

    code = "schema_layout"


class ConfigError(RolloutStreamError, ValueError):
    """An environment variable (or setting) has a value this package cannot use.

    Attributes:
        variable: The variable's name, e.g. ``"KAFKA_SASL_MECHANISM"``; the message starts with it.
    """

    code = "config"

    def __init__(self, variable: str, problem: str, **details: Any) -> None:
        super().__init__(f"{variable} {problem}", variable=variable, **details)
        self.variable = variable

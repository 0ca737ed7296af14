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


class DeviceUnavailableError(RolloutStreamError):
    """``device=`` names an accelerator this process cannot use (no CUDA, bad index)."""

    code = "device_unavailable"

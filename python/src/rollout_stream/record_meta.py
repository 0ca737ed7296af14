"""What a packed record says about itself before its value is decoded.

The stages write two Kafka record headers on every topic (``weight_version``
as a decimal string, ``batch_id`` as UTF-8): a reader can drop stale or
unwanted groups from them without touching the value. Records written
before the headers existed (or by a producer that does not set them) have
``None`` here and are judged after decoding instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

WEIGHT_VERSION_HEADER = "weight_version"
BATCH_ID_HEADER = "batch_id"


def header_values(headers: Sequence[tuple[str, bytes | None]] | None) -> tuple[int | None, str | None]:
    """``(weight_version, batch_id)`` from a record's headers; ``None`` for a missing or unreadable one."""
    wv: int | None = None
    bid: str | None = None
    for name, raw in headers or ():
        if raw is None:
            continue
        if name == WEIGHT_VERSION_HEADER:
            try:
                wv = int(raw)
            except ValueError:
                wv = None
        elif name == BATCH_ID_HEADER:
            try:
                bid = raw.decode("utf-8")
            except UnicodeDecodeError:
                bid = None
    return wv, bid


@dataclass
class Record:
    """A fetched, not yet decoded ``rollout.packed`` record.

    Attributes:
        message: The confluent-kafka ``Message``.
        weight_version, batch_id: From the headers (``None`` when absent).
        epoch: Which assignment of its partition fetched it (see
            :meth:`PackedConsumer.is_current`).
    """

    message: Any
    weight_version: int | None
    batch_id: str | None
    epoch: int = 0

    @classmethod
    def of(cls, message: Any, epoch: int = 0) -> "Record":
        wv, bid = header_values(message.headers())
        return cls(message, wv, bid, epoch)

    @property
    def topic(self) -> str:
        return self.message.topic()

    @property
    def partition(self) -> int:
        return self.message.partition()

    @property
    def offset(self) -> int:
        return self.message.offset()

    @property
    def key(self) -> str | None:
        k = self.message.key()
        return None if k is None else k.decode("utf-8", "replace")

    @property
    def timestamp_ms(self) -> int | None:
        kind, ts = self.message.timestamp()
        return ts if kind != 0 else None  # TIMESTAMP_NOT_AVAILABLE

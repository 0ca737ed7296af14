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

    A value larger than its topic's limit arrives as a chunk set (see
    :mod:`rollout_stream.chunks`); the reader hands it on as one record whose
    ``message`` is the set's first chunk (its key, headers, timestamp and
    offset are the record's) and whose ``value`` is the reassembled whole.

    Attributes:
        message: The confluent-kafka ``Message`` (a chunked record's first chunk).
        weight_version, batch_id: From the headers (``None`` when absent).
        epoch: Which assignment of its partition fetched it (see
            :meth:`PackedConsumer.is_current`).
        next_offset: The offset to commit after it (``None``: ``offset + 1``);
            for a chunk set its last chunk + 1, unless another set is still open there.
        whole: The reassembled value of a chunk set (a read-only memoryview of
            one 64-byte-aligned buffer); ``None``: the message's own value.
        chunks: How many records it was read from.
        incomplete: A chunk set that cannot be handed on whole
            (:class:`~rollout_stream.chunks.Incomplete`); its value is not there.
        error: A chunk whose header does not parse
            (:class:`~rollout_stream.chunks.ChunkFormatError`).
        stale_skipped: Dropped from its first chunk's headers (the stale skip)
            without being buffered; its value is not there.
    """

    message: Any
    weight_version: int | None
    batch_id: str | None
    epoch: int = 0
    next_offset: int | None = None
    whole: Any = None
    chunks: int = 1
    incomplete: Any = None
    error: Any = None
    stale_skipped: bool = False

    @classmethod
    def of(cls, message: Any, epoch: int = 0, **kw: Any) -> "Record":
        wv, bid = header_values(message.headers())
        return cls(message, wv, bid, epoch, **kw)

    @property
    def next(self) -> int:
        """The offset to commit after this record."""
        return self.offset + 1 if self.next_offset is None else self.next_offset

    @property
    def value(self) -> Any:
        """The whole value: reassembled for a chunk set, else the message's own."""
        return self.message.value() if self.whole is None else self.whole

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

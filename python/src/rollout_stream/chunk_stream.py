"""Reassembling chunk sets while reading: one :class:`~rollout_stream.chunks.Reassembler` per partition.

The readers (:class:`~rollout_stream.PackedConsumer`, :mod:`rollout_stream.replay_reader`,
``inspect``) push every fetched confluent-kafka ``Message`` here and get
:class:`~rollout_stream.record_meta.Record` objects back in first-chunk order:
whole records as they are, a completed chunk set as one record (its first
chunk's message, the reassembled value, ``next_offset``), and what cannot be
handed on whole as a record with ``incomplete`` or ``error`` set, which the
reader turns into a dead letter or an error, never into a silent gap.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable

from .chunks import DEFAULT_MAX_VALUE_BYTES, ChunkFormatError, Fetched, Reassembled, Reassembler, is_chunk, parse_chunk
from .positions import TopicPartitionKey
from .record_meta import Record

# A set open longer than this with nothing left to fetch can never complete
# (a non-transactional writer died); longer than any writer's transaction timeout.
DEFAULT_CHUNK_WAIT_MS = 120_000
# Bytes of open sets plus records held behind them, per partition, beyond one lone set.
DEFAULT_MAX_HELD_BYTES = 256 * 1024 * 1024

SkipSet = Callable[[Record], bool]
LogStart = Callable[[str, int], int]


def crash_point(name: str) -> int | None:
    """``k`` when ``$RS_CRASH_AT`` is ``<name>:<k>`` (a test arms it; the Python twin of crash-points.ts)."""
    armed = os.environ.get("RS_CRASH_AT", "")
    point, _, k = armed.partition(":")
    if point != name:
        return None
    try:
        return int(k or 0)
    except ValueError:
        raise ValueError(f"RS_CRASH_AT={armed!r}: expected {name}:<chunk index>") from None


def crash_now(name: str) -> None:
    """Dies at once, as a SIGKILL would: nothing flushed, nothing committed, no finally blocks."""
    os.write(2, f"RS_CRASH_AT {name}: killing process {os.getpid()}\n".encode())
    os.kill(os.getpid(), signal.SIGKILL)


class ChunkedPartitions:
    """Reassembly state of every partition a reader holds.

    Args:
        log_start: ``(topic, partition) -> log start offset``, asked when a
            chunk of a set that began before a trusted start turns up (was its
            head handed on before, or did retention take it?).
        verify_crc: Check each set's whole-value CRC-32 (structure is always checked).
        max_value_bytes: A set declaring more is undecodable before anything is allocated.
        max_held_bytes, chunk_wait_ms: As :class:`~rollout_stream.chunks.Reassembler`.
    """

    def __init__(
        self,
        log_start: LogStart,
        *,
        verify_crc: bool,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        max_held_bytes: int = DEFAULT_MAX_HELD_BYTES,
        chunk_wait_ms: int = DEFAULT_CHUNK_WAIT_MS,
    ) -> None:
        self._log_start = log_start
        self._verify = verify_crc
        self._max_value = max_value_bytes
        self._max_held = max_held_bytes
        self._wait_ms = chunk_wait_ms
        self._parts: dict[TopicPartitionKey, Reassembler] = {}
        self._crash_at = crash_point("consumer.mid-set")
        self._sets_begun = 0

    def start(self, key: TopicPartitionKey, offset: int, trusted: bool) -> None:
        """Reading ``key`` (re)starts at ``offset``: its state is dropped.

        ``trusted``: ``offset`` is a resume offset (committed, saved, or a
        record's own first offset), so chunks of sets that began before it were
        handed on already and are skipped.
        """
        self._parts[key] = Reassembler(
            offset, trusted, max_held_bytes=self._max_held, chunk_wait_ms=self._wait_ms,
            max_value_bytes=self._max_value, verify_crc=self._verify,
        )

    def drop(self, key: TopicPartitionKey) -> None:
        """Forgets a partition's state (revoked or lost)."""
        self._parts.pop(key, None)

    def open_sets(self, key: TopicPartitionKey) -> int:
        r = self._parts.get(key)
        return 0 if r is None else r.open_sets

    def push(self, msg: Any, epoch: int = 0, skip_set: SkipSet | None = None) -> list[Record]:
        """Takes one fetched message; returns the records now complete, in first-chunk order.

        A partition never started is started at this message, untrusted.
        ``skip_set(record of chunk 0)`` true drops that set from its first
        chunk's headers without buffering it (it comes out ``stale_skipped``).
        """
        key = (msg.topic(), msg.partition())
        r = self._parts.get(key)
        if r is None:
            self.start(key, msg.offset(), trusted=False)
            r = self._parts[key]
        value = msg.value()
        kind, ts = msg.timestamp()
        fetched = Fetched(msg.offset(), value, msg.key(), None, ts if kind != 0 else None, msg)
        skip = False
        index = -1
        if is_chunk(value):
            try:
                index = parse_chunk(value, self._max_value)[0].index
            except ChunkFormatError:
                index = -1  # the Reassembler hands it out as undecodable
            if index == 0:
                self._sets_begun += 1
                if skip_set is not None:
                    skip = bool(skip_set(Record.of(msg, epoch)))
        if r.push(fetched, int(time.time() * 1000), skip=skip) is not None:
            r.answer_log_start(self._log_start(*key))
        if self._crash_at is not None and self._sets_begun == 2 and index == self._crash_at:
            crash_now(f"consumer.mid-set:{self._crash_at}")
        return [record_of(x, epoch) for x in r.take()]


def record_of(x: Reassembled, epoch: int = 0) -> Record:
    """The reader's :class:`Record` for one hand-out of the Reassembler."""
    msg = x.first.message
    if x.kind == "record":
        whole = x.value if x.chunks > 1 else None
        return Record.of(msg, epoch, next_offset=x.next_offset, whole=whole, chunks=x.chunks)
    if x.kind == "skipped":
        return Record.of(msg, epoch, next_offset=x.next_offset, chunks=x.chunks, stale_skipped=True)
    if x.kind == "incomplete":
        return Record.of(msg, epoch, next_offset=x.next_offset, incomplete=x.incomplete)
    return Record.of(msg, epoch, next_offset=x.next_offset, error=x.error)


def record_error(record: Record) -> Exception | None:
    """Why a record has no whole value (an incomplete set or an unparsable chunk); ``None`` when it has one."""
    if record.incomplete is not None:
        e = record.incomplete.error()
        e.details.update(topic=record.topic, partition=record.partition, offset=record.offset)
        return e
    return record.error

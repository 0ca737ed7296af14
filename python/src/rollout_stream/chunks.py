"""Chunk sets: values larger than their topic's limit (docs/design-chunked-records.md).

A chunked value travels as ``count`` records with the same key on one
partition, each holding a 48-byte header and one slice of the whole value.
The TypeScript twin is ``streams/chunks/chunk-format.ts`` and
``streams/chunks/reassembler.ts``; both read the golden fixtures and the
shared cases in ``docs/examples/chunks/``.

Byte grammar of one chunk (integers big-endian, as the Confluent header)::

    chunk       := header payload
    header      := magic version header_len set_id index count total_size payload_at crc
    magic       := 0xCB                 (1 byte; 0x00 is Confluent, '{' '[' JSON)
    version     := 0x01                 (1 byte; any other is undecodable)
    header_len  := uint16               (48; a v1 reader accepts >= 48 and skips the rest)
    set_id      := 16 bytes             (random per set)
    index       := uint32               (0 .. count-1)
    count       := uint32               (>= 2: a value that fits is never chunked)
    total_size  := uint64               (bytes of the whole value, <= max_value_bytes)
    payload_at  := uint64               (where this payload starts in the whole value)
    crc         := uint32               (CRC-32 IEEE, zlib's, of the whole value; the same in every chunk)
    payload     := bytes to the end of the record value

Writer rules: payloads are contiguous, each but the last a multiple of 64
bytes; their concatenation is the whole value (for Avro topics the
Confluent-framed value), so the existing decoders take it unchanged.
"""

from __future__ import annotations

import struct
import zlib
from bisect import insort
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .errors import DecodeError, RolloutStreamError

CHUNK_MAGIC = 0xCB
CHUNK_VERSION = 1
CHUNK_HEADER_SIZE = 48
SET_ID_SIZE = 16
CHUNK_ALIGN = 64
DEFAULT_MAX_VALUE_BYTES = 2**32
_HEADER = struct.Struct(">BBH16sIIQQI")
_MAX_DROPPING = 1024
assert _HEADER.size == CHUNK_HEADER_SIZE


class ChunkFormatError(DecodeError):
    """A 0xCB value whose header no v1 reader accepts (code ``undecodable``)."""


class IncompleteRecordError(RolloutStreamError):
    """A chunk set that cannot be handed on whole (``on_undecodable="raise"``).

    ``details`` holds ``set_id``, ``first_offset``, ``last_offset``, ``have``,
    ``count`` and ``detail`` (see ``Incomplete``).
    """

    code = "incomplete_record"


@dataclass(frozen=True)
class ChunkHeader:
    set_id: bytes
    index: int
    count: int
    total_size: int
    payload_at: int
    crc: int
    header_len: int = CHUNK_HEADER_SIZE


def is_chunk(value: bytes | bytearray | memoryview | None) -> bool:
    """Whether a record value is a chunk (byte 0 is 0xCB); one that does not parse still is."""
    return value is not None and len(value) > 0 and value[0] == CHUNK_MAGIC


def encode_chunk_header(set_id: bytes, index: int, count: int, total_size: int, payload_at: int, crc: int) -> bytes:
    """The 48-byte v1 header (grammar in the module docstring).

    Raises:
        ValueError: A header no v1 reader would accept.
    """
    if len(set_id) != SET_ID_SIZE:
        raise ValueError(f"set id of {len(set_id)} bytes, expected {SET_ID_SIZE}")
    if not (2 <= count <= 0xFFFFFFFF and 0 <= index < count):
        raise ValueError(f"chunk {index} of {count}")
    if not 0 <= payload_at <= total_size < 2**64:
        raise ValueError(f"payload at {payload_at} of {total_size}")
    return _HEADER.pack(CHUNK_MAGIC, CHUNK_VERSION, CHUNK_HEADER_SIZE, bytes(set_id), index, count, total_size, payload_at, crc & 0xFFFFFFFF)


def parse_chunk(value: bytes | bytearray | memoryview, max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> tuple[ChunkHeader, memoryview]:
    """Parses one chunk: its header and its payload (a view of ``value``, no copy).

    Checks what one chunk can say about itself (magic, version, header_len,
    ``index < count``, ``count >= 2``, the total against ``max_value_bytes``,
    the payload inside the total); the Reassembler checks the rest.

    Raises:
        ChunkFormatError: The header does not parse (code ``undecodable``).
    """
    n = len(value)

    def bad(why: str) -> ChunkFormatError:
        return ChunkFormatError(f"chunk of {n} bytes: {why}", size=n)

    if n < 4:
        raise bad("truncated header")
    view = value if isinstance(value, memoryview) else memoryview(value)
    if view[0] != CHUNK_MAGIC:
        raise bad(f"unknown magic byte {view[0]} (expected {CHUNK_MAGIC})")
    if view[1] != CHUNK_VERSION:
        raise bad(f"unknown chunk version {view[1]} (this reader knows {CHUNK_VERSION})")
    header_len = int.from_bytes(view[2:4], "big")
    if header_len < CHUNK_HEADER_SIZE:
        raise bad(f"header_len {header_len} below {CHUNK_HEADER_SIZE}")
    if n < header_len:
        raise bad(f"truncated header (header_len {header_len})")
    _, _, _, set_id, index, count, total, at, crc = _HEADER.unpack_from(view, 0)
    if count < 2:
        raise bad(f"count {count} (a chunk set has at least 2 chunks)")
    if index >= count:
        raise bad(f"index {index} out of range for count {count}")
    if total > max_value_bytes:
        raise bad(f"total_size {total} above the ceiling of {max_value_bytes} bytes (max_value_bytes)")
    payload = view[header_len:]
    if at + len(payload) > total:
        raise bad(f"payload of {len(payload)} bytes at {at} runs past total_size {total}")
    return ChunkHeader(set_id, index, count, total, at, crc, header_len), payload


def split_into_chunks(value: bytes, payload_bytes: int, set_id: bytes) -> list[bytes]:
    """Cuts ``value`` into chunk record values of at most ``payload_bytes`` payload each.

    Raises:
        ValueError: ``payload_bytes`` is not a positive multiple of 64, or the
            value fits in one chunk (it is never chunked).
    """
    if payload_bytes <= 0 or payload_bytes % CHUNK_ALIGN:
        raise ValueError(f"chunk payload of {payload_bytes} bytes: must be a positive multiple of {CHUNK_ALIGN}")
    count = -(-len(value) // payload_bytes)
    if count < 2:
        raise ValueError(f"a value of {len(value)} bytes fits in one chunk of {payload_bytes}: it is not chunked")
    crc = zlib.crc32(value)
    return [
        encode_chunk_header(set_id, i, count, len(value), i * payload_bytes, crc) + value[i * payload_bytes : (i + 1) * payload_bytes]
        for i in range(count)
    ]


def aligned_buffer(size: int) -> np.ndarray:
    """A uint8 array of ``size`` bytes whose data starts at a multiple of 64 (bytes are only 16-aligned)."""
    raw = np.empty(size + CHUNK_ALIGN - 1, np.uint8)
    start = -raw.ctypes.data % CHUNK_ALIGN
    return raw[start : start + size]


@dataclass(frozen=True)
class Fetched:
    """One fetched record as the Reassembler needs it; ``message`` is the client's own, passed through."""

    offset: int
    value: bytes | bytearray | memoryview | None
    key: bytes | None = None
    headers: Any = None
    timestamp: int | None = None
    message: Any = None


IncompleteDetail = Literal["inconsistent", "crc_mismatch", "headless", "log_start", "timeout", "memory_cap"]


@dataclass(frozen=True)
class Incomplete:
    """Why a set was not handed on whole (``incomplete_record``'s ``reason_detail``).

    ``detail``: ``inconsistent`` (a chunk that does not continue chunk 0),
    ``crc_mismatch``, ``headless`` (began before an untrusted start),
    ``log_start`` (retention took its head), ``timeout`` (no chunk for
    ``chunk_wait_ms`` with nothing left to fetch), ``memory_cap``.
    """

    set_id: str
    first_offset: int
    last_offset: int
    have: int
    count: int
    detail: IncompleteDetail

    def error(self) -> IncompleteRecordError:
        return IncompleteRecordError(
            f"incomplete chunk set {self.set_id} at offsets {self.first_offset}..{self.last_offset}: "
            f"{self.have} of {self.count} chunks ({self.detail})",
            **self.__dict__,
        )


@dataclass(frozen=True)
class Reassembled:
    """What the Reassembler hands out, in first-chunk order.

    ``kind``: ``record`` (``value`` is the whole value: the record's own when
    not chunked, else a read-only memoryview of one 64-byte-aligned buffer),
    ``incomplete``, ``undecodable`` (a 0xCB value that does not parse:
    ``error``), or ``skipped`` (a set skipped from chunk 0's headers).
    ``first`` is the record, or the set's chunk 0, whose key, headers and
    timestamp apply. ``next_offset`` is the offset to commit after it.
    """

    kind: Literal["record", "incomplete", "undecodable", "skipped"]
    offset: int
    last_offset: int
    next_offset: int
    first: Fetched
    value: bytes | bytearray | memoryview | None = None
    chunks: int = 1
    incomplete: Incomplete | None = None
    error: ChunkFormatError | None = None


@dataclass
class _OpenSet:
    id: str
    first: Fetched
    count: int
    total_size: int
    crc: int
    skip: bool
    last_offset: int
    buf: np.ndarray | None
    have: int = 0
    bytes: int = 0
    running_crc: int = 0


@dataclass(order=True)
class _Ready:
    offset: int
    seq: int
    item: Reassembled = field(compare=False)


class Reassembler:
    """One partition's reassembly state machine (design §3), pure: no Kafka, no clock.

    Feed ``push`` in offset order (gaps are fine: read_committed leaves out
    aborted records and markers) and call ``take`` for what is ready. When
    ``push`` returns a set id, a headless set under a trusted start needs the
    partition's log start: call ``answer_log_start`` before the next push.
    After a seek, revoke or rebuild, build a new one.

    Args:
        start: The offset reading began at.
        trusted: Whether ``start`` is a resume offset we committed or saved.
        max_held_bytes: Cap on open sets' whole sizes plus the records held behind
            them; past it the oldest open set is given up, except a lone set
            with nothing behind it.
        chunk_wait_ms: The ``timeout`` rule's wait (``expire``).
        max_value_bytes: A larger ``total_size`` is undecodable before anything is allocated.
        verify_crc: Check the whole value's CRC-32 (incremental, per payload);
            structure (ids, indices, payload_at, total) is always checked.
    """

    def __init__(
        self,
        start: int,
        trusted: bool,
        *,
        max_held_bytes: int,
        chunk_wait_ms: int,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        verify_crc: bool = True,
    ) -> None:
        self._start = start
        self._trusted = trusted
        self._max_held = max_held_bytes
        self._wait_ms = chunk_wait_ms
        self._max_value = max_value_bytes
        self._verify_crc = verify_crc
        self._open: dict[str, _OpenSet] = {}
        self._ready: list[_Ready] = []
        self._seq = 0
        self._dropping: dict[str, None] = {}  # insertion-ordered set
        self._pending: tuple[Fetched, ChunkHeader, str] | None = None
        self._last_pushed: int | None = None
        self._last_chunk_ms: int | None = None
        self.restarted = 0
        """``rollout_stream_chunk_sets_restarted_total``: chunk 0 of an open set again."""

    def push(self, record: Fetched, now_ms: int, *, skip: bool = False) -> str | None:
        """Takes the next fetched record; returns a set id when the log start is needed.

        ``skip`` on chunk 0 drops its set without buffering it (the stale
        skip); it comes out as ``skipped``.

        Raises:
            RuntimeError: Offsets not increasing, or an unanswered question.
        """
        if self._pending is not None:
            raise RuntimeError("Reassembler.push: answer the log-start question first")
        if self._last_pushed is not None and record.offset <= self._last_pushed:
            raise RuntimeError(f"Reassembler.push: offset {record.offset} after {self._last_pushed}")
        self._last_pushed = record.offset
        if not is_chunk(record.value):
            self._add(Reassembled("record", record.offset, record.offset, 0, record, record.value))
            self._enforce_cap()  # held behind an open set, it counts
            return None
        self._last_chunk_ms = now_ms
        try:
            header, payload = parse_chunk(record.value, self._max_value)  # type: ignore[arg-type]
        except ChunkFormatError as e:
            self._add(Reassembled("undecodable", record.offset, record.offset, 0, record, record.value, error=e))
            return None
        sid = header.set_id.hex()
        if header.index == 0:
            if sid in self._open:
                self.restarted += 1  # the new chunk 0 replaces the partial set
            buf = None if skip else aligned_buffer(header.total_size)
            s = _OpenSet(sid, record, header.count, header.total_size, header.crc, skip, record.offset, buf)
            self._open[sid] = s
            self._continue(s, record, header, payload)
        elif sid in self._open:
            self._continue(self._open[sid], record, header, payload)
        elif sid in self._dropping:
            self._dropped(sid, header)
        elif self._trusted:
            self._pending = (record, header, sid)
            return sid
        else:
            self._headless(sid, record, header, "headless")
        self._enforce_cap()
        return None

    def answer_log_start(self, log_start: int) -> None:
        """The partition's log start, answering ``push``'s question."""
        if self._pending is None:
            raise RuntimeError("Reassembler.answer_log_start: nothing was asked")
        record, header, sid = self._pending
        self._pending = None
        if self._start < log_start:
            self._headless(sid, record, header, "log_start")
        else:
            self._dropped(sid, header)  # handed on before this trusted start

    def expire(self, now_ms: int, *, fetched_to: int, last_stable: int, high_watermark: int) -> None:
        """The ``timeout`` rule: nothing open on the broker, nothing left to fetch, no chunk for ``chunk_wait_ms``."""
        if not self._open or self._last_chunk_ms is None:
            return
        if last_stable != high_watermark or fetched_to < high_watermark or now_ms - self._last_chunk_ms < self._wait_ms:
            return
        for s in list(self._open.values()):
            self._fault(s, "timeout", more_to_come=True)

    def take(self) -> list[Reassembled]:
        """What can be handed on now, in first-offset order, each with its ``next_offset``."""
        out: list[Reassembled] = []
        oldest = self._oldest_open()
        while self._ready and (oldest is None or self._ready[0].offset < oldest):
            r = self._ready.pop(0).item
            nxt = r.last_offset + 1
            if oldest is not None:
                nxt = min(nxt, oldest)
            if self._ready:
                nxt = min(nxt, self._ready[0].offset)
            out.append(Reassembled(r.kind, r.offset, r.last_offset, nxt, r.first, r.value, r.chunks, r.incomplete, r.error))
        return out

    @property
    def bytes(self) -> int:
        """Each open set's whole size (allocated at its chunk 0) plus the ready records held behind the oldest."""
        return self._held_behind() + sum(s.total_size for s in self._open.values() if not s.skip)

    def _held_behind(self) -> int:
        oldest = self._oldest_open()
        if oldest is None:
            return 0
        return sum(len(r.item.value) for r in self._ready if r.item.value is not None and r.offset > oldest)

    @property
    def open_sets(self) -> int:
        return len(self._open)

    def _oldest_open(self) -> int | None:
        return min((s.first.offset for s in self._open.values()), default=None)

    def _continue(self, s: _OpenSet, record: Fetched, h: ChunkHeader, payload: memoryview) -> None:
        s.last_offset = record.offset
        if h.index != s.have or h.count != s.count or h.total_size != s.total_size or h.crc != s.crc or h.payload_at != s.bytes:
            # More may come unless this was due as the last chunk and says it is.
            self._fault(s, "inconsistent", more_to_come=not (s.have + 1 == s.count and h.index + 1 == h.count))
            return
        s.have += 1
        if s.buf is not None:
            s.buf[h.payload_at : h.payload_at + len(payload)] = np.frombuffer(payload, np.uint8)
            if self._verify_crc:
                s.running_crc = zlib.crc32(payload, s.running_crc)
        s.bytes += len(payload)
        if s.have < s.count:
            return
        del self._open[s.id]
        if s.buf is None:
            self._add(Reassembled("skipped", s.first.offset, s.last_offset, 0, s.first, None, s.count))
        elif s.bytes != s.total_size or (self._verify_crc and s.running_crc != s.crc):
            self._add(self._incomplete(s, "crc_mismatch"))
        else:
            s.buf.flags.writeable = False
            self._add(Reassembled("record", s.first.offset, s.last_offset, 0, s.first, memoryview(s.buf), s.count))

    def _fault(self, s: _OpenSet, detail: IncompleteDetail, *, more_to_come: bool) -> None:
        del self._open[s.id]
        if more_to_come:
            self._drop(s.id)
        self._add(self._incomplete(s, detail))

    def _incomplete(self, s: _OpenSet, detail: IncompleteDetail) -> Reassembled:
        inc = Incomplete(s.id, s.first.offset, s.last_offset, s.have, s.count, detail)
        return Reassembled("incomplete", s.first.offset, s.last_offset, 0, s.first, incomplete=inc)

    def _headless(self, sid: str, record: Fetched, h: ChunkHeader, detail: IncompleteDetail) -> None:
        self._dropped(sid, h)
        inc = Incomplete(sid, record.offset, record.offset, 1, h.count, detail)
        self._add(Reassembled("incomplete", record.offset, record.offset, 0, record, incomplete=inc))

    def _dropped(self, sid: str, h: ChunkHeader) -> None:
        if h.index + 1 < h.count:
            self._drop(sid)
        else:
            self._dropping.pop(sid, None)

    def _drop(self, sid: str) -> None:
        # Bounded: a set whose last chunk never comes would stay forever; one
        # forgotten early only makes its later chunks headless again.
        self._dropping.pop(sid, None)
        self._dropping[sid] = None
        if len(self._dropping) > _MAX_DROPPING:
            del self._dropping[next(iter(self._dropping))]

    def _add(self, r: Reassembled) -> None:
        self._seq += 1
        insort(self._ready, _Ready(r.offset, self._seq, r))

    def _enforce_cap(self) -> None:
        # One set alone, with nothing held behind it, always assembles: the
        # ceiling for a value is max_value_bytes, not this cap.
        while self._open and self.bytes > self._max_held and not (len(self._open) == 1 and self._held_behind() == 0):
            oldest = min(self._open.values(), key=lambda s: s.first.offset)
            self._fault(oldest, "memory_cap", more_to_come=True)

"""Reading one Avro ``PackedGroup`` body, tensor bytes as views.

:func:`read_parts` is the decoder's entry: when the writer schema has exactly
the layout :mod:`rollout_stream.packed_reader` knows (``schemas/packed.avsc``
today) that hand-written reader walks the body (about half of fastavro's time
here); any other writer schema, e.g. a newer one with added fields, goes
through fastavro's ``schemaless_reader`` with that writer schema. fastavro
reads from a file-like object; the one here hands out memoryviews of the
Kafka message for large reads, so tensor bytes are never copied before
``np.frombuffer`` on either path.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import fastavro

from .errors import DecodeError
from .packed_reader import known_layout, read_packed_group

PACKED_GROUP_NAME = "dev.rolloutstream.v1.PackedGroup"


def parse_writer_schema(schema: Mapping[str, Any] | str) -> dict[str, Any]:
    """Parses (with fastavro) and checks a writer schema of ``PackedGroup``.

    Args:
        schema: The schema as JSON text, a dict, or an already parsed schema.

    Raises:
        DecodeError: The schema is not valid Avro or is not a PackedGroup record.
    """
    try:
        raw = json.loads(schema) if isinstance(schema, str) else schema
        parsed = raw if raw.get("__fastavro_parsed") else fastavro.parse_schema(dict(raw))
    except Exception as e:  # fastavro raises several unrelated types
        raise DecodeError(f"writer schema is not valid Avro: {e}", cause=e) from e
    if parsed.get("type") != "record" or parsed.get("name") != PACKED_GROUP_NAME:
        raise DecodeError(
            f"writer schema is {parsed.get('name') or parsed.get('type')!r}, not {PACKED_GROUP_NAME}",
            schema_name=parsed.get("name"),
        )
    return parsed


class _ViewReader:
    """File-like over a record value whose large reads are memoryviews, not copies.

    fastavro reads every Avro ``bytes`` value with one ``read(n)``; answering
    big reads with a view of the Kafka message is what makes the tensor
    values zero-copy up to ``np.frombuffer``. Small reads (varints, strings,
    offsets) get real ``bytes``, which fastavro's string decoding needs.
    """

    __slots__ = ("_buf", "_view", "_pos", "_small_is_bytes")
    VIEW_MIN = 1024

    def __init__(self, value: bytes | bytearray | memoryview, start: int) -> None:
        self._buf = value
        self._view = memoryview(value).cast("B")
        self._pos = start
        self._small_is_bytes = isinstance(value, bytes)

    def read(self, n: int = -1):
        p = self._pos
        end = len(self._view) if n is None or n < 0 else p + n
        if end > len(self._view):
            raise EOFError(f"record ends after {len(self._view)} bytes, {end - len(self._view)} more were expected")
        self._pos = end
        if end - p >= self.VIEW_MIN:
            return self._view[p:end]
        return self._buf[p:end] if self._small_is_bytes else bytes(self._view[p:end])

    def tell(self) -> int:
        return self._pos

    @property
    def size(self) -> int:
        return len(self._view)


def read_record(value: bytes | bytearray | memoryview, start: int, writer_schema: dict[str, Any]) -> dict:
    """Runs fastavro over ``value[start:]`` without copying the tensor bytes.

    Avro ``bytes`` values of 1 KiB or more come back as memoryviews into
    ``value`` (which they keep alive); smaller ones as ``bytes``.

    Raises:
        DecodeError: Truncated or malformed body, or bytes left after the record.
    """
    reader = _ViewReader(value, start)
    try:
        record = fastavro.schemaless_reader(reader, writer_schema, None)
    except Exception as e:
        raise DecodeError(f"Avro body is truncated or malformed: {type(e).__name__}: {e}", cause=e) from e
    left = reader.size - reader.tell()
    if left:
        raise DecodeError(f"{left} bytes left after the Avro record: body is not one PackedGroup", trailing=left)
    return record


# id(parsed schema) -> (that schema, (Layout symbols, has pad) or None); the
# schema is kept so that its id cannot be reused while the entry exists.
_LAYOUTS: dict[int, tuple[dict[str, Any], tuple[tuple[str, ...], bool] | None]] = {}
_LAYOUTS_MAX = 64


def _layout(writer_schema: dict[str, Any]) -> tuple[tuple[str, ...], bool] | None:
    hit = _LAYOUTS.get(id(writer_schema))
    if hit is None or hit[0] is not writer_schema:
        if len(_LAYOUTS) >= _LAYOUTS_MAX:
            _LAYOUTS.clear()
        hit = _LAYOUTS[id(writer_schema)] = (writer_schema, known_layout(writer_schema))
    return hit[1]


def read_parts(value: bytes | bytearray | memoryview, start: int, writer_schema: dict[str, Any]) -> tuple:
    """Reads ``value[start:]`` as ``(group_id, batch_id, sample_ids, tags, fields)``.

    The hand-written reader when ``writer_schema`` (parsed) has the known
    layout, else fastavro (:func:`read_record`) and
    :func:`rollout_stream.codec.record_parts`; both give the same parts.

    Raises:
        DecodeError: Truncated or malformed body, or bytes left after the record.
    """
    layout = _layout(writer_schema)
    if layout is not None:
        return read_packed_group(value, start, *layout)
    from .codec import record_parts

    return record_parts(read_record(value, start, writer_schema))

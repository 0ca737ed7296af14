"""Confluent wire-format framing of Kafka record values.

Byte grammar of one ``rollout.packed`` value (SPEC §1)::

    value      := magic schema_id body
    magic      := 0x00                      (1 byte)
    schema_id  := uint32 big-endian         (4 bytes; registry id of the writer schema)
    body       := Avro binary encoding of dev.rolloutstream.v1.PackedGroup

No length prefix: the body runs to the end of the value.
"""

from __future__ import annotations

import struct

from .errors import FramingError

MAGIC_BYTE = 0
HEADER_SIZE = 5
_HEADER = struct.Struct(">bI")


def parse_header(value: bytes | bytearray | memoryview) -> int:
    """Reads the 5-byte Confluent header and returns the writer schema id.

    The body is ``value[HEADER_SIZE:]``; callers that want to avoid copying
    a large value read it in place (e.g. ``io.BytesIO(value)`` + ``seek(5)``).

    Raises:
        FramingError: The value is ``None``, shorter than 5 bytes, or does not
            start with the magic byte 0.
    """
    if value is None:
        raise FramingError("record value is null (tombstone?), expected a Confluent-framed Avro record")
    if len(value) < HEADER_SIZE:
        raise FramingError(
            f"record value has {len(value)} bytes, shorter than the 5-byte Confluent header",
            size=len(value),
        )
    magic, schema_id = _HEADER.unpack_from(value, 0)
    if magic != MAGIC_BYTE:
        raise FramingError(
            f"unknown magic byte {magic & 0xFF:#04x} (expected 0x00): not Confluent wire format",
            magic=magic & 0xFF,
        )
    return schema_id


def frame(schema_id: int, body: bytes) -> bytes:
    """Prefixes an Avro body with the Confluent header (magic 0, schema id)."""
    if not 0 <= schema_id <= 0xFFFFFFFF:
        raise ValueError(f"schema id {schema_id} does not fit in 4 bytes")
    return _HEADER.pack(MAGIC_BYTE, schema_id) + body

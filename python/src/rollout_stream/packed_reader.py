"""A hand-written reader of the ``PackedGroup`` Avro body for the known layout.

fastavro spends most of a group's parse in Python-level ``read`` calls of the
file-like object that hands out views (one per varint, string and bytes
value; ~300 per group, mostly in the row tags). This reader walks the body
directly, with a one-byte fast path for varints, and returns the tags already
in their trainer form. It is used only when the writer schema has exactly the
layout below, with or without ``pad`` (:func:`known_layout`); any other
writer schema, e.g. one that added a field, goes through fastavro with
schema resolution.

Byte grammar (Avro binary; ``long``/``int`` are zigzag varints, ``string`` and
``bytes`` are a long length then the bytes, arrays and maps are blocks of a
long count — negative: ``-count`` then a long byte size — ended by count 0)::

    PackedGroup   = group_id:string batch_id:string sample_ids:array<string>
                    tags:array<PackedRowTags> fields:array<PackedField>
    PackedRowTags = weight_version:long prompt_idx:long group_id:string
                    num_invalid_tool_calls:int num_malformed_thinking:int
                    num_assistant_messages:int num_routed_experts_backfilled:int
                    row_shapes:map<array<array<long>>>
    PackedField   = name:string dtype:string wire_dtype:string layout:enum(int index)
                    shape:array<long> offsets:union{0: null, 1: bytes} [pad:bytes] values:bytes

``pad`` (zero bytes that put ``values`` at a multiple of 64 bytes of the
framed value) is skipped; records written before it existed lack it.
"""

from __future__ import annotations

from typing import Any, Mapping

from .errors import DecodeError

ROW_SHAPES_SUFFIX = "__row_shapes"

# (field name, type) in writer order; named types by structure, not by name.
_TAGS = (
    "record",
    (
        ("weight_version", "long"),
        ("prompt_idx", "long"),
        ("group_id", "string"),
        ("num_invalid_tool_calls", "int"),
        ("num_malformed_thinking", "int"),
        ("num_assistant_messages", "int"),
        ("num_routed_experts_backfilled", "int"),
        ("row_shapes", ("map", ("array", ("array", "long")))),
    ),
)
_FIELD_HEAD = (
    ("name", "string"),
    ("dtype", "string"),
    ("wire_dtype", "string"),
    ("layout", "enum"),
    ("shape", ("array", "long")),
    ("offsets", ("union", ("null", "bytes"))),
)


def _group_layout(field_fields: tuple) -> tuple:
    return (
        "record",
        (
            ("group_id", "string"),
            ("batch_id", "string"),
            ("sample_ids", ("array", "string")),
            ("tags", ("array", _TAGS)),
            ("fields", ("array", ("record", field_fields))),
        ),
    )


KNOWN_LAYOUT = _group_layout((*_FIELD_HEAD, ("pad", "bytes"), ("values", "bytes")))
UNPADDED_LAYOUT = _group_layout((*_FIELD_HEAD, ("values", "bytes")))


def _structure(schema: Any) -> Any:
    """The decoding-relevant structure of a fastavro-parsed schema (no names or docs)."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return ("union", tuple(_structure(s) for s in schema))
    t = schema.get("type")
    if "logicalType" in schema:  # fastavro would convert these values: never the known layout
        return ("logical", schema["logicalType"], _structure(t))
    if t == "record":
        return ("record", tuple((f["name"], _structure(f["type"])) for f in schema["fields"]))
    if t == "array":
        return ("array", _structure(schema["items"]))
    if t == "map":
        return ("map", _structure(schema["values"]))
    if t == "enum":
        return "enum"
    return _structure(t) if isinstance(t, (str, list, dict)) else repr(schema)


def known_layout(schema: Mapping[str, Any]) -> tuple[tuple[str, ...], bool] | None:
    """``(Layout enum symbols, has pad)`` when ``schema`` has a known layout, else ``None``."""
    try:
        structure = _structure(schema)
        if structure not in (KNOWN_LAYOUT, UNPADDED_LAYOUT):
            return None
        fields_type = schema["fields"][4]["type"]["items"]
        return tuple(fields_type["fields"][3]["type"]["symbols"]), structure == KNOWN_LAYOUT
    except (KeyError, IndexError, TypeError, AttributeError):
        return None



def _truncated(where: str) -> DecodeError:
    return DecodeError(f"Avro body is truncated or malformed: {where}")


def _long(buf, p: int) -> tuple[int, int]:
    """Zigzag varint at ``p``: ``(value, next position)``."""
    b = buf[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    n = b & 0x7F
    shift = 7
    p += 1
    while True:
        b = buf[p]
        p += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), p
        shift += 7
        if shift > 63:
            raise _truncated(f"varint longer than 10 bytes at {p}")


def _span(buf, p: int, end: int, what: str) -> tuple[int, int]:
    """A string/bytes length at ``p``: ``(start, stop)`` of its bytes, checked against ``end``."""
    b = buf[p]
    if b < 0x80 and not b & 1:  # one-byte, non-negative: most strings
        p += 1
        q = p + (b >> 1)
    else:
        n, p = _long(buf, p)
        if n < 0:
            raise _truncated(f"{what}: negative length {n} at {p}")
        q = p + n
    if q > end:
        raise _truncated(f"{what} of {q - p} bytes at {p} runs past the end ({end})")
    return p, q


def _block(buf, p: int) -> tuple[int, int]:
    """The next block count of an array/map (a negative count's byte size skipped)."""
    b = buf[p]
    if b < 0x80:
        n, p = (b >> 1) ^ -(b & 1), p + 1
    else:
        n, p = _long(buf, p)
    if n < 0:
        _, p = _long(buf, p)
        n = -n
    return n, p


def _varints(buf, p: int, k: int, out: list[int]) -> int:
    """Appends ``k`` varints at ``p`` to ``out``; returns the next position.

    One-byte varints are inlined: the row tags and shapes are nearly all of them.
    """
    for _ in range(k):
        b = buf[p]
        if b < 0x80:
            out.append((b >> 1) ^ -(b & 1))
            p += 1
        else:
            v, p = _long(buf, p)
            out.append(v)
    return p


def _longs(buf, p: int) -> tuple[list[int], int]:
    """An ``array<long>``."""
    out: list[int] = []
    count, p = _block(buf, p)
    while count:
        p = _varints(buf, p, count, out)
        count, p = _block(buf, p)
    return out, p


def read_packed_group(value: Any, start: int, symbols: tuple[str, ...], has_pad: bool = True) -> tuple:
    """Reads one ``PackedGroup`` body of a known layout.

    Args:
        value: The record value (``bytes``, ``bytearray`` or ``memoryview``).
        start: Offset of the Avro body (after the Confluent header).
        symbols: The writer's ``Layout`` enum symbols.
        has_pad: Whether the writer's ``PackedField`` has ``pad`` (schemas
            since the aligned writer) or not.

    Returns:
        ``(group_id, batch_id, sample_ids, tags, fields)``: tags are dicts in
        trainer form (``<field>__row_shapes`` keys), fields are tuples
        ``(name, dtype, wire_dtype, layout, shape, offsets, values)`` whose
        ``offsets``/``values`` are memoryviews of ``value`` (``offsets`` may
        be ``None``).

    Raises:
        DecodeError: Truncated or malformed body, or bytes left after it.
    """
    mv = memoryview(value)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    buf = value if isinstance(value, (bytes, bytearray)) else mv
    end = len(mv)
    try:
        p, q = _span(buf, start, end, "group_id")
        group_id = str(buf[p:q], "utf-8")
        p, q = _span(buf, q, end, "batch_id")
        batch_id = str(buf[p:q], "utf-8")
        p = q
        sample_ids = []
        count, p = _block(buf, p)
        while count:
            for _ in range(count):
                p, q = _span(buf, p, end, "sample id")
                sample_ids.append(str(buf[p:q], "utf-8"))
                p = q
            count, p = _block(buf, p)
        tags = []
        count, p = _block(buf, p)
        while count:
            for _ in range(count):
                p = _read_tag(buf, p, end, tags)
            count, p = _block(buf, p)
        fields = []
        count, p = _block(buf, p)
        while count:
            for _ in range(count):
                p, q = _span(buf, p, end, "field name")
                name = str(buf[p:q], "utf-8")
                p, q = _span(buf, q, end, "dtype")
                dtype = str(buf[p:q], "utf-8")
                p, q = _span(buf, q, end, "wire_dtype")
                wire = str(buf[p:q], "utf-8")
                idx, p = _long(buf, q)
                if not 0 <= idx < len(symbols):
                    raise _truncated(f"field {name!r}: layout index {idx} is not one of {len(symbols)} symbols")
                shape, p = _longs(buf, p)
                branch = buf[p]
                if branch == 2:  # union branch 1: bytes
                    p, q = _span(buf, p + 1, end, f"field {name!r} offsets")
                    offsets = mv[p:q]
                    p = q
                elif branch == 0:  # union branch 0: null
                    offsets = None
                    p += 1
                else:
                    raise _truncated(f"field {name!r}: offsets union branch byte {branch}")
                if has_pad:
                    _, p = _span(buf, p, end, f"field {name!r} pad")
                p, q = _span(buf, p, end, f"field {name!r} values")
                fields.append((name, dtype, wire, symbols[idx], shape, offsets, mv[p:q]))
                p = q
            count, p = _block(buf, p)
    except IndexError:
        raise _truncated(f"record ends after {end} bytes") from None
    except UnicodeDecodeError as e:
        raise DecodeError(f"Avro body is truncated or malformed: {e}", cause=e) from e
    if p != end:
        raise DecodeError(f"{end - p} bytes left after the Avro record: body is not one PackedGroup", trailing=end - p)
    return group_id, batch_id, sample_ids, tags, fields


def _read_tag(buf, p: int, end: int, tags: list) -> int:
    """One ``PackedRowTags``, appended to ``tags`` in trainer form; returns the next position."""
    v: list[int] = []
    p = _varints(buf, p, 2, v)  # weight_version, prompt_idx
    p, q = _span(buf, p, end, "tag group_id")
    tag_group = str(buf[p:q], "utf-8")
    p = _varints(buf, q, 4, v)  # the four counts
    tag = {
        "weight_version": v[0],
        "prompt_idx": v[1],
        "group_id": tag_group,
        "num_invalid_tool_calls": v[2],
        "num_malformed_thinking": v[3],
        "num_assistant_messages": v[4],
        "num_routed_experts_backfilled": v[5],
    }
    entries, p = _block(buf, p)
    while entries:
        for _ in range(entries):
            p, q = _span(buf, p, end, "row_shapes key")
            key = str(buf[p:q], "utf-8") + ROW_SHAPES_SUFFIX
            p = q
            shapes = []
            k, p = _block(buf, p)
            while k:
                for _ in range(k):
                    dims, p = _longs(buf, p)
                    shapes.append(dims)
                k, p = _block(buf, p)
            tag[key] = shapes
        entries, p = _block(buf, p)
    tags.append(tag)
    return p

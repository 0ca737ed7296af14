"""Building ``PackedGroup`` records in Python (tests, bench, test vectors).

The production writer is the TypeScript packer; this mirror exists so the
decoder can be tested and measured without it. Values are little-endian,
row-major; jagged offsets are int64 N+1 in units of first-dim rows.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import fastavro
import numpy as np

from . import dtypes, schema_files
from .avro_body import parse_writer_schema
from .codec import COUNT_TAGS, ROW_SHAPES_SUFFIX
from .framing import HEADER_SIZE, frame
from .row_encoder import zigzag as _zigzag

if TYPE_CHECKING:
    from importlib.abc import Traversable

PACKED_SCHEMA_FILE = "packed.avsc"


def packed_schema_path() -> Traversable:
    """``packed.avsc`` as shipped in the package (a copy of the repository's ``schemas/``)."""
    return schema_files.schema_file(PACKED_SCHEMA_FILE)


def load_packed_schema(path: str | Path | None = None) -> dict[str, Any]:
    """The parsed ``PackedGroup`` schema: the shipped ``packed.avsc``, or the file at ``path``."""
    text = schema_files.schema_text(PACKED_SCHEMA_FILE) if path is None else Path(path).read_text(encoding="utf-8")
    return parse_writer_schema(text)


def _le_bytes(arr: np.ndarray, wire: str) -> bytes:
    dt = dtypes.wire_dtype(wire, "<encode>")
    a = np.asarray(arr)
    if a.dtype.kind == "b" and dt.kind != "b":
        a = a.astype(np.uint8)
    if a.size and not np.array_equal(a.astype(dt), a, equal_nan=a.dtype.kind == "f"):
        raise ValueError(f"values do not fit wire dtype {wire}")
    return np.ascontiguousarray(a, dtype=dt).tobytes()


def dense_field(name: str, array: Any, dtype: str, wire_dtype: str | None = None) -> dict[str, Any]:
    """A dense ``PackedField`` record: ``shape`` is the full shape."""
    a = np.asarray(array)
    return {
        "name": name,
        "dtype": dtype,
        "wire_dtype": wire_dtype or dtype,
        "layout": "dense",
        "shape": list(a.shape),
        "offsets": None,
        "values": _le_bytes(a, wire_dtype or dtype),
    }


def jagged_field(
    name: str,
    rows: Sequence[Any],
    dtype: str,
    wire_dtype: str | None = None,
    inner_shape: Sequence[int] | None = None,
) -> dict[str, Any]:
    """A jagged ``PackedField`` record from per-row arrays ``[len_i, *inner]``."""
    arrs = [np.asarray(r) for r in rows]
    inner = list(inner_shape) if inner_shape is not None else (list(arrs[0].shape[1:]) if arrs else [])
    for a in arrs:
        if list(a.shape[1:]) != inner:
            raise ValueError(f"{name}: row inner shape {list(a.shape[1:])} != {inner}")
    lengths = [a.shape[0] for a in arrs]
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype("<i8")
    trainer = dtypes.wire_dtype(dtype, name)
    flat = np.concatenate([a.reshape(-1) for a in arrs]) if arrs else np.zeros(0, trainer)
    if flat.size == 0:
        flat = np.zeros(0, trainer)
    return {
        "name": name,
        "dtype": dtype,
        "wire_dtype": wire_dtype or dtype,
        "layout": "jagged",
        "shape": inner,
        "offsets": offsets.tobytes(),
        "values": _le_bytes(flat, wire_dtype or dtype),
    }


def object_field(name: str, items: Sequence[Any]) -> dict[str, Any]:
    """An ``object`` field: values are the UTF-8 JSON of the item list."""
    return {
        "name": name,
        "dtype": "object",
        "wire_dtype": "object",
        "layout": "dense",
        "shape": [len(items)],
        "offsets": None,
        "values": json.dumps(list(items), separators=(",", ":")).encode("utf-8"),
    }


def row_tags(
    *,
    weight_version: int,
    prompt_idx: int,
    group_id: str,
    counts: Mapping[str, int] | None = None,
    row_shapes: Mapping[str, Sequence[Sequence[int]]] | None = None,
) -> dict[str, Any]:
    """A ``PackedRowTags`` record (counts default to 0)."""
    c = dict(counts or {})
    return {
        "weight_version": int(weight_version),
        "prompt_idx": int(prompt_idx),
        "group_id": group_id,
        **{k: int(c.get(k, 0)) for k in COUNT_TAGS},
        "row_shapes": {k: [[int(d) for d in s] for s in v] for k, v in (row_shapes or {}).items()},
    }


def tags_record_from_trainer_tags(tag: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of the decoder's tag rebuild: ``<f>__row_shapes`` keys → ``row_shapes``."""
    shapes = {k[: -len(ROW_SHAPES_SUFFIX)]: v for k, v in tag.items() if k.endswith(ROW_SHAPES_SUFFIX)}
    if isinstance(tag.get("row_shapes"), Mapping):
        shapes.update(tag["row_shapes"])
    return row_tags(
        weight_version=tag["weight_version"],
        prompt_idx=tag["prompt_idx"],
        group_id=tag["group_id"],
        counts={k: tag.get(k, 0) for k in COUNT_TAGS},
        row_shapes=shapes,
    )


def packed_record(
    group_id: str,
    batch_id: str,
    fields: Iterable[Mapping[str, Any]],
    tags: Sequence[Mapping[str, Any]],
    sample_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A ``PackedGroup`` record; sample ids default to ``{group_id}_g{i}``."""
    n = len(tags)
    return {
        "group_id": group_id,
        "batch_id": batch_id,
        "sample_ids": list(sample_ids) if sample_ids is not None else [f"{group_id}_g{i}" for i in range(n)],
        "tags": list(tags),
        "fields": list(fields),
    }


def encode_packed_body(record: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> bytes:
    """The Avro binary body of a ``PackedGroup`` record (no Confluent header, no alignment).

    A field without ``pad`` gets an empty one (fastavro would write the
    schema's default, the text ``""``, which is not bytes).
    """
    buf = io.BytesIO()
    fields = [f if "pad" in f else {**f, "pad": b""} for f in record["fields"]]
    fastavro.schemaless_writer(buf, schema or load_packed_schema(), {**record, "fields": fields})
    return buf.getvalue()


VALUES_ALIGNMENT = 64




def encode_packed_value(record: Mapping[str, Any], schema_id: int, schema: Mapping[str, Any] | None = None) -> bytes:
    """The Confluent-framed value of a ``PackedGroup`` the way the packer writes it.

    Each field's ``pad`` puts its ``values`` at a multiple of
    :data:`VALUES_ALIGNMENT` bytes of the framed value (the TypeScript
    writer, ``streams/codecs/packed-writer.ts``, does the same), so the decoder can
    view trainer-dtype values in place. The schema must have ``pad``.
    """
    schema = schema or load_packed_schema()
    fields = [dict(f) for f in record["fields"]]
    without_fields = encode_packed_body(dict(record, fields=[]), schema)
    if not fields:
        return frame(schema_id, without_fields)
    item_schema = schema["fields"][4]["type"]["items"]
    prefix = without_fields[:-1]  # drops the empty array's end marker
    parts = [frame(schema_id, prefix), _zigzag(len(fields))]
    pos = HEADER_SIZE + len(prefix) + len(parts[1])
    for f in fields:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, item_schema, dict(f, pad=b"", values=b""))
        head = buf.getvalue()[:-2]  # drops the two zero lengths of pad and values
        values = bytes(f["values"])
        length = _zigzag(len(values))
        pad = -(pos + len(head) + 1 + len(length)) % VALUES_ALIGNMENT
        parts += [head, _zigzag(pad), bytes(pad), length, values]
        pos += len(head) + 1 + pad + len(length) + len(values)
    parts.append(b"\0")
    return b"".join(parts)

"""The SPEC §9 JSON form of a packed group, both ways.

``{"packed": {"group_id", "sample_ids", "tags", "fields": {name: field}}}``
where a field is ``{"dtype", "layout", "offsets" (jagged), "shape" (dense,
full) or "inner_shape" (jagged), "values": flat row-major list}`` and NaN /
infinities are the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
Used by the shared test vectors and by ``inspect --json``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from . import dtypes
from .codec import JaggedArray, PackedGroup, ROW_SHAPES_SUFFIX
from .encode import packed_record, tags_record_from_trainer_tags

_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@dataclass
class JsonField:
    """One field of the JSON form, converted to numpy in its trainer dtype."""

    name: str
    dtype: str
    layout: str
    shape: list[int]  # dense: full shape; jagged: inner shape
    offsets: np.ndarray | None
    values: np.ndarray  # flat, trainer dtype (object: the items)


def _number(x: Any, kind: str) -> Any:
    if isinstance(x, str):
        if x in _SPECIAL:
            return _SPECIAL[x]
        return int(x) if kind in "iub" else float(x)  # int64 beyond 2**53 may travel as a string
    return x


def _flat(values: Any) -> list[Any]:
    if isinstance(values, list) and any(isinstance(v, list) for v in values):
        return [x for v in values for x in _flat(v if isinstance(v, list) else [v])]
    return list(values)


def field_from_json(name: str, f: Mapping[str, Any]) -> JsonField:
    """Converts one JSON-form field to numpy (exact: ints stay ints, float32 rounds once)."""
    dtype, layout = f["dtype"], f["layout"]
    if dtype == dtypes.OBJECT:
        items = list(f["values"])
        arr = np.empty(len(items), dtype=object)
        for i, it in enumerate(items):
            arr[i] = it
        return JsonField(name, dtype, layout, list(f.get("shape") or [len(items)]), None, arr)
    dt = dtypes.native(dtypes.wire_dtype(dtype, name))
    flat = [_number(v, dt.kind) for v in _flat(f["values"])]
    if dt.kind == "f":
        values = np.asarray(flat, dtype=np.float64).astype(dt)
    elif dt.kind == "b":
        values = np.asarray([bool(v) for v in flat], dtype=dt)
    else:
        values = np.asarray([int(v) for v in flat], dtype=dt) if flat else np.zeros(0, dt)
    if layout == "jagged":
        offsets = np.asarray([int(_number(o, "i")) for o in f["offsets"]], dtype=np.int64)
        shape = [int(s) for s in (f.get("inner_shape") if f.get("inner_shape") is not None else f.get("shape") or [])]
        return JsonField(name, dtype, layout, shape, offsets, values)
    return JsonField(name, dtype, layout, [int(s) for s in f["shape"]], None, values)


def tags_from_json(tags: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per-row tags in the decoder's shape (``row_shapes`` map → ``<f>__row_shapes`` keys)."""
    out = []
    for t in tags:
        d = {k: v for k, v in t.items() if k != "row_shapes"}
        for k, v in (t.get("row_shapes") or {}).items():
            d[f"{k}{ROW_SHAPES_SUFFIX}"] = v
        out.append(d)
    return out


def record_from_json(
    packed: Mapping[str, Any], *, wire_dtypes: Mapping[str, str] | None = None, batch_id: str | None = None
) -> dict[str, Any]:
    """An Avro ``PackedGroup`` record from the JSON form (``packed`` = the inner object).

    Args:
        packed: The value under the ``"packed"`` key.
        wire_dtypes: Narrower wire dtype per field name (e.g. ``{"input_ids": "int32"}``).
        batch_id: Used when the JSON form has no ``batch_id``.
    """
    wires = wire_dtypes or {}
    fields = []
    for name, f in packed["fields"].items():
        jf = field_from_json(name, f)
        wire = wires.get(name, jf.dtype)
        if jf.dtype == dtypes.OBJECT:
            from .encode import object_field

            fields.append(object_field(name, list(jf.values)))
            continue
        wdt = dtypes.wire_dtype(wire, name)
        vals = jf.values.astype(np.uint8) if jf.values.dtype.kind == "b" and wdt.kind != "b" else jf.values
        if vals.size and not np.array_equal(vals.astype(wdt), vals, equal_nan=vals.dtype.kind == "f"):
            raise ValueError(f"field {name!r}: values do not fit wire dtype {wire}")
        rec = {
            "name": name,
            "dtype": jf.dtype,
            "wire_dtype": wire,
            "layout": jf.layout,
            "shape": jf.shape,
            "offsets": jf.offsets.astype("<i8").tobytes() if jf.offsets is not None else None,
            "values": np.ascontiguousarray(vals, dtype=wdt).tobytes(),
        }
        fields.append(rec)
    tags = [tags_record_from_trainer_tags(t) for t in tags_from_json(packed["tags"])]
    return packed_record(
        packed["group_id"],
        packed.get("batch_id", batch_id or ""),
        fields,
        tags,
        sample_ids=packed.get("sample_ids"),
    )


def _json_value(v: Any) -> Any:
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
    return v


def _to_numpy(val: Any) -> np.ndarray:
    return val if isinstance(val, np.ndarray) else val.detach().cpu().numpy()


def group_to_json(group: PackedGroup) -> dict[str, Any]:
    """The JSON form (``{"packed": {...}}``) of a decoded group."""
    fields: dict[str, Any] = {}
    for name, val in group.fields.items():
        info = group.field_info.get(name, {})
        if isinstance(val, np.ndarray) and val.dtype == object:
            fields[name] = {"dtype": "object", "layout": "dense", "shape": [len(val)], "values": list(val)}
            continue
        if isinstance(val, JaggedArray) or getattr(val, "is_nested", False):
            values = val.values if isinstance(val, JaggedArray) else val.values()
            offsets = val.offsets if isinstance(val, JaggedArray) else val.offsets()
            v = _to_numpy(values)
            fields[name] = {
                "dtype": info.get("dtype", v.dtype.name),
                "layout": "jagged",
                "offsets": [int(o) for o in _to_numpy(offsets)],
                "inner_shape": list(v.shape[1:]),
                "values": [_json_value(x) for x in v.reshape(-1).tolist()],
            }
            continue
        v = _to_numpy(val)
        fields[name] = {
            "dtype": info.get("dtype", v.dtype.name),
            "layout": "dense",
            "shape": list(v.shape),
            "values": [_json_value(x) for x in v.reshape(-1).tolist()],
        }
    return {
        "packed": {
            "group_id": group.group_id,
            "batch_id": group.batch_id,
            "sample_ids": list(group.sample_ids),
            "tags": group.tags,
            "fields": fields,
        }
    }

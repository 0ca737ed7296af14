"""Decoding of one packed group: Avro body → (sample_ids, fields, tags).

The packed record (``schemas/packed.avsc``) carries each tensor field as raw
little-endian bytes plus a small header (name, trainer ``dtype``,
``wire_dtype``, ``layout``, ``shape``, ``offsets``). This module turns those
bytes into arrays without copying when the wire dtype already is the trainer
dtype and the bytes are aligned: ``np.frombuffer`` over a view of the Kafka
message (see :mod:`rollout_stream.avro_body`; the message belongs to this
decode alone, so in-place writes through a torch view touch no one else's
data); other fields are widened or copied in one pass into one buffer per
group (int32 token ids → int64, uint8 masks → int64/bool; see
:mod:`rollout_stream.field_decode`).

Jagged fields (per-token, SPEC §5.5) become ``torch.nested`` tensors with
``layout=torch.jagged`` (mode ``"torch"``) or :class:`JaggedArray`
``(values, offsets)`` pairs (mode ``"numpy"``); dense fields become tensors or
arrays; ``object`` fields become ``numpy.ndarray(dtype=object)`` in both modes.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Mapping

import numpy as np

from .avro_body import parse_writer_schema, read_parts
from .devices import Placement, placement
from .errors import DecodeError, RolloutStreamError
from .field_decode import finish_field, group_buffer_size, prepare_field
from .jagged_array import JaggedArray
from .packed_reader import ROW_SHAPES_SUFFIX

JaggedMode = Literal["auto", "torch", "numpy"]

COUNT_TAGS = (
    "num_invalid_tool_calls",
    "num_malformed_thinking",
    "num_assistant_messages",
    "num_routed_experts_backfilled",
)


@dataclass
class PackedGroup:
    """One decoded ``rollout.packed`` record.

    Unpacks as ``sample_ids, fields, tags = group`` (the ``put_samples`` triple).
    """

    group_id: str
    batch_id: str
    sample_ids: list[str]
    fields: dict[str, Any]
    tags: list[dict[str, Any]]
    schema_id: int | None = None
    field_info: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.sample_ids, self.fields, self.tags))

    def __len__(self) -> int:
        return len(self.sample_ids)


@functools.lru_cache(maxsize=1)
def torch_available() -> bool:
    """Whether torch can be imported (checked once, without importing it)."""
    return importlib.util.find_spec("torch") is not None


def resolve_mode(jagged: JaggedMode) -> Literal["torch", "numpy"]:
    """Maps ``"auto"`` to ``"torch"`` when torch is installed, else ``"numpy"``.

    Raises:
        ValueError: Unknown mode, or ``"torch"`` asked for without torch installed.
    """
    if jagged == "auto":
        return "torch" if torch_available() else "numpy"
    if jagged == "torch" and not torch_available():
        raise ValueError("jagged='torch' needs torch: pip install 'rollout-stream[torch]'")
    if jagged not in ("torch", "numpy"):
        raise ValueError(f"jagged must be 'auto', 'torch' or 'numpy', not {jagged!r}")
    return jagged


def decode_packed_body(
    body: bytes | bytearray | memoryview,
    writer_schema: Mapping[str, Any] | str,
    *,
    jagged: JaggedMode = "auto",
    schema_id: int | None = None,
    device: Any = None,
) -> PackedGroup:
    """Decodes an Avro ``PackedGroup`` body (no Confluent header) into arrays.

    Pure: no registry, no Kafka. Used by tests, vectors and the deserializer.

    Args:
        body: The Avro binary body.
        writer_schema: The schema it was written with (JSON text, dict or parsed).
        jagged: ``"torch"`` for ``torch.nested`` jagged tensors, ``"numpy"`` for
            :class:`JaggedArray`, ``"auto"`` (torch when importable).
        schema_id: Recorded on the result when known.
        device: ``None``/``"cpu"`` (default): host tensors, zero-copy where
            possible. A CUDA device: every field is widened into pinned host
            memory and copied with ``non_blocking=True``; tensors come back on
            the device (needs ``jagged`` ``"auto"``/``"torch"``). See
            :mod:`rollout_stream.devices`.

    Returns:
        The decoded :class:`PackedGroup`.

    Raises:
        DecodeError: Malformed body, inconsistent sizes/offsets, unknown dtype,
            a wire dtype that cannot widen to its trainer dtype.
        DeviceUnavailableError: ``device`` is CUDA but CUDA is not available.
        ValueError: ``device`` is not CPU/CUDA, or ``jagged="numpy"`` with a device.
    """
    mode, pl = resolve_placement(jagged, device)
    parsed = parse_writer_schema(writer_schema)
    return build_group(read_parts(body, 0, parsed), mode, pl, schema_id)


def resolve_placement(jagged: JaggedMode, device: Any) -> tuple[Literal["torch", "numpy"], Placement | None]:
    """``(mode, placement)`` for a ``jagged=``/``device=`` pair.

    Raises:
        ValueError: Bad mode or device, or a device with ``jagged="numpy"``.
        DeviceUnavailableError: CUDA asked for but not available.
    """
    mode = resolve_mode(jagged)
    pl = placement(device)
    if pl is not None and mode != "torch":
        raise ValueError(f"device={device!r} needs torch tensors: use jagged='auto' or 'torch', not {jagged!r}")
    return mode, pl


def group_from_record(
    record: Mapping[str, Any],
    *,
    jagged: JaggedMode = "auto",
    schema_id: int | None = None,
    device: Any = None,
) -> PackedGroup:
    """Builds a :class:`PackedGroup` from a fastavro-decoded record dict.

    Raises:
        DecodeError, DeviceUnavailableError, ValueError: See :func:`decode_packed_body`.
    """
    mode, pl = resolve_placement(jagged, device)
    return build_group(record_parts(record), mode, pl, schema_id)


def record_parts(record: Mapping[str, Any]) -> tuple:
    """A fastavro record dict as ``(group_id, batch_id, sample_ids, tags, fields)``.

    The form :func:`rollout_stream.packed_reader.read_packed_group` returns:
    tags in trainer form, fields as ``(name, dtype, wire_dtype, layout,
    shape, offsets, values)`` tuples.
    """
    fields = [
        (
            rec["name"],
            rec["dtype"],
            rec.get("wire_dtype") or rec["dtype"],
            rec["layout"],
            rec["shape"],
            rec.get("offsets"),
            rec["values"],
        )
        for rec in record["fields"]
    ]
    tags = [_row_tags(t) for t in record["tags"]]
    return record["group_id"], record["batch_id"], list(record["sample_ids"]), tags, fields


def build_group(parts: tuple, mode: str, pl: Placement | None, schema_id: int | None = None) -> PackedGroup:
    """Builds a :class:`PackedGroup` from the parts of one body (see :func:`record_parts`).

    ``mode`` and ``pl`` are resolved already (:func:`resolve_placement`).

    Raises:
        DecodeError: Inconsistent rows, tags, fields, sizes or dtypes.
    """
    group_id, batch_id, sample_ids, tags, wire_fields = parts
    n = len(sample_ids)
    if n == 0:
        raise DecodeError(f"group {group_id!r} has no rows", group_id=group_id)
    if len(tags) != n:
        raise DecodeError(f"group {group_id!r}: {len(tags)} tags for {n} sample ids", group_id=group_id)
    info: dict[str, dict[str, Any]] = {}
    shared_offsets: dict[bytes, tuple[np.ndarray, Any]] = {}
    prepared = []
    for wf in wire_fields:
        name = wf[0]
        if name in info:
            raise DecodeError(f"group {group_id!r}: field {name!r} appears twice", field=name)
        try:
            prepared.append(prepare_field(wf, n, mode, shared_offsets, pl))
        except RolloutStreamError:
            raise
        except Exception as e:  # reshape/frombuffer errors on inconsistent headers
            raise _field_error(name, e) from e
        info[name] = {"dtype": wf[1], "wire_dtype": wf[2], "layout": wf[3], "shape": list(wf[4])}
    buf = np.empty(group_buffer_size(prepared), dtype=np.uint8)
    fields: dict[str, Any] = {}
    for f in prepared:
        try:
            fields[f.name] = finish_field(f, buf, mode, pl)
        except RolloutStreamError:
            raise
        except Exception as e:  # reshape/frombuffer errors on inconsistent headers
            raise _field_error(f.name, e) from e
    return PackedGroup(
        group_id=group_id,
        batch_id=batch_id,
        sample_ids=sample_ids,
        fields=fields,
        tags=tags,
        schema_id=schema_id,
        field_info=info,
    )


def _field_error(name: str, e: Exception) -> DecodeError:
    return DecodeError(f"field {name!r}: {type(e).__name__}: {e}", field=name, cause=e)


def _row_tags(t: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "weight_version": t["weight_version"],
        "prompt_idx": t["prompt_idx"],
        "group_id": t["group_id"],
    }
    for k in COUNT_TAGS:
        out[k] = t[k]
    for name, shapes in (t.get("row_shapes") or {}).items():
        out[f"{name}{ROW_SHAPES_SUFFIX}"] = [list(s) for s in shapes]
    return out

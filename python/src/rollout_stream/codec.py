"""Decoding of one packed group: Avro body → (sample_ids, fields, tags).

The packed record (``schemas/packed.avsc``) carries each tensor field as raw
little-endian bytes plus a small header (name, trainer ``dtype``,
``wire_dtype``, ``layout``, ``shape``, ``offsets``). This module turns those
bytes into arrays without copying when the wire dtype already is the trainer
dtype: ``np.frombuffer`` over a view of the Kafka message (see
:mod:`rollout_stream.avro_body`; the message belongs to this decode alone, so
in-place writes through a torch view touch no one else's data), and widens
with ``astype`` otherwise (int32 token ids → int64, uint8 masks → int64/bool).

Jagged fields (per-token, SPEC §5.5) become ``torch.nested`` tensors with
``layout=torch.jagged`` (mode ``"torch"``) or :class:`JaggedArray`
``(values, offsets)`` pairs (mode ``"numpy"``); dense fields become tensors or
arrays; ``object`` fields become ``numpy.ndarray(dtype=object)`` in both modes.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Mapping

import numpy as np

from . import dtypes
from .avro_body import parse_writer_schema, read_record
from .devices import Placement, host_buffer, placement, upload
from .errors import DecodeError, RolloutStreamError

JaggedMode = Literal["auto", "torch", "numpy"]

ROW_SHAPES_SUFFIX = "__row_shapes"
COUNT_TAGS = (
    "num_invalid_tool_calls",
    "num_malformed_thinking",
    "num_assistant_messages",
    "num_routed_experts_backfilled",
)
_OFFSETS_DTYPE = np.dtype("<i8")


@dataclass(frozen=True)
class JaggedArray:
    """A jagged field without torch: row ``i`` is ``values[offsets[i]:offsets[i+1]]``.

    Attributes:
        values: ``[total_rows_of_first_dim, *inner_shape]`` array in the trainer dtype.
        offsets: int64 array of N+1 entries, ``offsets[0] == 0``.
    """

    values: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def inner_shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape[1:])

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def row(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def rows(self) -> list[np.ndarray]:
        return [self.row(i) for i in range(len(self))]


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
    parsed = parse_writer_schema(writer_schema)
    return group_from_record(read_record(body, 0, parsed), jagged=jagged, schema_id=schema_id, device=device)


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
    sample_ids = list(record["sample_ids"])
    n = len(sample_ids)
    group_id = record["group_id"]
    if n == 0:
        raise DecodeError(f"group {group_id!r} has no rows", group_id=group_id)
    if len(record["tags"]) != n:
        raise DecodeError(f"group {group_id!r}: {len(record['tags'])} tags for {n} sample ids", group_id=group_id)
    tags = [_row_tags(t) for t in record["tags"]]
    fields: dict[str, Any] = {}
    info: dict[str, dict[str, Any]] = {}
    shared_offsets: dict[bytes, tuple[np.ndarray, Any]] = {}
    for rec in record["fields"]:
        name = rec["name"]
        if name in fields:
            raise DecodeError(f"group {group_id!r}: field {name!r} appears twice", field=name)
        try:
            fields[name] = _decode_field(rec, n, mode, shared_offsets, pl)
        except RolloutStreamError:
            raise
        except Exception as e:  # reshape/frombuffer errors on inconsistent headers
            raise DecodeError(f"field {name!r}: {type(e).__name__}: {e}", field=name, cause=e) from e
        info[name] = {
            "dtype": rec["dtype"],
            "wire_dtype": rec.get("wire_dtype", rec["dtype"]),
            "layout": rec["layout"],
            "shape": list(rec["shape"]),
        }
    return PackedGroup(
        group_id=group_id,
        batch_id=record["batch_id"],
        sample_ids=sample_ids,
        fields=fields,
        tags=tags,
        schema_id=schema_id,
        field_info=info,
    )


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


def _frombuffer(buf: bytes | memoryview, dt: np.dtype, name: str) -> np.ndarray:
    if len(buf) % dt.itemsize:
        raise DecodeError(
            f"field {name!r}: {len(buf)} value bytes is not a multiple of {dt.name}'s {dt.itemsize}",
            field=name,
        )
    return np.frombuffer(buf, dtype=dt)  # a view: possibly unaligned, see _widen


def _decode_field(
    rec: Mapping[str, Any],
    n: int,
    mode: str,
    shared_offsets: dict[bytes, tuple[np.ndarray, Any]],
    pl: Placement | None = None,
) -> Any:
    name, layout = rec["name"], rec["layout"]
    trainer_name = rec["dtype"]
    wire_name = rec.get("wire_dtype") or trainer_name
    shape = [int(s) for s in rec["shape"]]
    values = rec["values"]
    if trainer_name == dtypes.OBJECT or wire_name == dtypes.OBJECT:
        return _decode_object(name, layout, trainer_name, wire_name, shape, values, n)

    wire = dtypes.wire_dtype(wire_name, name)
    trainer = dtypes.wire_dtype(trainer_name, name)
    dtypes.check_widening(wire, trainer, name)
    arr = _frombuffer(values, wire, name)

    if layout == "jagged":
        raw_offsets = rec.get("offsets")
        if raw_offsets is None:
            raise DecodeError(f"jagged field {name!r} has no offsets", field=name)
        if len(raw_offsets) != 8 * (n + 1):
            raise DecodeError(
                f"jagged field {name!r}: offsets hold {len(raw_offsets)} bytes, expected {8 * (n + 1)} (N+1 int64 for N={n})",
                field=name,
            )
        key = bytes(raw_offsets)
        hit = shared_offsets.get(key)
        if hit is None:
            offsets = _widen(_frombuffer(raw_offsets, _OFFSETS_DTYPE, name), _OFFSETS_DTYPE, _OFFSETS_DTYPE)
            if offsets[0] != 0 or np.any(offsets[1:] < offsets[:-1]):
                raise DecodeError(f"jagged field {name!r}: offsets must start at 0 and never decrease", field=name)
            # Fields with equal offsets share one offsets array/tensor, so their
            # nested tensors share one ragged dim (input_ids * token_mask works).
            if pl is not None:
                offsets_t = _place(offsets, offsets.dtype, offsets.shape, pl)
            else:
                offsets_t = _to_torch(offsets) if mode == "torch" else None
            hit = shared_offsets[key] = (offsets, offsets_t)
        offsets, offsets_t = hit
        inner = math.prod(shape)
        if int(offsets[-1]) * inner != arr.size:
            raise DecodeError(
                f"jagged field {name!r}: offsets end at {int(offsets[-1])} rows × {inner} per row "
                f"but values hold {arr.size} {wire.name} elements",
                field=name,
            )
        rows_shape = (int(offsets[-1]), *shape)
        if pl is not None:
            import torch

            lengths = np.diff(offsets)
            return torch.nested.nested_tensor_from_jagged(
                _place(arr, trainer, rows_shape, pl),
                offsets_t,
                min_seqlen=int(lengths.min()),
                max_seqlen=int(lengths.max()),
            )
        arr = _widen(arr, wire, trainer).reshape(rows_shape)
        if mode == "numpy":
            return JaggedArray(values=arr, offsets=offsets)
        import torch

        return torch.nested.nested_tensor_from_jagged(_to_torch(arr), offsets_t)

    if layout != "dense":
        raise DecodeError(f"field {name!r}: unknown layout {layout!r}", field=name)
    if math.prod(shape) != arr.size:
        raise DecodeError(
            f"dense field {name!r}: shape {shape} needs {math.prod(shape)} elements, values hold {arr.size}",
            field=name,
        )
    if pl is not None:
        return _place(arr, trainer, tuple(shape), pl)
    arr = _widen(arr, wire, trainer).reshape(shape)
    return _to_torch(arr) if mode == "torch" else arr


_TORCH_DTYPES: dict[np.dtype, Any] = {}


def _place(arr: np.ndarray, trainer: np.dtype, shape: tuple[int, ...], pl: Placement):
    """Widens a wire view straight into a (pinned) host buffer, then enqueues its copy.

    One pass over the bytes on the host (``np.copyto`` casts like ``astype``
    and reads unaligned views as they are); the host→device copy is
    ``non_blocking`` from pinned memory, so it overlaps the next field's decode.
    """
    target = dtypes.native(trainer)
    tdt = _TORCH_DTYPES.get(target)
    if tdt is None:
        tdt = _TORCH_DTYPES[target] = _to_torch(np.empty(0, dtype=target)).dtype
    host = host_buffer(shape, tdt, pl)
    np.copyto(host.numpy(), arr.reshape(shape), casting="unsafe")  # widening was checked losslessly
    return upload(host, pl)


def _widen(arr: np.ndarray, wire: np.dtype, trainer: np.dtype) -> np.ndarray:
    """The trainer-dtype array: the wire view itself when possible, else one pass.

    Avro puts no padding before a value, so a view can start at any byte;
    an unaligned view of the right dtype is copied once (torch refuses
    unaligned storage), a narrower one is widened straight from the view.
    """
    target = dtypes.native(trainer)
    if arr.dtype != target:
        return arr.astype(target)
    if arr.ctypes.data % arr.dtype.itemsize:
        return arr.copy()
    return arr


def _decode_object(name, layout, trainer_name, wire_name, shape, values, n) -> np.ndarray:
    if layout != "dense" or trainer_name != wire_name:
        raise DecodeError(f"object field {name!r} must be dense with dtype and wire_dtype 'object'", field=name)
    try:
        items = json.loads(bytes(values).decode("utf-8"))
    except Exception as e:
        raise DecodeError(f"object field {name!r}: values are not UTF-8 JSON: {e}", field=name, cause=e) from e
    if not isinstance(items, list):
        raise DecodeError(f"object field {name!r}: values must be a JSON list", field=name)
    if shape and shape[0] != len(items):
        raise DecodeError(f"object field {name!r}: shape {shape} but {len(items)} items", field=name)
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):  # element-wise: np.array would nest lists
        out[i] = item
    return out


_torch_warned = False


def _to_torch(arr: np.ndarray):
    """``torch.from_numpy`` of a (possibly read-only) view, without a copy.

    The source is a view of the Kafka message or a fresh widened array, owned
    by this decode alone, so writes through the tensor touch no one else's
    data. torch warns once per process about read-only arrays; that one
    warning is muted here (later calls skip the costly ``catch_warnings``).
    """
    global _torch_warned
    import torch

    if _torch_warned:
        return torch.from_numpy(arr)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        torch.from_numpy(np.frombuffer(bytes(8), dtype=np.uint8))  # trips torch's warn-once now
    _torch_warned = True
    return torch.from_numpy(arr)

"""One group's fields: wire bytes → arrays/tensors in their trainer dtypes.

Two passes over a group's fields. :func:`prepare_field` checks a field's
header against its bytes (dtype pair, sizes, offsets) and takes a view of the
bytes (``np.frombuffer``; no copy). :func:`finish_field` then builds the
field. A field already in its trainer dtype whose view is aligned stays that
view (zero-copy). Every other field — narrower on the wire (int32 ids, uint8
masks), or an unaligned view (Avro puts no padding before a value) — is
written by one ``np.copyto`` pass into a slice of **one buffer per group**,
64-byte aligned, sized in the first pass. One allocation instead of one per
field also keeps glibc recycling the memory: a group's widened fields (~6 MB
here) freed together stay below its dynamic trim threshold, where three or
four separate blocks freed together made it hand the pages back to the
kernel and fault them in again on the next group (~3 µs per 4 KiB page
here, slower than the copy itself). The tensors are separate views: torch
and numpy see (and pickle) only their own slice; keeping any one alive keeps
the group's buffer alive, as a zero-copy view keeps the Kafka message alive.

With a device placement (``pl``) each field is instead widened into a pinned
host buffer of its own and copied to the device (see :func:`_place`).
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np

from . import dtypes
from .devices import Placement, host_buffer, upload
from .errors import DecodeError
from .jagged_array import JaggedArray
from .jagged_tensor import nested_from_jagged

_OFFSETS_DTYPE = np.dtype("<i8")
_ALIGN = 64


class Plan:
    """What one (trainer dtype, wire dtype) pair needs, checked once per process."""

    __slots__ = ("wire", "trainer", "target", "same")

    def __init__(self, trainer_name: str, wire_name: str, field_name: str) -> None:
        self.wire = dtypes.wire_dtype(wire_name, field_name)
        self.trainer = dtypes.wire_dtype(trainer_name, field_name)
        dtypes.check_widening(self.wire, self.trainer, field_name)
        self.target = dtypes.native(self.trainer)
        self.same = self.wire == self.target


_PLANS: dict[tuple[str, str], Plan] = {}


def _plan(trainer_name: str, wire_name: str, field_name: str) -> Plan:
    plan = _PLANS.get((trainer_name, wire_name))
    if plan is None:  # unknown or lossy pairs raise here every time, never cached
        plan = _PLANS[(trainer_name, wire_name)] = Plan(trainer_name, wire_name, field_name)
    return plan


class Prepared:
    """A checked field: its wire view and where its trainer-dtype copy goes (if any).

    ``done`` holds the finished value of fields that need no second pass
    (``object`` fields).
    """

    __slots__ = ("name", "plan", "arr", "shape", "offsets", "offsets_t", "at", "done")

    def __init__(self, name: str) -> None:
        self.name = name
        self.plan: Plan | None = None
        self.arr: np.ndarray | None = None
        self.shape: tuple[int, ...] = ()
        self.offsets: np.ndarray | None = None  # jagged only
        self.offsets_t: Any = None
        self.at = -1  # byte offset in the group buffer; -1: stays the wire view
        self.done: Any = None

    @property
    def copy_bytes(self) -> int:
        return self.arr.size * self.plan.target.itemsize


def prepare_field(
    wf: tuple,
    n: int,
    mode: str,
    shared_offsets: dict[bytes, tuple[np.ndarray, Any]],
    pl: Placement | None,
) -> Prepared:
    """Checks one ``(name, dtype, wire_dtype, layout, shape, offsets, values)`` field.

    Jagged fields with byte-equal offsets get the same offsets array/tensor
    (``shared_offsets``), so their nested tensors share one ragged dim
    (``input_ids * token_mask`` works).

    Raises:
        DecodeError: Unknown or lossy dtype pair, unknown layout, sizes or
            offsets that disagree with the values.
    """
    name, trainer_name, wire_name, layout, shape, raw_offsets, values = wf
    f = Prepared(name)
    if trainer_name == dtypes.OBJECT or wire_name == dtypes.OBJECT:
        f.done = _decode_object(name, layout, trainer_name, wire_name, [int(s) for s in shape], values)
        return f
    plan = f.plan = _plan(trainer_name, wire_name, name)
    if len(values) % plan.wire.itemsize:
        raise DecodeError(
            f"field {name!r}: {len(values)} value bytes is not a multiple of {plan.wire.name}'s {plan.wire.itemsize}",
            field=name,
        )
    arr = f.arr = np.frombuffer(values, dtype=plan.wire)  # a view: possibly unaligned

    if layout == "jagged":
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
            offsets = np.frombuffer(key, dtype=_OFFSETS_DTYPE).astype(np.int64)  # its own N+1 int64
            if offsets[0] != 0 or (offsets[1:] < offsets[:-1]).any():
                raise DecodeError(f"jagged field {name!r}: offsets must start at 0 and never decrease", field=name)
            if pl is not None:
                offsets_t = _place(offsets, offsets.dtype, offsets.shape, pl)
            else:
                offsets_t = to_torch(offsets) if mode == "torch" else None
            hit = shared_offsets[key] = (offsets, offsets_t)
        f.offsets, f.offsets_t = hit
        inner = math.prod(shape)
        rows = int(f.offsets[-1])
        if rows * inner != arr.size:
            raise DecodeError(
                f"jagged field {name!r}: offsets end at {rows} rows × {inner} per row "
                f"but values hold {arr.size} {plan.wire.name} elements",
                field=name,
            )
        f.shape = (rows, *shape)
    elif layout == "dense":
        if math.prod(shape) != arr.size:
            raise DecodeError(
                f"dense field {name!r}: shape {list(shape)} needs {math.prod(shape)} elements, values hold {arr.size}",
                field=name,
            )
        f.shape = tuple(shape)
    else:
        raise DecodeError(f"field {name!r}: unknown layout {layout!r}", field=name)
    if pl is None and not (plan.same and arr.flags.aligned):
        f.at = 0  # placed by group_buffer_size
    return f


def group_buffer_size(prepared: list[Prepared]) -> int:
    """Lays out the fields that need a copy in one buffer; returns its byte size."""
    size = 0
    for f in prepared:
        if f.at >= 0:
            f.at = size
            size += (f.copy_bytes + _ALIGN - 1) // _ALIGN * _ALIGN
    return size


def finish_field(f: Prepared, buf: np.ndarray, mode: str, pl: Placement | None) -> Any:
    """The field's value: view, or its pass into ``buf``; tensor/nested tensor in torch mode."""
    if f.plan is None:
        return f.done
    arr, plan = f.arr, f.plan
    if pl is not None:
        if f.offsets is None:
            return _place(arr, plan.trainer, f.shape, pl)
        import torch

        lengths = np.diff(f.offsets)
        return torch.nested.nested_tensor_from_jagged(
            _place(arr, plan.trainer, f.shape, pl),
            f.offsets_t,
            min_seqlen=int(lengths.min()),
            max_seqlen=int(lengths.max()),
        )
    if f.at >= 0:
        dst = buf[f.at : f.at + f.copy_bytes]
        out = dst.view(plan.target)
        if plan.same:  # only unaligned: a plain byte copy
            np.copyto(dst, arr.view(np.uint8))
        else:
            np.copyto(out, arr, casting="unsafe")  # widening checked lossless by Plan
        arr = out
    if len(f.shape) != 1:
        arr = arr.reshape(f.shape)
    if f.offsets is not None:
        if mode == "numpy":
            return JaggedArray(values=arr, offsets=f.offsets)
        return nested_from_jagged(to_torch(arr), f.offsets_t)
    return to_torch(arr) if mode == "torch" else arr


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
        tdt = _TORCH_DTYPES[target] = to_torch(np.empty(0, dtype=target)).dtype
    host = host_buffer(shape, tdt, pl)
    np.copyto(host.numpy(), arr.reshape(shape), casting="unsafe")  # widening was checked losslessly
    return upload(host, pl)


def _decode_object(name, layout, trainer_name, wire_name, shape, values) -> np.ndarray:
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


_from_numpy = None


def to_torch(arr: np.ndarray):
    """``torch.from_numpy`` of a (possibly read-only) view, without a copy.

    The source is a view of the Kafka message or of the group's buffer, owned
    by this decode alone, so writes through the tensor touch no one else's
    data. torch warns once per process about read-only arrays; that one
    warning is muted here, on the first call (later calls skip the costly
    ``catch_warnings`` and the ``import``).
    """
    global _from_numpy
    if _from_numpy is None:
        import torch

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            torch.from_numpy(np.frombuffer(bytes(8), dtype=np.uint8))  # trips torch's warn-once now
        _from_numpy = torch.from_numpy
    return _from_numpy(arr)

"""The dtype names of the packed wire format and their numpy/torch twins."""

from __future__ import annotations

import numpy as np

from .errors import DecodeError

# Little-endian element types of ``PackedField.values`` / trainer dtypes.
NUMPY_WIRE: dict[str, np.dtype] = {
    "bool": np.dtype("?"),
    "uint8": np.dtype("u1"),
    "int8": np.dtype("i1"),
    "int16": np.dtype("<i2"),
    "int32": np.dtype("<i4"),
    "int64": np.dtype("<i8"),
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
}

OBJECT = "object"


def wire_dtype(name: str, field: str) -> np.dtype:
    """Returns the little-endian numpy dtype of a wire dtype name.

    Raises:
        DecodeError: The name is not one of the wire format's dtypes.
    """
    try:
        return NUMPY_WIRE[name]
    except KeyError:
        raise DecodeError(f"field {field!r}: unknown dtype {name!r}", field=field) from None


def native(dt: np.dtype) -> np.dtype:
    """The host-order version of a little-endian dtype (no-op on x86/ARM)."""
    return dt.newbyteorder("=") if dt.byteorder not in ("=", "|") else dt


def check_widening(wire: np.dtype, trainer: np.dtype, field: str) -> None:
    """Refuses conversions that could change values (narrowing, float→int).

    Integers widen to larger integers or to bool (masks travel as uint8);
    floats widen to larger floats.

    Raises:
        DecodeError: The wire dtype cannot be widened losslessly to the trainer dtype.
    """
    if wire == trainer:
        return
    if trainer.kind == "b" and wire.kind in "iu":
        return
    if np.can_cast(wire, trainer, casting="safe"):
        return
    raise DecodeError(
        f"field {field!r}: wire dtype {wire.name} cannot be widened to trainer dtype {trainer.name}",
        field=field,
    )


def torch_dtype(name: str):  # pragma: no cover - trivial
    """The torch dtype of a wire dtype name (torch must be importable)."""
    import torch

    return {
        "bool": torch.bool,
        "uint8": torch.uint8,
        "int8": torch.int8,
        "int16": torch.int16,
        "int32": torch.int32,
        "int64": torch.int64,
        "float32": torch.float32,
        "float64": torch.float64,
    }[name]

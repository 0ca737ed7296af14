"""Message tensors from what a rollout worker holds: torch tensors, numpy arrays or lists.

Each helper returns a C-contiguous little-endian numpy array in the wire
dtype (or raises :class:`InvalidRowError` naming the field), so the encoder
can hand the array's buffer to the record without a per-element loop.
The same values give the same bytes in all three forms: a list is read
with the JSON form's default dtype (SPEC §9: int32 token ids and routed
experts, float32 logprobs and media), arrays and tensors keep their own
dtype where the schema lets them (routed experts, media).
"""

from __future__ import annotations

import array
import sys
from typing import Any

import numpy as np

from .errors import InvalidRowError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# The dtypes of the schema's Tensor record (schemas/row-completed.avsc).
TENSOR_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64")
INTEGER_DTYPES = frozenset(("uint8", "int8", "int16", "int32", "int64"))
_LE = {name: np.dtype(name).newbyteorder("<") for name in TENSOR_DTYPES}
_I32 = _LE["int32"]
_INT_ONLY = frozenset((int,))
# array("i") is a C int: the wire's int32 where that is 4 little-endian bytes (every platform torch runs on).
_NATIVE_I32 = array.array("i").itemsize == 4 and sys.byteorder == "little"


def _torch_module() -> Any:
    """torch when something already imported it (a tensor can only exist then); never imports it."""
    return sys.modules.get("torch")


def _from_torch(t: Any, torch: Any, field: str, *, widen_floats: bool) -> np.ndarray:
    if t.requires_grad:
        t = t.detach()
    if not t.is_cpu:
        t = t.cpu()
    if t.dtype is torch.bfloat16 or t.dtype is torch.float16:
        if not widen_floats:
            raise InvalidRowError(field, f"has dtype {t.dtype}; send float32 or float64 (the wire has no half floats)")
        t = t.float()
    try:
        return t.numpy()
    except (TypeError, RuntimeError) as e:
        raise InvalidRowError(field, f"has torch dtype {t.dtype}, which numpy cannot read: {e}") from None


def as_numpy(value: Any, field: str, *, list_dtype: str, widen_floats: bool = False) -> np.ndarray:
    """``value`` as a numpy array (a view where possible); lists are read as ``list_dtype``.

    Raises:
        InvalidRowError: Not an array, tensor or (nested) list of numbers.
    """
    if isinstance(value, np.ndarray):
        return value
    torch = _torch_module()
    if torch is not None and isinstance(value, torch.Tensor):
        return _from_torch(value, torch, field, widen_floats=widen_floats)
    if isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value)
        except ValueError:
            raise InvalidRowError(field, "is a ragged nested list; it must be rectangular") from None
        if arr.size == 0:
            return np.zeros(arr.shape, dtype=list_dtype)
        if arr.dtype.kind not in "biuf":
            raise InvalidRowError(field, f"must hold numbers, got {_example(arr)} (numpy reads the list as {arr.dtype})")
        return arr  # int64 / float64 / bool as numpy read it; the caller casts to the wire dtype
    raise InvalidRowError(field, f"must be a torch tensor, numpy array or list, got {type(value).__name__}")


def _example(arr: np.ndarray) -> str:
    return repr(arr.reshape(-1)[0])


def _fits_int32(arr: np.ndarray) -> bool:
    if arr.size == 0 or arr.dtype.itemsize < 4 or arr.dtype == np.int32:
        return True
    return int(arr.min()) >= INT32_MIN and int(arr.max()) <= INT32_MAX


def token_ids(value: Any, field: str) -> np.ndarray:
    """``int32[tokens]``: a 1-D integer array whose values fit int32.

    Raises:
        InvalidRowError: Missing, not 1-D, not integers (bools and floats
            included), or a value outside int32.
    """
    if value is None:
        raise InvalidRowError(field, "is missing (every message needs token_ids)")
    if isinstance(value, list):
        types = set(map(type, value))
        if bool in types:  # numpy would read [True, 5] as ints
            raise InvalidRowError(field, "must be integers, got a list with booleans")
        if types <= _INT_ONLY and _NATIVE_I32:
            try:  # one C pass that also refuses values beyond int32; the array's buffer is the wire bytes
                return np.frombuffer(array.array("i", value), dtype=_I32)
            except OverflowError:
                pass  # the general path below names the range
    arr = as_numpy(value, field, list_dtype="int32")
    if arr.ndim != 1:
        raise InvalidRowError(field, f"must be 1-D, got shape {list(arr.shape)}")
    if arr.dtype.kind not in "iu":
        raise InvalidRowError(field, f"must be integers, got dtype {arr.dtype}")
    if arr.dtype == _I32:
        return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
    if not _fits_int32(arr):
        raise InvalidRowError(field, f"has values outside int32 (min {arr.min()}, max {arr.max()})")
    return arr.astype(_I32)


def logprobs(value: Any, field: str, tokens: int) -> np.ndarray:
    """``float32[tokens]``: one logprob per token (NaN allowed; the pipeline dead-letters it).

    Raises:
        InvalidRowError: Not 1-D numbers, or a length other than ``tokens``.
    """
    arr = as_numpy(value, field, list_dtype="float32", widen_floats=True)
    if arr.ndim != 1:
        raise InvalidRowError(field, f"must be 1-D, got shape {list(arr.shape)}")
    if arr.dtype.kind not in "iuf":
        raise InvalidRowError(field, f"must be numbers, got dtype {arr.dtype}")
    if arr.shape[0] != tokens:
        raise InvalidRowError(field, f"has {arr.shape[0]} entries for {tokens} tokens")
    return np.ascontiguousarray(arr, dtype=_LE["float32"])


def _wire_dtype(arr: np.ndarray, field: str) -> str:
    name = arr.dtype.name
    if name not in _LE:
        raise InvalidRowError(field, f"has dtype {arr.dtype}; the wire takes {', '.join(TENSOR_DTYPES)}")
    return name


def routed_experts(value: Any, field: str, tokens: int) -> tuple[str, list[int], np.ndarray]:
    """``(dtype, [tokens, layers, topk], array)``: integer expert ids, one row per token.

    Lists are int32 (the JSON form's default); arrays and tensors keep their
    integer dtype.

    Raises:
        InvalidRowError: Not rank 3, not integers, or covering another number
            of tokens than the message has.
    """
    arr = as_numpy(value, field, list_dtype="int32")
    if isinstance(value, (list, tuple)) and arr.dtype.kind in "iu":
        if not _fits_int32(arr):
            raise InvalidRowError(field, "has values outside int32 (lists are sent as int32)")
        arr = arr.astype(np.int32, copy=False)
    if arr.ndim != 3:
        raise InvalidRowError(field, f"has rank {arr.ndim} (shape {list(arr.shape)}); expected [tokens, layers, topk]")
    dtype = _wire_dtype(arr, field) if arr.dtype.kind in "iu" else None
    if dtype not in INTEGER_DTYPES:
        raise InvalidRowError(field, f"has dtype {arr.dtype}; expert ids must be integers")
    if arr.shape[0] != tokens:
        raise InvalidRowError(field, f"covers {arr.shape[0]} tokens but the message has {tokens}")
    return dtype, [int(d) for d in arr.shape], np.ascontiguousarray(arr, dtype=_LE[dtype])


def media_tensor(value: Any, field: str) -> tuple[str, list[int], np.ndarray]:
    """``(dtype, shape, array)`` of one media tensor; lists are float32 (the JSON form's default).

    Raises:
        InvalidRowError: Not numbers, or a dtype the wire does not carry
            (half floats, unsigned beyond uint8).
    """
    arr = as_numpy(value, field, list_dtype="float32")
    if isinstance(value, (list, tuple)) and arr.dtype.kind != "b":
        arr = arr.astype(np.float32, copy=False)
    dtype = _wire_dtype(arr, field)
    return dtype, [int(d) for d in arr.shape], np.ascontiguousarray(arr, dtype=_LE[dtype])

"""GymResult version 2: the numbers of each output item as binary columns (SPEC §2.1).

Writers (:func:`split`): in every output item of ``gym_result.response.output``
that is an object, each of these keys moves out of the item's JSON into the
item's columns entry exactly when its value passes the rule, and otherwise
stays in the JSON as it was:

- ``prompt_token_ids``, ``generation_token_ids``: every element an integer
  (``int``, not ``bool``) in int32 range → int32 little-endian bytes (an
  empty list moves too);
- ``generation_log_probs``: every element a number (``int`` or ``float``,
  not ``bool``) → float64 little-endian bytes, NaN and infinities included;
- ``routed_experts``: an ``nrlre1:<int8|int16|int32>:<S>x<L>x<K>:<base64>``
  string whose payload is S*L*K elements and which re-renders byte for byte
  from them (form ``envelope``, its dtype); or rectangular nested lists
  ``[S][L][K]`` (all >= 1) of int32-range integers (form ``lists``, int32).

numpy arrays and torch tensors (and numpy integers or floats inside lists)
count as the lists they stand for. An entry exists only for items where something moved, in
item order. Readers (:func:`assemble`) put the values back: lists of ints
and floats, the same envelope string, nested lists.
"""

from __future__ import annotations

import base64
import binascii
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

try:  # envelopes of router replay are megabytes of base64: decoded ~50x faster than by binascii
    import pybase64
except ImportError:  # pragma: no cover - a declared dependency; binascii is the fallback
    pybase64 = None

from .errors import DecodeError

KEYS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts")
ROUTE_ITEMSIZE = {"int8": 1, "int16": 2, "int32": 4}
FORMS = ("envelope", "lists")  # the GymRoutedExpertsForm enum, in symbol order
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_MAGIC = "nrlre1"
_LIST_TYPES = frozenset((list, tuple))


@dataclass(slots=True)
class WireRoutes:
    form: int  # index into FORMS
    dtype: bytes
    shape: list[int]
    data: bytes


@dataclass(slots=True)
class WireColumns:
    item: int
    prompt_token_ids: bytes | None = None
    generation_token_ids: bytes | None = None
    generation_log_probs: bytes | None = None
    routed_experts: WireRoutes | None = None


# ---------------------------------------------------------------- writer rules


_BOOLS = (bool, np.bool_)


def _no_bools(values: Any, data: bytes, dtype: str) -> bool:
    """No bool among ``values`` (``data``: their packed bytes): a bool packs as 0 or 1, so only those places are looked at."""
    if dtype == "<i4":
        suspects = np.flatnonzero(np.frombuffer(data, "<u4") <= 1)  # 0 and 1 (negative ids are large unsigned)
    else:
        packed = np.frombuffer(data, dtype)
        suspects = np.flatnonzero((packed == 0) | (packed == 1))
    return not any(type(values[i]) in _BOOLS for i in suspects.tolist())


def _pack(fmt: str, values: Any, dtype: str) -> bytes | None:
    """``values`` packed by struct (one C pass that checks each type and range), refusing bools."""
    try:
        data = struct.pack(f"<{len(values)}{fmt}", *values)
    except (struct.error, OverflowError, TypeError, ValueError):
        return None
    return data if _no_bools(values, data, dtype) else None


def _torch(v: Any) -> bool:
    return type(v).__module__.startswith("torch") and hasattr(v, "tolist")


def _column_bytes(v: Any, fmt: str, dtype: str, kinds: str) -> bytes | None:
    t = type(v)
    if t is list or t is tuple:
        return _pack(fmt, v, dtype) if v else b""
    if _torch(v):  # a tensor is the list it stands for (as its JSON would be)
        return _column_bytes(v.tolist(), fmt, dtype, kinds)
    if not isinstance(v, np.ndarray) or v.ndim != 1:
        return None
    if v.dtype == object:
        return _column_bytes(v.tolist(), fmt, dtype, kinds)
    if v.dtype.kind not in kinds:
        return None
    if fmt == "i" and v.size and v.dtype.itemsize >= 4 and (int(v.min()) < INT32_MIN or int(v.max()) > INT32_MAX):
        return None
    return v.astype(dtype).tobytes()


def int32_bytes(v: Any) -> bytes | None:
    """int32 LE bytes of a list (or 1-D array) of int32-range integers, no bools; else None.

    struct's ``i`` takes what has ``__index__`` (numpy integers too) and
    refuses floats, None and strings; bools are looked for where a 0 or 1 landed.
    """
    return _column_bytes(v, "i", "<i4", "iu")


def float64_bytes(v: Any) -> bytes | None:
    """float64 LE bytes of a list (or 1-D array) of numbers, no bools; else None.

    struct's ``d`` takes ints and floats (numpy scalars too) and refuses None
    and strings; an int beyond float64's range stays JSON.
    """
    return _column_bytes(v, "d", "<f8", "iuf")


def _dims(text: str) -> list[int] | None:
    dims = text.split("x")
    if len(dims) != 3:
        return None
    out = []
    for d in dims:
        if not (d.isascii() and d.isdigit()) or (len(d) > 1 and d[0] == "0"):
            return None
        n = int(d)
        if n > INT32_MAX:
            return None
        out.append(n)
    return out


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _strict_base64(payload: str) -> bytes:
    """The bytes of padded base64 text in the standard alphabet, else ``binascii.Error`` / ``ValueError``.

    pybase64 (SIMD, ~50x binascii) or binascii's strict mode (Python 3.11+)
    refuse every character outside the alphabet and misplaced padding in the
    one pass that decodes; the caller checks the length and the unused bits
    of the last character, and then the text is exactly what ``b64encode``
    writes for the bytes. Without either, the bytes are encoded again and compared.
    """
    if pybase64 is not None:
        return pybase64.b64decode(payload, validate=True)
    if _STRICT:
        return binascii.a2b_base64(payload, strict_mode=True)
    data = binascii.a2b_base64(payload)
    if binascii.b2a_base64(data, newline=False) != payload.encode("ascii"):
        raise ValueError("not canonical base64")
    return data


_STRICT = sys.version_info >= (3, 11)


def _envelope(s: str) -> WireRoutes | None:
    a = s.find(":")
    b = s.find(":", a + 1)
    c = s.find(":", b + 1)
    if a != len(_MAGIC) or b < 0 or c < 0 or not s.startswith(_MAGIC):
        return None
    dtype = s[a + 1 : b]
    itemsize = ROUTE_ITEMSIZE.get(dtype)
    shape = _dims(s[b + 1 : c])
    if itemsize is None or shape is None:
        return None
    n = shape[0] * shape[1] * shape[2] * itemsize
    if len(s) - c - 1 != 4 * ((n + 2) // 3):
        return None
    payload = s[c + 1 :]
    try:
        data = _strict_base64(payload)
    except (binascii.Error, ValueError, TypeError, UnicodeEncodeError):
        return None
    tail = n % 3  # 1: "XY==", 2: "XYZ=": the last character's unused low bits must be 0
    if len(data) != n or (tail and _ALPHABET.index(payload[-3 if tail == 1 else -2]) & (0x0F if tail == 1 else 0x03)):
        return None
    return WireRoutes(0, dtype.encode("ascii"), shape, data)


def _nested(v: Any) -> WireRoutes | None:
    if not v or not set(map(type, v)) <= _LIST_TYPES:
        return None
    lengths = set(map(len, v))
    if len(lengths) != 1 or 0 in lengths:
        return None
    rows = list(chain.from_iterable(v))
    if not set(map(type, rows)) <= _LIST_TYPES:
        return None
    widths = set(map(len, rows))
    if len(widths) != 1 or 0 in widths:
        return None
    data = _pack("i", list(chain.from_iterable(rows)), "<i4")
    if data is None:
        return None
    return WireRoutes(1, b"int32", [len(v), len(v[0]), len(rows[0])], data)


def routes(v: Any) -> WireRoutes | None:
    """Routed experts as an envelope or int32 lists column, else None (the value stays JSON)."""
    t = type(v)
    if t is str:
        return _envelope(v)
    if t is list or t is tuple:
        return _nested(v)
    if _torch(v):
        return routes(v.tolist())
    if isinstance(v, np.ndarray):
        if v.ndim != 3 or v.dtype.kind not in "iu" or 0 in v.shape:
            return _nested(v.tolist()) if v.ndim == 3 and v.dtype == object else None
        if v.dtype.itemsize >= 4 and (int(v.min()) < INT32_MIN or int(v.max()) > INT32_MAX):
            return None
        return WireRoutes(1, b"int32", [int(d) for d in v.shape], v.astype("<i4").tobytes())
    return None


def split(output: Any) -> tuple[list[Any] | None, list[WireColumns]]:
    """``(output without the moved keys, columns)``; ``(None, [])`` when nothing moves.

    ``output`` is ``gym_result.response.output`` (a list). Items are copied
    only where a key moves; the others, and the caller's objects, are left
    as they are.
    """
    columns: list[WireColumns] = []
    new: list[Any] | None = None
    for i, item in enumerate(output):
        if not isinstance(item, Mapping):
            continue
        get = item.get
        p, g, lp, r = get("prompt_token_ids"), get("generation_token_ids"), get("generation_log_probs"), get("routed_experts")
        if p is None and g is None and lp is None and r is None:
            continue
        col = WireColumns(
            i,
            None if p is None else int32_bytes(p),
            None if g is None else int32_bytes(g),
            None if lp is None else float64_bytes(lp),
            None if r is None else routes(r),
        )
        moved = {
            k
            for k, v in zip(KEYS, (col.prompt_token_ids, col.generation_token_ids, col.generation_log_probs, col.routed_experts))
            if v is not None
        }
        if not moved:
            continue
        if new is None:
            new = list(output)
        new[i] = {k: v for k, v in item.items() if k not in moved}
        columns.append(col)
    return new, columns


# ---------------------------------------------------------------- reader


def _column(data: bytes, dtype: str, width: int, field: str) -> list[Any]:
    if len(data) % width:
        raise DecodeError(f"{field} has {len(data)} bytes, not a multiple of {width}")
    return np.frombuffer(data, dtype).tolist()


def _float_text(x: float) -> float | str:
    return x if x - x == 0 else ("NaN" if x != x else ("Infinity" if x > 0 else "-Infinity"))


def _routes_value(r: Mapping[str, Any], field: str) -> Any:
    form, dtype, shape, data = r["form"], r["dtype"], [int(d) for d in r["shape"]], r["data"]
    itemsize = ROUTE_ITEMSIZE.get(dtype)
    if itemsize is None or len(shape) != 3 or min(shape) < 0:
        raise DecodeError(f"{field} has dtype {dtype!r} and shape {shape}; expected int8/int16/int32 and [S, L, K]")
    if len(data) != shape[0] * shape[1] * shape[2] * itemsize:
        raise DecodeError(f"{field} has {len(data)} bytes for shape {shape} of {dtype}")
    if form == "envelope":
        return f"{_MAGIC}:{dtype}:{shape[0]}x{shape[1]}x{shape[2]}:{base64.b64encode(data).decode('ascii')}"
    return np.frombuffer(data, f"<i{itemsize}").reshape(shape).tolist()


def assemble(result: Any, columns: list[Mapping[str, Any]] | None, *, json_form: bool = False) -> Any:
    """The ``gym_result`` object with its columns (as fastavro decodes them) put back into its items.

    Mutates and returns ``result`` (a freshly parsed JSON object). With
    ``json_form``, NaN and infinite logprobs are the strings ``"NaN"``,
    ``"Infinity"``, ``"-Infinity"`` (the JSON form's spelling) instead of floats.

    Raises:
        DecodeError: An entry names an item that is not an object, a key the
            item's JSON already has, or bytes of the wrong length; the
            message names ``gym_result.response.output[i].<key>``.
    """
    if not columns:
        return result
    response = result.get("response") if isinstance(result, dict) else None
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(output, list):
        raise DecodeError("gym_result.response.output is not a list, but the record has columns for it")
    for c in columns:
        i = c["item"]
        base = f"gym_result.response.output[{i}]"
        if not 0 <= i < len(output) or not isinstance(output[i], dict):
            raise DecodeError(f"{base} is not an object of the output, but the record has columns for it")
        item = output[i]
        for key in KEYS:
            v = c[key]
            if v is None:
                continue
            field = f"{base}.{key}"
            if key in item:
                raise DecodeError(f"{field} is both in the JSON and in the columns")
            if key == "generation_log_probs":
                lp = _column(v, "<f8", 8, field)
                item[key] = [_float_text(x) for x in lp] if json_form and not np.isfinite(np.frombuffer(v, "<f8")).all() else lp
            elif key == "routed_experts":
                item[key] = _routes_value(v, field)
            else:
                item[key] = _column(v, "<i4", 4, field)
    return result

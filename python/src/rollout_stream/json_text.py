"""The JSON text of the JSON-typed Avro fields (``agent_ref``, ``request``, ``full_result``, ``gym_row``, ``gym_result``).

The pipeline recognises a re-sent row by its decoded content (numbers by
value, key order ignored), so this text need not be JavaScript's; it must
be valid JSON that reads back to the same values, and the same value must
give the same bytes every time (a re-send by one publisher is
byte-identical). orjson writes it (compact, keys in the dict's order,
shortest round-trip floats, raw UTF-8); a value orjson refuses (an integer
beyond 64 bits, a lone surrogate) is written by Python's ``json`` instead,
ASCII-escaped. Before that, one walk makes the value plain JSON:

- NaN and ±infinity become the strings ``"NaN"``, ``"Infinity"``,
  ``"-Infinity"`` (the JSON form's spelling, which the pipeline reads back);
- numpy values and torch tensors become Python numbers and lists
  (``tolist``), other mappings dicts;
- anything else that is not JSON (a set, bytes, an object, a cycle) is an
  :class:`InvalidRowError` naming the path to it.

The walk copies nothing it does not change, and checks a list of plain
numbers with one ``math.fsum`` (finite sum: no NaN or infinity in it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import orjson

from .errors import InvalidRowError

_OPTIONS = orjson.OPT_NON_STR_KEYS
_MAX_DEPTH = 200  # deeper is a cycle or not a rollout (orjson stops at 254)
_SCALARS = frozenset((str, int, bool, type(None)))
_NUMBERS = frozenset((int, float, bool))


class _NotJson(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.path: list[str] = []


def _nonfinite(x: float) -> str:
    return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")


def _entries(v: Any, entries: Any, depth: int, copy: Any, label: Any) -> Any:
    """``v`` with its entries made plain, copied (by ``copy``) only when one changes."""
    out = None
    for k, x in entries:
        t = type(x)
        if t is str or t is int or t is bool or x is None or (t is float and x - x == 0):
            continue  # the common leaves, without a call
        try:
            y = _plain(x, depth)
        except _NotJson as e:
            e.path.append(label(k))
            raise
        if y is not x:
            if out is None:
                out = copy(v)
            out[k] = y
    return v if out is None else out


def _list(v: Any, depth: int) -> Any:
    types = set(map(type, v))
    if types <= _SCALARS:
        return v
    if types <= _NUMBERS:
        try:
            if math.isfinite(math.fsum(v)):
                return v
        except (OverflowError, ValueError):  # inf - inf, or a sum beyond float range: look at each
            pass
    return _entries(v, enumerate(v), depth, list, "[{}]".format)


def _dict(v: Mapping[Any, Any], depth: int) -> Any:
    return _entries(v, v.items(), depth, dict, ".{}".format)


def _plain(v: Any, depth: int) -> Any:
    """``v`` itself when orjson writes it as the value it is, else a plain-JSON stand-in."""
    t = type(v)
    if t is str or t is int or t is bool or v is None:
        return v
    if t is float:
        return v if v - v == 0 else _nonfinite(v)
    depth += 1
    if depth > _MAX_DEPTH:
        raise _NotJson(f"nested more than {_MAX_DEPTH} levels deep (a circular reference?)")
    if t is dict:
        return _dict(v, depth)
    if t is list or t is tuple:
        return _list(v, depth)
    if isinstance(v, (str, int)):  # subclasses orjson writes as their base (bool was handled above)
        return v
    if isinstance(v, float):
        return _plain(float(v), depth)
    if type(v).__module__.split(".")[0] in ("numpy", "torch") and hasattr(v, "tolist"):
        return _plain(v.tolist(), depth)  # numpy scalars → Python numbers, arrays and tensors → nested lists
    if isinstance(v, Mapping):
        return _dict(dict(v.items()), depth)
    raise _NotJson(f"a {type(v).__name__}, which is not JSON")


def dumps(value: Any, field: str = "value") -> bytes:
    """``value`` as compact UTF-8 JSON text, the same bytes for the same value.

    Raises:
        InvalidRowError: Something in ``value`` is not JSON; the message names
            its path below ``field``.
    """
    try:
        plain = _plain(value, 0)
    except _NotJson as e:
        raise InvalidRowError(field + "".join(reversed(e.path)), f"is {e.what}") from None
    try:
        return orjson.dumps(plain, option=_OPTIONS)
    except orjson.JSONEncodeError:
        pass  # an integer beyond 64 bits, a lone surrogate, an odd key: Python's encoder says it
    try:
        return json.dumps(plain, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")
    except (TypeError, ValueError) as e:
        raise InvalidRowError(field, f"is not JSON: {e}") from None

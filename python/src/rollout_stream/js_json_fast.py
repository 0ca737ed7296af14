"""``JSON.stringify`` text at orjson's speed, for the values where that can be proven cheaply.

A ``GymResult`` carries every token id and logprob of a rollout as JSON
(SPEC §2.1), so publishing one is bounded by JSON encoding: Python's C
encoder writes number lists at ~30-50 MB/s, orjson at ~500-800 MB/s.
orjson spells most numbers as JavaScript does (shortest round-trip digits,
``0.00001``, ``1e-7``, ``1e+21``, raw UTF-8 strings with JavaScript's
escapes) but not all of them, so :func:`dumps_utf8` walks the value first
and rewrites what orjson would get wrong, or gives up (returns None) so
that :mod:`rollout_stream.js_json` takes its exact path:

- floats: orjson writes ``1.0`` (JavaScript ``1``), ``-0.0`` (``0``),
  ``1.5e-6`` (``0.0000015``), ``1e+16``..``1e+20`` (positional there) and
  ``null`` for NaN/±infinity (SPEC §9: the strings ``"NaN"``,
  ``"Infinity"``, ``"-Infinity"``). A lone float is replaced by its exact
  text; a list of numbers is written by orjson once and its text repaired
  with bytes operations that only touch those spellings;
- integers beyond ±2**53 are doubles in JavaScript (``2**63`` →
  ``9223372036854776000``): orjson writes them exactly, so they are found
  (in a list: a run of 16 digits in its text, or ``math.hypot`` over it)
  and spelled by the exact path;
- keys: JavaScript puts integer-like keys first, so a key starting with a
  digit, or one that is not a ``str``, sends the value to the exact path;
- everything else orjson refuses or that is not a plain ``dict``, ``list``,
  ``tuple``, ``str``, ``int``, ``float``, ``bool`` or ``None`` (lone
  surrogates, numpy and torch values, subclasses, deep nesting) goes to the
  exact path too.

The list of numbers is the case that matters (a GymResult is mostly token
ids and logprobs), so it is checked and repaired without a Python step per
element: token ids by four memchr scans of orjson's text (no ``.``, ``e``,
``n``, ``"``: integers only) and a vectorised search for 16 digits in a
row; other number lists by one ``math.hypot`` (a C pass that raises on a
non-number and says NaN, infinity or big magnitude), a vectorised search
for ``.0`` before a delimiter (then ``bytes.replace``) and a ``find`` loop
over the few ``e``s. A long list's text stays its own piece
(:func:`dumps_parts`): the skeleton around it is written by orjson with a
one-byte mark in its place, so the record gets the bytes in one copy. The
tests compare every result with the exact path (which was compared with
Node), and this path was compared with Node on 300k random doubles.
"""

from __future__ import annotations

import math
import re
from typing import Any

try:  # an optional speed-up: without it the exact path writes the same text
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    orjson = None  # type: ignore[assignment]

from . import js_json  # each imports the other; names are looked up at call time

_MAX_SAFE = 2**53
# hypot(list) below this proves every element is within ±2**53 (hypot >= max |x|,
# within an ulp), so orjson's integer digits are JavaScript's.
_HYPOT_SAFE = 2.0**52
_MAX_DEPTH = 200  # orjson refuses more than 254 levels; the exact path allows 500
_INF = math.inf
_hypot = math.hypot
_Fragment = orjson.Fragment if orjson is not None else None
# A number list's text of this size or more stays its own piece, marked in the
# skeleton by a byte JSON text never holds raw (orjson escapes control characters).
_OWN_PIECE = 512
_MARK_BYTE = b"\x01"
_MARK = _Fragment(_MARK_BYTE) if orjson is not None else None

_HIGH_NIBBLES = 0xF0F0F0F0F0F0F0F0
_ALL_DIGITS = 0x3030303030303030
# -0 as left by stripping "-0.0"'s ".0": only a negative zero ends so in a number list.
_MINUS_ZERO = re.compile(rb"-0(?=[,\]])")
# The exponent digits of orjson's 1e+16..1e+20 (JavaScript writes these positionally).
_E_PLUS = re.compile(rb"(?:1[6-9]|20)(?![0-9])")


class _Bail(Exception):
    """This value needs the exact path."""


def dumps_utf8(value: Any) -> bytes | None:
    """``value`` as ``JSON.stringify`` would write it, in UTF-8, or None where only the exact path can say.

    None is also the answer for anything that is not JSON (the exact path
    then names the offending field) and when orjson is not installed.
    """
    parts = dumps_parts(value)
    return None if parts is None else parts[0] if len(parts) == 1 else b"".join(parts)


def dumps_parts(value: Any) -> list[bytes] | None:
    """:func:`dumps_utf8` as pieces to concatenate (the long number lists' texts stay their own pieces).

    The Avro encoder joins them straight into the record, so the bulk of a
    GymResult is copied once instead of once more into one JSON text.
    """
    if orjson is None:
        return None
    texts: list[bytes] = []
    try:
        out = orjson.dumps(_convert(value, 0, texts))
    except (_Bail, TypeError, ValueError, OverflowError, RecursionError):  # orjson.JSONEncodeError is a TypeError
        return None
    if not texts:
        return [out]
    # orjson writes the skeleton in the walk's order, so the k-th mark is the k-th text.
    pieces = out.split(_MARK_BYTE)
    if len(pieces) != len(texts) + 1:  # cannot happen: JSON text has no raw control character
        return None
    parts = [pieces[0]]
    for text, piece in zip(texts, pieces[1:]):
        parts.append(text)
        parts.append(piece)
    return parts


def _float_ok(x: float) -> bool:
    """True when orjson writes ``x`` as JavaScript does (finite, not integral, no exponent they disagree on)."""
    a = abs(x)
    return (1e-5 <= a < 1e16 or 0 < a < 1e-6) and not x.is_integer()


def _convert(v: Any, depth: int, texts: list[bytes]) -> Any:
    """``v`` itself when orjson writes it right, else a stand-in that it does (a copy holding Fragments)."""
    t = type(v)
    if t is str or t is bool or v is None:
        return v
    if t is int:
        return v if -_MAX_SAFE <= v <= _MAX_SAFE else _Fragment(js_json._int_text(v).encode())
    if t is float:
        return v if _float_ok(v) else _Fragment(js_json._float_text(v).encode())
    if t is dict:
        return _dict(v, depth, texts)
    if t is list or t is tuple:
        return _list(v, depth, texts)
    raise _Bail


def _dict(d: dict, depth: int, texts: list[bytes]) -> Any:
    if depth > _MAX_DEPTH:
        raise _Bail
    out = None
    for k, v in d.items():
        if type(k) is not str or ("0" <= k[:1] <= "9"):
            raise _Bail  # JavaScript orders integer-like keys first; the exact path knows how
        t = type(v)
        # The common types inline: this loop runs for every key of a GymResult.
        if t is str or v is None or t is bool:
            continue
        if t is list:
            r = _list(v, depth + 1, texts)
        elif t is dict:
            r = _dict(v, depth + 1, texts)
        elif t is int:
            if -_MAX_SAFE <= v <= _MAX_SAFE:
                continue
            r = _convert(v, depth + 1, texts)
        elif t is float:
            if _float_ok(v):
                continue
            r = _convert(v, depth + 1, texts)
        else:
            r = _convert(v, depth + 1, texts)
        if r is not v:
            if out is None:
                out = dict(d)
            out[k] = r
    return d if out is None else out


def _list(items: list | tuple, depth: int, texts: list[bytes]) -> Any:
    if not items:
        return items
    if depth > _MAX_DEPTH:
        raise _Bail
    t = type(items[0])
    text = None
    if t is float or t is int:
        text = _number_list(items)
    elif t is list or t is tuple:
        text = _int_nest(items)
    if text is not None:
        if len(text) < _OWN_PIECE:
            return _Fragment(text)
        texts.append(text)
        return _MARK
    out = None
    for i, v in enumerate(items):
        r = _convert(v, depth + 1, texts)
        if r is not v:
            if out is None:
                out = list(items)
            out[i] = r
    return items if out is None else out


def _number_list(items: list | tuple) -> bytes | None:
    """A flat list of numbers (bools allowed) in JavaScript's text; None when it holds anything else."""
    if type(items[-1]) is int and len(items) > 16:  # token ids: orjson's text says whether all are integers
        try:
            text = orjson.dumps(items)
        except TypeError:
            return None
        if _only_integers(text):
            return text if len(text) < 18 or not _has_run16(text) else None
    try:
        h = _hypot(*items)
    except (TypeError, OverflowError):  # not all numbers, or an integer beyond the double range
        return None
    text = orjson.dumps(items)
    if not h < _HYPOT_SAFE:  # NaN, an infinity, or large magnitudes: look closer
        text = _specials(items, text)
        if text is None:
            return None
    if b"." in text and _has_integral(text):
        text = text.replace(b".0,", b",")
        if text.endswith(b".0]"):
            text = text[:-3] + b"]"
        if b"-0" in text:  # "-0.0" left "-0"
            text = _MINUS_ZERO.sub(b"0", text)
    if b"e" in text:
        text = _fix_exponents(text)
    return text


def _has_integral(text: bytes) -> bool:
    """Whether a number list's text holds an integral float (``.0`` before ``,`` or ``]``)."""
    if len(text) < 2048:
        return b".0," in text or text.endswith(b".0]")
    import numpy as np  # four vector compares: ~4x faster than bytes.find here

    buf = np.frombuffer(text, np.uint8)
    end = buf[2:]
    return bool(((buf[1:-1] == 48) & (buf[:-2] == 46) & ((end == 44) | (end == 93))).any())


def _specials(items: list | tuple, text: bytes) -> bytes | None:
    """``text`` with orjson's ``null`` for NaN/±infinity spelled as SPEC §9 strings; None for a big integer."""
    specials = []
    for x in items:
        if type(x) is float:
            if x != x:
                specials.append(b'"NaN"')
            elif x == _INF:
                specials.append(b'"Infinity"')
            elif x == -_INF:
                specials.append(b'"-Infinity"')
        elif type(x) is int and not -_MAX_SAFE <= x <= _MAX_SAFE:
            return None
    if not specials:
        return text
    parts = text.split(b"null")
    if len(parts) != len(specials) + 1:  # cannot happen for numbers (hypot refused None); be sure anyway
        return None
    out = [parts[0]]
    for s, p in zip(specials, parts[1:]):
        out.append(s)
        out.append(p)
    return b"".join(out)


def _fix_exponents(text: bytes) -> bytes:
    """orjson's ``d.ddde-6`` and ``1e+16``..``1e+20`` spelled as JavaScript does, in a flat number list's text.

    Walks the ``e``s with ``find`` (a memchr; a logprob list has a few). A
    token starts after a ``,`` or the opening ``[``; the ``e`` of ``true`` /
    ``false`` is passed over.
    """
    out: list[bytes] = []
    start = 0
    n = len(text)
    i = text.find(b"e")
    while i != -1:
        sign = text[i + 1]
        if sign == 45:  # "-": only e-6 differs (JavaScript is positional down to 1e-6)
            end = i + 3
            if text[i + 2] == 54 and (end == n or text[end] in b",]"):
                k = text.rfind(b",", 0, i) + 1 or 1
                mantissa = text[k:i]
                negative = mantissa[:1] == b"-"
                out.append(text[start:k])
                out.append(b"-0.00000" if negative else b"0.00000")
                out.append((mantissa[1:] if negative else mantissa).replace(b".", b""))
                start = end
        elif sign == 43:  # "+": 1e+16..1e+20 are positional in JavaScript; 1e+21 and up agree
            m = _E_PLUS.match(text, i + 2)
            if m is not None:
                k = text.rfind(b",", 0, i) + 1 or 1
                out.append(text[start:k])
                out.append(js_json.js_number(float(text[k : m.end()])).encode())
                start = m.end()
        i = text.find(b"e", i + 1)
    if not out:
        return text
    out.append(text[start:])
    return b"".join(out)


def _only_integers(text: bytes) -> bool:
    """Whether orjson's text of a list holds nothing but integers (and lists of them).

    Four memchr scans: a float has '.' or 'e' (and NaN/±infinity are 'null'),
    a bool has 'e', None 'n', a string and every non-empty object '"'.
    """
    return not (b"." in text or b"e" in text or b"n" in text or b'"' in text)


def _has_run16(text: bytes) -> bool:
    """Whether an integers-only text has 16 digits in a row (a value that may be beyond 2**53)."""
    import numpy as np

    words = len(text) // 8
    if words >= 2:
        # 16 digits in a row fill at least one aligned 8-byte word, and in such a text only
        # digits have the high nibble 3: one pass over words rules out (nearly) every list.
        w = np.frombuffer(text, np.uint64, words)
        if not ((w & _HIGH_NIBBLES) == _ALL_DIGITS).any():
            return False
    r = np.frombuffer(text, np.uint8) > 47  # digits (and the brackets, each alone at an end)
    for shift in (1, 2, 4, 8):  # r[i] becomes "2*shift digits from i on"
        r = r[:-shift] & r[shift:]
    return bool(r.any())


def _int_nest(items: list | tuple) -> bytes | None:
    """A nest of integer lists (e.g. routed experts ``[tokens][layers][topk]``) as text; None otherwise."""
    try:
        text = orjson.dumps(items)
    except TypeError:
        return None
    if not _only_integers(text):
        return None
    if len(text) > 17 and _has_run16(text):  # maybe beyond 2**53: the element walk decides
        return None
    return text

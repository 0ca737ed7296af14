"""JSON text exactly as JavaScript's ``JSON.stringify`` writes it (for the JSON-typed Avro fields).

The TypeScript publisher stores ``agent_ref``, ``request``, ``full_result``,
``gym_row`` and ``gym_result`` as ``JSON.stringify(value)``; replay
detection compares record bytes (SPEC §3 rule 3), and both publishers must
write the same bytes for the same value. Python's ``json`` differs from
JavaScript in four ways, each handled here:

- numbers: JavaScript prints a double with the shortest round-trip digits
  (as ``repr`` does) but in its own layout: ``1.0`` → ``1``, ``1e-05`` →
  ``0.00001``, ``1e+16`` → ``10000000000000000``, ``1e-07`` → ``1e-7``,
  ``-0.0`` → ``0``; an integer beyond ±2**53 is a double there, so it is
  printed as one (``2**63`` → ``9223372036854776000``);
- NaN and ±infinity, which JSON text cannot hold, become the strings
  ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (SPEC §9; the TypeScript ingest
  reads them back); JavaScript itself would write ``null``;
- strings: only ``"``, ``\\`` and control characters are escaped (short forms
  ``\\b \\f \\n \\r \\t``, else ``\\u00xx``), everything else is raw UTF-8; a
  surrogate pair held as two code points is one character, a lone surrogate
  is written ``\\udxxx``;
- key order: a JavaScript object lists integer-like keys (``"0"``, ``"17"``,
  up to 2**32 - 2) first in ascending order, then the other keys in
  insertion order; later duplicates (``1`` and ``"1"``) overwrite the value
  in the first one's place.

:func:`dumps` first tries :mod:`rollout_stream.js_json_fast` (orjson, with
the few spellings it gets wrong repaired; ~10x faster on number lists),
which answers only where it can prove the text is JavaScript's. Otherwise
it runs Python's C encoder and then repairs the number
spellings that differ, with a few literal-anchored regex substitutions over
the text outside string literals (a number-by-number pass in Python would
cost more than the encoding itself: a GymResult carries every token id and
logprob as JSON). Input it cannot repair that way (integer-like or other
non-string-born keys, surrogates, types the C encoder refuses) goes through
:func:`dumps_exact`, the plain recursive reference implementation, which
hands long lists back to the fast path; the tests check both agree (and
both were compared with Node on random values while writing them).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

from . import js_json_fast  # each imports the other; names are looked up at call time
from .errors import InvalidRowError

_MAX_SAFE = 2**53
_MAX_INDEX = 2**32 - 2  # the largest array index key a JS object orders first
_escape_string: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]

_SURROGATE = re.compile("[\ud800-\udfff]")
_INDEX_KEY = re.compile(r"0|[1-9][0-9]*")
# A key a non-str key could have become (digits, true/false/null), which only
# the reference walk orders and de-duplicates like JavaScript. Two patterns
# with a literal first character: re scans those far faster than one with a
# character class. False positives only cost the slow path.
_ODD_KEY = (re.compile(r',"(?:-?[0-9][^"]*|true|false|null)":'), re.compile(r'\{"(?:-?[0-9][^"]*|true|false|null)":'))
# JSON string literals as Python's encoder writes them (``"`` inside is always ``\"``).
_STRING_LITERAL = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")')
# Repairs of Python's number spellings, applied outside string literals, in
# this order. Outside strings the text holds only numbers, true/false/null
# and punctuation, so e.g. ".0" before a delimiter always ends an integral float.
_END = r"(?=[,\]}]|$)"
_INTEGRAL = re.compile(r"\.0" + _END)  # 1.0 → 1, -0.0 → -0
_MINUS_ZERO = re.compile(r"-0" + _END)  # -0 → 0 (only step 1 makes such a token)
# e-05 / e-06 are matched in the reversed text, where they start with a
# literal ("50-e"): re finds a literal prefix quickly, a leading [0-9] not.
_R_E5 = re.compile(r"50-e(?:([0-9]+)\.)?([0-9])")  # reversed 1.5e-05 → reversed 0.000015
_R_E6 = re.compile(r"60-e(?:([0-9]+)\.)?([0-9])")  # reversed 1.5e-06 → reversed 0.0000015
_E_PADDED = re.compile(r"e-0(?=[7-9])")  # 1e-07 → 1e-7
_E_POSITIONAL = re.compile(r"[0-9.]+e\+(?:1[6-9]|20)(?![0-9])")  # 1.5e+16 → 15000000000000000 (rare)
_BIG_INT_HINT = re.compile(r"[\[,:]-?[0-9]{16}")  # an integer token of 16+ digits (fractions follow a ".")
_BIG_INT = re.compile(r"(?<![0-9.])-?[0-9]{16,}(?![0-9.eE])")  # may exceed 2**53
_DIGITS16 = re.compile(r"[0-9]{16}")


def js_number(x: float) -> str:
    """A finite double the way JavaScript's ``Number.prototype.toString`` writes it.

    Uses ``repr`` for the shortest round-trip digits (both languages pick the
    same ones) and ECMAScript's layout rules for where the point and the
    exponent go.
    """
    if x == 0:
        return "0"
    r = repr(x)
    sign = ""
    if r[0] == "-":
        sign, r = "-", r[1:]
    mantissa, _, exp = r.partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    point = len(whole) + (int(exp) if exp else 0)  # digits before the decimal point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    s = stripped.rstrip("0")
    k, n = len(s), point
    if k <= n <= 21:
        body = s + "0" * (n - k)
    elif 0 < n <= 21:
        body = s[:n] + "." + s[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + s
    else:
        e = n - 1
        body = (s if k == 1 else s[0] + "." + s[1:]) + ("e+" if e >= 0 else "e-") + str(abs(e))
    return sign + body


def _float_text(x: float) -> str:
    if math.isfinite(x):
        return js_number(x)
    return '"NaN"' if x != x else ('"Infinity"' if x > 0 else '"-Infinity"')


def _int_text(i: int) -> str:
    if -_MAX_SAFE <= i <= _MAX_SAFE:
        return str(i)
    try:
        return js_number(float(i))
    except OverflowError:
        raise ValueError(f"integer {i} is too large for a JSON number (JavaScript would read Infinity)") from None


def _positional(m: re.Match[str]) -> str:
    return js_number(float(m.group(0)))


def _big_int(m: re.Match[str]) -> str:
    return _int_text(int(m.group(0)))


def _fix_numbers(part: str) -> str:
    """Python's number spellings → JavaScript's, in text outside string literals."""
    if "." in part:
        part = _INTEGRAL.sub("", part)
        if "-0" in part:
            part = _MINUS_ZERO.sub("0", part)
    if "e-0" in part:
        if "e-05" in part or "e-06" in part:
            r = part[::-1]
            r = _R_E5.sub(r"\1\g<2>0000.0", r)
            r = _R_E6.sub(r"\1\g<2>00000.0", r)
            part = r[::-1]
        part = _E_PADDED.sub("e-", part)
    if "e+1" in part or "e+20" in part:
        part = _E_POSITIONAL.sub(_positional, part)
    if "NaN" in part:
        part = part.replace("NaN", '"NaN"')
    if "Infinity" in part:
        part = part.replace("Infinity", '"Infinity"').replace('-"Infinity"', '"-Infinity"')
    if _BIG_INT_HINT.search(part) or (part[:1] in "-0123456789" and _DIGITS16.search(part)):
        part = _BIG_INT.sub(_big_int, part)
    return part


def _needs_fix(text: str) -> bool:
    return ".0" in text or "e-0" in text or "e+" in text or "NaN" in text or "Infinity" in text or bool(_DIGITS16.search(text))


def _to_plain(o: Any) -> Any:
    """JSON-able stand-ins for numpy / torch values (the C encoder's ``default`` hook)."""
    tolist = getattr(o, "tolist", None)
    if tolist is not None and (type(o).__module__.startswith(("numpy", "torch"))):
        return tolist()  # numpy scalars → Python numbers, arrays and tensors → nested lists
    if hasattr(o, "keys") and hasattr(o, "__getitem__"):
        return {k: o[k] for k in o.keys()}
    raise TypeError(f"{type(o).__name__} is not JSON")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=True, default=_to_plain)
# The C encoder built once (JSONEncoder.encode builds one per call, which
# costs more than encoding a small agent_ref). No circular-reference markers:
# a cycle ends in RecursionError, and the reference walk then names it.
_c_make = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE = (
    _c_make(None, _to_plain, json.encoder.encode_basestring, None, ":", ",", False, False, True)  # type: ignore[attr-defined]
    if _c_make is not None
    else None
)


def _encode(value: Any) -> str:
    if _C_ENCODE is None:  # an interpreter without the C accelerator
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


def dumps(value: Any, field: str = "value") -> str:
    """``value`` as the JSON text ``JSON.stringify`` would write (see the module doc).

    Args:
        value: dicts, lists/tuples, str, int, float, bool, None, numpy scalars
            and arrays, torch tensors (as nested lists).
        field: Name used in errors.

    Raises:
        InvalidRowError: Something in ``value`` is not JSON (a set, bytes, an
            object, a circular reference, an integer beyond the double range);
            ``field`` is the path to it.
    """
    return dumps_utf8(value, field).decode("utf-8")


def dumps_utf8(value: Any, field: str = "value") -> bytes:
    """:func:`dumps` as UTF-8 bytes (what the Avro string holds)."""
    fast = js_json_fast.dumps_utf8(value)  # orjson where it provably writes the same text (js_json_fast)
    if fast is not None:
        return fast
    text = _fast(value, field)
    if text is not None:
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            pass  # a surrogate: JavaScript's view of it needs the reference walk
    return dumps_exact(value, field).encode("utf-8")


def dumps_parts(value: Any, field: str = "value") -> list[bytes]:
    """:func:`dumps_utf8` as pieces whose concatenation is the text (long number lists stay their own).

    For the Avro encoder, which joins them into the record: the bulk of a
    ``GymResult`` is then copied once.
    """
    parts = js_json_fast.dumps_parts(value)
    return parts if parts is not None else [dumps_utf8(value, field)]


def _fast(value: Any, field: str) -> str | None:
    """C encoder plus number repairs; None when only the reference walk can say it."""
    try:
        text = _encode(value)
    except (TypeError, ValueError, RecursionError):
        return None  # the walk names the offending path
    if ('"' in text) and (_ODD_KEY[0].search(text) or _ODD_KEY[1].search(text)):
        return None
    if not _needs_fix(text):
        return text
    # Even parts lie outside string literals. Without an escaped quote in the
    # text, every '"' delimits a literal and str.split finds them fastest.
    if '\\"' in text:
        parts, sep = _STRING_LITERAL.split(text), ""
    else:
        parts, sep = text.split('"'), '"'
    try:
        for i in range(0, len(parts), 2):
            if len(parts[i]) > 2:  # no shorter text outside a string needs a repair ("1.0" is 3)
                parts[i] = _fix_numbers(parts[i])
    except ValueError:
        return None
    return sep.join(parts)


def js_key(k: Any, field: str) -> str:
    """A dict key as JavaScript would hold it (always a string)."""
    if isinstance(k, str):
        return k
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, int):
        return str(k)
    if isinstance(k, float):  # as Python's json spells float keys (the C encoder does the same)
        return float.__repr__(k) if math.isfinite(k) else ("NaN" if k != k else ("Infinity" if k > 0 else "-Infinity"))
    raise InvalidRowError(field, f"has a key of type {type(k).__name__}; JSON keys must be strings")


def js_ordered_items(items: Any, field: str) -> list[tuple[str, Any]]:
    """``(key, value)`` pairs in a JavaScript object's property order (see the module doc).

    Also the order avsc writes an Avro map from a JavaScript object, so the
    encoder uses it for ``timing`` and ``media``.
    """
    slots: dict[str, Any] = {}
    for k, v in items:
        slots[js_key(k, field)] = v
    keys = list(slots)
    index = [k for k in keys if _INDEX_KEY.fullmatch(k) and int(k) <= _MAX_INDEX]
    if not index:
        return list(slots.items())
    index.sort(key=int)
    taken = set(index)
    return [(k, slots[k]) for k in index] + [(k, slots[k]) for k in keys if k not in taken]


def js_string(s: str) -> str:
    """A string literal as ``JSON.stringify`` writes it (raw UTF-8, lone surrogates escaped)."""
    if _SURROGATE.search(s):
        # JavaScript sees UTF-16 code units: a high+low pair is one character.
        s = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", _escape_string(s))
    return _escape_string(s)


def _fast_clean(v: Any, path: str) -> str | None:
    """The fast path's text for ``v`` when it holds no surrogate (else None: walk it)."""
    text = _fast(v, path)
    return text if text is not None and not _SURROGATE.search(text) else None


def dumps_exact(value: Any, field: str = "value") -> str:
    """The reference serializer behind :func:`dumps`: one recursive walk, every rule explicit.

    Raises:
        InvalidRowError: As :func:`dumps`.
    """
    out: list[str] = []
    active: set[int] = set()

    def walk(v: Any, path: str, depth: int) -> None:
        if depth > 500:
            raise InvalidRowError(path, "is nested more than 500 levels deep (a circular reference?)")
        if isinstance(v, str):
            out.append(js_string(v))
        elif v is None:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif isinstance(v, int):
            try:
                out.append(_int_text(int(v)))
            except ValueError as e:
                raise InvalidRowError(path, f"is not a JSON number: {e}") from None
        elif isinstance(v, float):
            out.append(_float_text(float(v)))
        elif isinstance(v, dict):
            if id(v) in active:
                raise InvalidRowError(path, "contains itself (circular reference)")
            active.add(id(v))
            out.append("{")
            for i, (k, item) in enumerate(js_ordered_items(v.items(), path)):
                if i:
                    out.append(",")
                out.append(js_string(k))
                out.append(":")
                walk(item, f"{path}.{k}", depth + 1)
            out.append("}")
            active.discard(id(v))
        elif isinstance(v, (list, tuple)) and len(v) > 32 and depth and (text := _fast_clean(v, path)) is not None:
            out.append(text)  # a long list (token ids, logprobs): the C encoder's speed
        elif isinstance(v, (list, tuple)):
            if id(v) in active:
                raise InvalidRowError(path, "contains itself (circular reference)")
            active.add(id(v))
            out.append("[")
            for i, item in enumerate(v):
                if i:
                    out.append(",")
                walk(item, f"{path}[{i}]", depth + 1)
            out.append("]")
            active.discard(id(v))
        else:
            try:
                plain = _to_plain(v)
            except TypeError:
                raise InvalidRowError(path, f"is a {type(v).__name__}, which is not JSON") from None
            walk(plain, path, depth + 1)

    walk(value, field, 0)
    return "".join(out)

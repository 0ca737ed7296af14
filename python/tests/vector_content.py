"""Comparing row-completed values by what they say, not how their JSON was spelled (replay identity, SPEC §3 rule 3).

Two publishers may spell the same JSON differently (``1`` / ``1.0``, key
order, escapes) and a GymResult may carry its numbers as version 2's
columns or as version 1's JSON text: :func:`content` decodes either into
the JSON form, and :func:`same` compares two such values as the pipeline's
content digest does: numbers by value (as doubles, as JavaScript reads
them), NaN equal to NaN, keys in any order, null and absent alike.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from rollout_stream import row_completed_schema, row_json
from rollout_stream.errors import DecodeError


def version1_schema() -> dict[str, Any]:
    """The row-completed schema before GymResult's ``columns`` (what version-1 values were written with)."""
    schema = copy.deepcopy(row_completed_schema.load())
    for branch in schema["fields"][0]["type"]:
        if isinstance(branch, dict) and branch.get("name") == "GymResult":
            branch["fields"] = [f for f in branch["fields"] if f["name"] != "columns"]
    return schema


def decode_any(value: bytes) -> tuple[str, int, dict[str, Any]]:
    """:func:`row_json.decode` with the current schema, else with version 1's (checked-in older vectors)."""
    try:
        return row_json.decode(value)
    except DecodeError:
        return row_json.decode(value, version1_schema())


def content(value: bytes) -> dict[str, Any]:
    """The JSON form of a framed row-completed value of either version."""
    kind, _, record = decode_any(value)
    return row_json.to_json(kind, record)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def differences(a: Any, b: Any, path: str = "$") -> list[str]:
    """Where ``a`` and ``b`` say different things (empty: the same content)."""
    if _number(a) and _number(b):
        x, y = float(a), float(b)
        return [] if x == y or (math.isnan(x) and math.isnan(y)) else [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        keys = {k for k, v in a.items() if v is not None} | {k for k, v in b.items() if v is not None}
        return [d for k in sorted(keys) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if type(a) is type(b) and a == b else [f"{path}: {a!r} != {b!r}"]


def assert_same(a: Any, b: Any) -> None:
    diffs = differences(a, b)
    assert not diffs, "different content:\n" + "\n".join(diffs[:20])

"""The staleness bound of :func:`rollout_stream.feed` (SPEC §6.2).

A group's weight version is the oldest of its rows' (the header carries the
same value); its lag is ``current − version``. A group whose lag exceeds
``max_weight_lag`` is *stale*: it is not handed to ``put_samples`` but
counted per lag, reported to ``on_stale`` and its offset advances like a
delivered group's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

WEIGHT_LAG_TAG = "weight_lag"


@dataclass(frozen=True)
class StaleGroup:
    """What ``on_stale`` gets for a skipped group.

    Attributes:
        topic, partition, offset: Where the record is.
        weight_version: The group's (oldest row's) weight version.
        lag: ``current_weight_version − weight_version`` when it was judged.
        batch_id: From the header or the decoded group (``None`` if neither).
        group_id: The decoded group's id, else the record key.
        decoded: ``False`` when the headers sufficed (the value was never decoded).
    """

    topic: str
    partition: int
    offset: int
    weight_version: int
    lag: int
    batch_id: str | None
    group_id: str | None
    decoded: bool


class Staleness:
    """``current_weight_version`` (int or zero-argument callable) and ``max_weight_lag`` k ≥ 0.

    Raises:
        ValueError: ``max_weight_lag`` without ``current_weight_version`` (or the reverse),
            or a negative ``max_weight_lag``.
    """

    def __init__(self, current_weight_version: int | Callable[[], int] | None, max_weight_lag: int | None) -> None:
        if max_weight_lag is not None and current_weight_version is None:
            raise ValueError("max_weight_lag needs current_weight_version (an int or a callable returning one)")
        if max_weight_lag is not None and (isinstance(max_weight_lag, bool) or max_weight_lag < 0):
            raise ValueError(f"max_weight_lag must be an int >= 0, not {max_weight_lag!r}")
        self._current = current_weight_version
        self.max_lag = max_weight_lag

    @property
    def active(self) -> bool:
        """Whether lags are computed at all (a current version was given)."""
        return self._current is not None

    def current(self) -> int:
        cur = self._current() if callable(self._current) else self._current
        if isinstance(cur, bool) or not isinstance(cur, int):
            raise TypeError(f"current_weight_version must be an int (or return one), got {cur!r}")
        return cur

    def stale(self, lag: int) -> bool:
        return self.max_lag is not None and lag > self.max_lag


def group_weight_version(tags: Sequence[Mapping[str, Any]]) -> int | None:
    """The oldest ``weight_version`` among a decoded group's row tags (``None`` for no rows)."""
    versions = [int(t["weight_version"]) for t in tags if t.get("weight_version") is not None]
    return min(versions) if versions else None


def tag_weight_lag(tags: list[dict[str, Any]], current: int) -> None:
    """Adds ``weight_lag = current − weight_version`` to every row's tag, in place."""
    for t in tags:
        wv = t.get("weight_version")
        if wv is not None:
            t[WEIGHT_LAG_TAG] = current - int(wv)

"""Stream identity for a batch of NeMo-Gym task rows, and a per-batch publishing helper (SPEC §2.2).

NeMo-RL sends a batch to NeMo-Gym as a list of task rows where each prompt
appears ``N`` times in a row (one per generation) and stamps each row's
position as ``_rowidx``; results come back in completion order, each with
its task row. :func:`stamp_batch` gives the i-th row the identity
``group_index = i // N``, ``row_index = i``, so a result is matched to its
identity by its row's ``_rowidx`` whatever order it completes in.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable

from .errors import InvalidRowError

if TYPE_CHECKING:  # pragma: no cover
    from .publisher import RolloutPublisher

ROWIDX = "_rowidx"
TASK_INDEX = "_ng_task_index"


@dataclass(frozen=True)
class RowIdentity:
    """The SPEC §2 identity of one row: pass ``**identity.kwargs()`` to ``publish_result``."""

    batch_id: str
    group_id: str
    group_index: int
    row_index: int
    num_generations: int
    prompt_idx: int
    weight_version: int
    task_index: int | None = None
    instance_label: str | None = None

    def kwargs(self) -> dict[str, Any]:
        return asdict(self)


def default_group_id(batch_id: str, group_index: int) -> str:
    """``<batch_id>/g<group_index>``: unique as long as batch ids are."""
    return f"{batch_id}/g{group_index}"


def _int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def stamp_batch(
    task_rows: Sequence[Mapping[str, Any]],
    num_generations: int,
    batch_id: str,
    *,
    weight_version: int,
    prompt_idx: Sequence[int] | Callable[[int, Mapping[str, Any]], int] | None = None,
    group_ids: Sequence[str] | Callable[[int], str] | None = None,
    instance_label: str | None = None,
    stamp_rowidx: bool = True,
) -> list[RowIdentity]:
    """The identity of every task row of a batch of groups of ``num_generations`` consecutive rows.

    Args:
        task_rows: The batch's task rows in batch order (row ``i`` belongs to group ``i // N``).
        num_generations: N, rows per group (>= 1); ``len(task_rows)`` must be a multiple.
        batch_id: The rollout batch / training step.
        weight_version: Policy weight version generating the batch.
        prompt_idx: Per group: a list (one per group) or ``f(group_index, first_row)``;
            default the group's first row's ``prompt_idx`` key, else its ``_ng_task_index``.
        group_ids: Per group: a list or ``f(group_index)``; default :func:`default_group_id`.
        instance_label: Which actor produces the batch.
        stamp_rowidx: Set ``_rowidx = i`` on rows that lack it (as NeMo-RL does), so
            results can be matched by their row.

    Returns:
        One :class:`RowIdentity` per row, index ``i`` for row ``i``. ``task_index``
        is the row's ``_ng_task_index`` when it has one.

    Raises:
        InvalidRowError: N < 1, a row count that is not a multiple of N, a row
            whose ``_rowidx`` is not its position, or no way to find a ``prompt_idx``.
    """
    n = num_generations
    if not _int(n) or n < 1:
        raise InvalidRowError("num_generations", f"must be an integer >= 1, got {n!r}")
    if len(task_rows) % n:
        raise InvalidRowError("task_rows", f"has {len(task_rows)} rows, not a multiple of num_generations {n}")
    out: list[RowIdentity] = []
    for i, r in enumerate(task_rows):
        if not isinstance(r, Mapping):
            raise InvalidRowError(f"task_rows[{i}]", f"must be a dict, got a {type(r).__name__}")
        have = r.get(ROWIDX)
        if have is None and stamp_rowidx and isinstance(r, MutableMapping):
            r[ROWIDX] = i
        elif have is not None and have != i:
            raise InvalidRowError(f"task_rows[{i}].{ROWIDX}", f"is {have!r}, but the row is at position {i}")
        g = i // n
        task_index = r.get(TASK_INDEX)
        out.append(
            RowIdentity(
                batch_id=batch_id,
                group_id=_group_id(group_ids, batch_id, g),
                group_index=g,
                row_index=i,
                num_generations=n,
                prompt_idx=out[-1].prompt_idx if i % n else _prompt_idx(prompt_idx, g, r),
                weight_version=weight_version,
                task_index=int(task_index) if _int(task_index) else task_index,
                instance_label=instance_label,
            )
        )
    return out


def _group_id(group_ids: Any, batch_id: str, g: int) -> str:
    if group_ids is None:
        return default_group_id(batch_id, g)
    return group_ids(g) if callable(group_ids) else group_ids[g]


def _prompt_idx(prompt_idx: Any, g: int, first_row: Mapping[str, Any]) -> int:
    if callable(prompt_idx):
        return prompt_idx(g, first_row)
    if prompt_idx is not None:
        return prompt_idx[g]
    for key in ("prompt_idx", TASK_INDEX):
        if first_row.get(key) is not None:
            return first_row[key]
    raise InvalidRowError(
        "prompt_idx",
        f"is unknown for group {g}: its first task row has neither prompt_idx nor {TASK_INDEX}; pass prompt_idx=",
    )


class BatchPublisher:
    """Publishes one batch's results as they complete, then closes the batch.

    Made by :meth:`RolloutPublisher.batch`; identity comes from
    :func:`stamp_batch`, and a result finds its own by its row's ``_rowidx``.
    Used as a context manager it calls :meth:`end` when the block finishes
    normally (not when it raises: a batch cut short is left open, so
    re-running it, which re-sends identical records, can still complete it).
    """

    def __init__(
        self,
        publisher: "RolloutPublisher",
        task_rows: Sequence[Mapping[str, Any]],
        num_generations: int,
        batch_id: str,
        **stamp: Any,
    ) -> None:
        self.publisher = publisher
        self.task_rows = task_rows
        self.batch_id = batch_id
        self.identities = stamp_batch(task_rows, num_generations, batch_id, **stamp)
        self.published: set[int] = set()

    def _index(self, row: Mapping[str, Any], row_index: int | None, field: str) -> int:
        i = row_index if row_index is not None else (row.get(ROWIDX) if isinstance(row, Mapping) else None)
        if not _int(i) or not 0 <= i < len(self.identities):
            raise InvalidRowError(
                field, f"is {i!r}: expected a row index in [0, {len(self.identities)}) of batch {self.batch_id}"
            )
        return int(i)

    def publish_result(
        self,
        gym_row: Mapping[str, Any],
        gym_result: Mapping[str, Any],
        *,
        row_index: int | None = None,
        timing: Mapping[str, float] | None = None,
        produced_at: Any = None,
    ) -> int:
        """Publishes a NeMo-Gym result with its row's identity (by ``row_index`` or ``gym_row["_rowidx"]``)."""
        i = self._index(gym_row, row_index, f"gym_row.{ROWIDX}")
        partition = self.publisher.publish_result(
            gym_row, gym_result, **self.identities[i].kwargs(), timing=timing, produced_at=produced_at
        )
        self.published.add(i)
        return partition

    def publish_row(self, result: Mapping[str, Any], row_index: int | None = None) -> int:
        """Publishes a NeMo-RL result dict (``message_log``, ``input_message_log``, ``full_result``)
        as a row, with the identity of task row ``row_index`` (default ``result["_rowidx"]``);
        ``agent_ref`` and ``request`` default to that task row's ``agent_ref`` and
        ``responses_create_params``."""
        i = self._index(result, row_index, ROWIDX)
        task = self.task_rows[i]
        row = {"agent_ref": task.get("agent_ref"), "request": task.get("responses_create_params")}
        row.update({k: v for k, v in result.items() if v is not None})
        row.update({k: v for k, v in self.identities[i].kwargs().items() if v is not None})
        partition = self.publisher.publish_row(row)
        self.published.add(i)
        return partition

    @property
    def missing(self) -> list[int]:
        """Row indices not published (yet) through this helper."""
        return [i for i in range(len(self.identities)) if i not in self.published]

    def end(self, timeout: float | None = None) -> list[int]:
        """``end_batch(batch_id, len(task_rows))``; returns the row indices never published."""
        self.publisher.end_batch(self.batch_id, len(self.identities), timeout)
        return self.missing

    def __enter__(self) -> "BatchPublisher":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.end()

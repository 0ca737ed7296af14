"""One step of NeMo-Gym rollouts, each result published the moment it completes (SPEC §2.3).

:func:`prepare_rows` repeats every task row N times as NeMo-RL prepares a
batch for NeMo-Gym (``_ng_task_index``, ``_ng_rollout_index``, ``agent_ref``,
``_rowidx`` = the row's place in the batch). :func:`collect` sends them
through NeMo-Gym's agent servers (:mod:`rollout_stream.gym.rollouts`),
publishes each ``(row, result)`` with :meth:`RolloutPublisher.publish_result`
as it comes back, in completion order, and ends the batch.

Failures follow NeMo-Gym's own collection rules: an error answer, or a
result that the agent marked failed (``_ng_failure_class``), is tried again
up to ``NEMO_GYM_MAX_ROLLOUT_ATTEMPTS`` attempts in all (default 3), except a
failure marked terminal (``_ng_failure_terminal``). A rollout that still
fails is logged with its row and counted, never published: its group then
reaches the dead-letter topic as ``incomplete_group`` naming the missing
row, instead of training on a zero-reward row that never happened.

Run again on the same batch after a crash, :func:`collect` first reads back
which rows the batch already has on ``rollout.row-completed`` and runs only
the others (a real policy samples: a second run of a rollout is another row).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..batch_stamping import ROWIDX, TASK_INDEX, stamp_batch
from ..errors import InvalidRowError
from .published import published_row_indices
from .rollouts import Backend, Runner, open_runner

log = logging.getLogger("rollout_stream.gym")

ROLLOUT_INDEX = "_ng_rollout_index"
FAILURE_CLASS = "_ng_failure_class"
FAILURE_TERMINAL = "_ng_failure_terminal"
NO_PERSIST = "_ng_no_persist"
DEFAULT_MAX_ATTEMPTS = 3


def max_attempts_from_env() -> int:
    """NeMo-Gym's ``NEMO_GYM_MAX_ROLLOUT_ATTEMPTS`` (a positive int; default 3)."""
    raw = os.environ.get("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "")
    if not raw:
        return DEFAULT_MAX_ATTEMPTS
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise InvalidRowError("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", f"must be a positive integer, got {raw!r}")
    return n


def prepare_rows(
    tasks: Sequence[Mapping[str, Any]], num_generations: int, agent: str | None = None, add_seed: bool = False
) -> list[dict]:
    """The batch NeMo-Gym runs: each task row ``num_generations`` times in a row (``aabb``), stamped.

    Each copy gets ``_ng_task_index`` (the task's own, else its place in
    ``tasks``), ``_ng_rollout_index`` (0..N-1), ``agent_ref`` (the task's, else
    ``{"name": agent}``) and ``_rowidx`` (its place in the batch). With
    ``add_seed`` each copy's request also carries ``seed`` = its rollout index
    in ``metadata.extra_body``, as NeMo-Gym's ``num_repeats_add_seed`` does
    (vLLM honours it).

    Raises:
        InvalidRowError: N < 1, a task that is not an object or has neither
            ``responses_create_params`` nor an agent to run it.
    """
    if not isinstance(num_generations, int) or num_generations < 1:
        raise InvalidRowError("num_generations", f"must be an integer >= 1, got {num_generations!r}")
    rows: list[dict] = []
    for t, task in enumerate(tasks):
        if not isinstance(task, Mapping):
            raise InvalidRowError(f"tasks[{t}]", f"must be a JSON object, got {type(task).__name__}")
        if not isinstance(task.get("responses_create_params"), Mapping):
            raise InvalidRowError(f"tasks[{t}].responses_create_params", "is missing (NeMo-Gym needs the request to send)")
        ref = task.get("agent_ref") or ({"name": agent} if agent else None)
        if not isinstance(ref, Mapping) or not ref.get("name"):
            raise InvalidRowError(f"tasks[{t}].agent_ref", "is missing: give the task an agent_ref or pass agent=")
        for k in range(num_generations):
            row = copy.deepcopy(dict(task))
            row.pop(ROWIDX, None)
            row[TASK_INDEX] = task.get(TASK_INDEX, t)
            row[ROLLOUT_INDEX] = k
            row["agent_ref"] = dict(ref)
            row[ROWIDX] = len(rows)
            if add_seed:
                meta = row["responses_create_params"].setdefault("metadata", {})
                extra = json.loads(meta.get("extra_body") or "{}")
                extra["seed"] = k
                meta["extra_body"] = json.dumps(extra)
            rows.append(row)
    return rows


@dataclass
class Failure:
    """A rollout that failed every attempt (not published)."""

    row_index: int
    group_id: str
    task_index: Any
    agent: str
    attempts: int
    error: str


@dataclass
class CollectSummary:
    """What one :func:`collect` call did."""

    batch_id: str
    rows: int = 0
    published: int = 0
    already_published: int = 0
    failed: int = 0
    retried: int = 0
    bytes: int = 0
    seconds: float = 0.0
    backend: str = ""
    waited_s: float = 0.0
    waiting: str = ""  # what the collector waits for now (backpressure), for the progress line
    failures: list[Failure] = field(default_factory=list)
    empty_groups: list[str] = field(default_factory=list)

    @property
    def rows_per_s(self) -> float:
        return self.published / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        return (
            f"collect {self.batch_id}: {self.published} published, {self.already_published} already on the topic, "
            f"{self.failed} failed ({self.retried} retries), {self.rows} rows, {self.rows_per_s:.1f} rows/s, "
            f"{self.bytes} bytes, {self.seconds:.1f} s via {self.backend}"
            + (f", waited {self.waited_s:.1f} s for the trainer" if self.waited_s >= 0.05 else "")
        )

    def to_json(self) -> dict:
        d = asdict(self)
        d["rows_per_s"] = round(self.rows_per_s, 3)
        return d


def _failed_result(result: Mapping[str, Any]) -> str | None:
    """Why NeMo-Gym counts this result as a failure (None: a success)."""
    if result.get(NO_PERSIST):
        return f"kill-shaped failure ({result.get(FAILURE_CLASS) or NO_PERSIST})"
    if result.get(FAILURE_CLASS) is not None:
        return f"agent reported failure class {result[FAILURE_CLASS]!r}"
    return None


async def _collect(
    rows: list[dict],
    todo: list[int],
    batch: Any,
    runner: Runner,
    summary: CollectSummary,
    *,
    concurrency: int,
    max_attempts: int,
    wait_for_room: Callable[[], Any] | None,
    progress: Callable[[CollectSummary, int], Any] | None,
) -> None:
    sem = asyncio.Semaphore(max(1, concurrency))
    running = 0
    held, held_since = 0, 0.0

    async def room() -> None:
        # Inside the semaphore, right before the rollout starts; waited_s is wall time with a rollout held.
        nonlocal held, held_since
        held += 1
        if held == 1:
            held_since = time.monotonic()
        try:
            await wait_for_room()
        finally:
            held -= 1
            if held == 0:
                summary.waited_s += time.monotonic() - held_since

    async def ticker() -> None:
        # No rollout finishes while all are held: the progress line comes from here then (with the wait's status).
        while True:
            await asyncio.sleep(1.0)
            if held and progress:
                summary.waiting = getattr(wait_for_room, "status", "") or "waiting for room"
                progress(summary, running)
            summary.waiting = ""

    async def one(i: int) -> None:
        nonlocal running
        row = rows[i]
        attempt, error = 0, ""
        while attempt < max_attempts:
            attempt += 1
            async with sem:
                if wait_for_room is not None:
                    await room()
                running += 1
                try:
                    result = await runner.run(row)
                    why = _failed_result(result)
                except Exception as e:  # noqa: BLE001 - every error of a rollout is its failure
                    result, why = None, f"{type(e).__name__}: {e}"
                finally:
                    running -= 1
            if why is None:
                # Published at once, in completion order (the publisher is not thread-bound; this loop is one thread).
                batch.publish_result(row, result, row_index=i)
                summary.published += 1
                if progress:
                    progress(summary, running)
                return
            error = why
            if result is not None and result.get(FAILURE_TERMINAL):
                break
            if attempt < max_attempts:
                summary.retried += 1
        ident = batch.identities[i]
        f = Failure(i, ident.group_id, row.get(TASK_INDEX), row["agent_ref"]["name"], attempt, error)
        summary.failures.append(f)
        summary.failed += 1
        log.error(
            "rollout %d of batch %s (group %s, task %s, agent %s) failed %d attempt(s), not published: %s",
            i, summary.batch_id, f.group_id, f.task_index, f.agent, attempt, error,
        )
        if progress:
            progress(summary, running)

    tick = asyncio.create_task(ticker()) if wait_for_room is not None else None
    try:
        await asyncio.gather(*(one(i) for i in todo))
    finally:
        if tick is not None:
            tick.cancel()
    # A group none of whose rows was published leaves accumulate nothing to report: say so here.
    failed_groups: dict[str, int] = {}
    for f in summary.failures:
        failed_groups[f.group_id] = failed_groups.get(f.group_id, 0) + 1
    for gid, n in failed_groups.items():
        if n == batch.identities[0].num_generations and not any(
            batch.identities[i].group_id == gid for i in batch.published
        ):
            summary.empty_groups.append(gid)
            log.error("group %s of batch %s: every rollout failed; no row of it reaches the pipeline or its dead letters", gid, summary.batch_id)


async def collect_async(
    tasks: Sequence[Mapping[str, Any]],
    num_generations: int,
    batch_id: str,
    *,
    publisher: Any,
    head_server: str = "http://127.0.0.1:11000",
    weight_version: int = 0,
    agent: str | None = None,
    concurrency: int = 16,
    backend: Backend = "auto",
    max_attempts: int | None = None,
    resume: bool = True,
    resume_since_ms: int | None = None,
    wait_for_room: Callable[[], Any] | None = None,
    progress: Callable[[CollectSummary, int], Any] | None = None,
    instance_label: str | None = None,
    add_seed: bool = False,
    max_buffered_groups: int | None = None,
    trainer_group: str | None = None,
) -> CollectSummary:
    """Runs one batch of NeMo-Gym rollouts and publishes every result as it completes, then ends the batch.

    The coroutine for a rollout worker's own event loop; :func:`collect` runs it with ``asyncio.run``.

    Args:
        tasks: NeMo-Gym task rows (``responses_create_params``, ``agent_ref``, verifier fields).
        num_generations: N rollouts per task (one group of N rows per task).
        batch_id: The batch (training step); groups are ``<batch_id>/g<task>``.
        publisher: A :class:`~rollout_stream.RolloutPublisher`.
        head_server: NeMo-Gym's head server URL.
        weight_version: The policy weights generating this batch.
        agent: Agent server name for tasks without ``agent_ref``.
        concurrency: Rollouts in flight at once.
        backend: ``nemo_gym`` (NeMo-Gym's own client), ``http``, or ``auto`` (NeMo-Gym's when importable).
        max_attempts: Attempts per rollout (default ``$NEMO_GYM_MAX_ROLLOUT_ATTEMPTS`` or 3).
        resume: Read back the batch's rows already on the topic and run only the others.
        resume_since_ms: Read back from this time (epoch ms) instead of the partitions' beginning.
        wait_for_room: Async callable awaited right before each rollout (attempt) starts, inside the
            ``concurrency`` limit (backpressure); while it holds rollouts, its ``status`` attribute (if
            any) shows in the progress line, and the wall time they were held is ``waited_s``.
        progress: Called as ``progress(summary, running)`` after every finished rollout.
        add_seed: Give each rollout's request its rollout index as ``seed`` (see :func:`prepare_rows`).
        max_buffered_groups: Backpressure (:mod:`rollout_stream.gym.backpressure`): start no rollout while
            this many groups wait for ``trainer_group`` (unconsumed on ``rollout.packed``, or this run's
            complete groups still in the pipeline). Not with ``wait_for_room``.
        trainer_group: The trainer's consumer group on ``rollout.packed`` (with ``max_buffered_groups``).

    Returns:
        A :class:`CollectSummary` (also with the failed rollouts).

    Raises:
        InvalidRowError: A malformed task row; nothing was sent.
        GymUnavailableError: The head server did not answer.
        RolloutStreamError: The broker refused a record, or the batch end was not acknowledged.
    """
    start = time.monotonic()
    rows = prepare_rows(tasks, num_generations, agent, add_seed)
    attempts = max_attempts if max_attempts is not None else max_attempts_from_env()
    batch = publisher.batch(rows, num_generations, batch_id, weight_version=weight_version, instance_label=instance_label)
    summary = CollectSummary(batch_id=batch_id, rows=len(rows))
    done: set[int] = set()
    if resume:
        groups = {ident.group_id for ident in batch.identities}
        done = await asyncio.get_running_loop().run_in_executor(
            None,
            lambda: published_row_indices(
                publisher.brokers, publisher.topic, batch_id, groups, since_ms=resume_since_ms,
                config=publisher.client_config,
            ),
        )
        done &= set(range(len(rows)))
        batch.published |= done
        summary.already_published = len(done)
    todo = [i for i in range(len(rows)) if i not in done]
    bytes_before = publisher.stats.bytes
    bp = None
    if max_buffered_groups is not None or trainer_group is not None:
        from .backpressure import Backpressure

        if wait_for_room is not None:
            raise InvalidRowError("max_buffered_groups", "and wait_for_room are two ways to wait: give one")
        # Its start-up reads rollout.packed up to now (up to 5 s): not on the worker's event loop.
        bp = wait_for_room = await asyncio.get_running_loop().run_in_executor(
            None, lambda: Backpressure.for_publisher(publisher, max_buffered_groups, trainer_group)
        )
        bp.track(batch)

    try:
        if todo:
            runner = open_runner(head_server, backend, concurrency=concurrency)
            summary.backend = runner.backend
            try:
                await _collect(
                    rows, todo, batch, runner, summary,
                    concurrency=concurrency, max_attempts=attempts, wait_for_room=wait_for_room, progress=progress,
                )
            finally:
                await runner.close()
        else:
            summary.backend = "none (every row already published)"
    finally:
        if bp is not None:
            bp.close()
    await asyncio.get_running_loop().run_in_executor(None, batch.end)  # waits for every acknowledgement
    summary.bytes = publisher.stats.bytes - bytes_before
    summary.seconds = time.monotonic() - start
    return summary


def collect(tasks: Sequence[Mapping[str, Any]], num_generations: int, batch_id: str, **kwargs: Any) -> CollectSummary:
    """:func:`collect_async` run to its end in a new event loop (for callers without one of their own)."""
    return asyncio.run(collect_async(tasks, num_generations, batch_id, **kwargs))


def read_tasks(lines: Iterable[str], source: str = "tasks") -> list[dict]:
    """Task rows from JSON lines (blank lines skipped).

    Raises:
        InvalidRowError: A line that is not a JSON object (names the line).
    """
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise InvalidRowError(f"{source}:{n}", f"is not JSON: {e}") from e
        if not isinstance(obj, dict):
            raise InvalidRowError(f"{source}:{n}", f"must be a JSON object, got {type(obj).__name__}")
        out.append(obj)
    return out


class ProgressLine:
    """At most one progress line every ``interval`` seconds on ``stream``."""

    def __init__(self, stream: Any = sys.stderr, interval: float = 2.0) -> None:
        self.stream, self.interval, self._last = stream, interval, 0.0
        self._t0 = time.monotonic()

    def __call__(self, s: CollectSummary, running: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        rate = s.published / max(now - self._t0, 1e-9)
        todo = s.rows - s.already_published
        print(
            f"collect {s.batch_id}: {s.published + s.failed}/{todo} done ({s.published} published, {s.failed} failed), "
            f"{running} running, {rate:.1f} rows/s" + (f", waited {s.waited_s:.1f} s for the trainer" if s.waited_s >= 0.05 else "")
            + (f", {s.waiting}" if s.waiting else ""),
            file=self.stream,
            flush=True,
        )

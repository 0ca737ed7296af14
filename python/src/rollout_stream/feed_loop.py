"""The trainer's loop: packed groups from a :class:`PackedConsumer` into ``put_samples``.

Per record: judge staleness from the ``weight_version`` header when there is
one (no decode), else decode and judge from the rows' tags; hand fresh groups
to ``put_samples`` (merged up to ``max_groups_per_call``); then mark them
done — the consumer's :meth:`~PackedConsumer.position` moves past them and,
with ``commit="after_put"``, their offsets are committed. Stale and
dead-lettered records are done too, but only after every group before them
on the way to ``put_samples`` is, so a position never claims a group that
was not handed over.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from .devices import fields_to, placement
from .merge import merge_groups
from .staleness import StaleGroup, Staleness, group_weight_version, tag_weight_lag


@dataclass
class FeedStats:
    """What :func:`feed` did.

    Attributes:
        groups, rows, calls: Groups and rows handed to ``put_samples``, and its calls.
        committed: ``{(topic, partition): next offset}`` this call committed
            (``after_put``; empty with ``on_checkpoint``).
        done: ``{(topic, partition): next offset}`` after everything this call
            finished (delivered, stale or dead-lettered), committed or not.
        lags: Delivered groups per weight lag (only with ``current_weight_version``).
        stale: Skipped stale groups per weight lag.
        stale_by_header: How many of those were skipped from the header, undecoded.
        dead_lettered: Undecodable records written to the dead-letter topic.
    """

    groups: int = 0
    rows: int = 0
    calls: int = 0
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    done: dict[tuple[str, int], int] = field(default_factory=dict)
    lags: Counter = field(default_factory=Counter)
    stale: Counter = field(default_factory=Counter)
    stale_by_header: int = 0
    dead_lettered: int = 0


PutSamples = Callable[[list[str], dict[str, Any], list[dict[str, Any]]], Any]


def feed(
    consumer: Any,
    put_samples: PutSamples,
    *,
    max_groups_per_call: int = 1,
    stop_after: int | None = None,
    poll_timeout: float = 1.0,
    idle_timeout: float | None = None,
    device: Any = None,
    current_weight_version: int | Callable[[], int] | None = None,
    max_weight_lag: int | None = None,
    on_stale: Callable[[StaleGroup], Any] | None = None,
) -> FeedStats:
    """Hands decoded groups to ``put_samples``; marks each done after it returned.

    ``put_samples(sample_ids, fields, tags)`` gets one group, or up to
    ``max_groups_per_call`` groups merged row-wise when their fields line up
    (same names, dtypes, inner/trailing shapes); groups that do not line up go
    in separate calls. With the consumer's ``commit="after_put"`` offsets are
    committed synchronously right after a call returned, never before; with
    ``"on_checkpoint"`` nothing is committed here (see :meth:`PackedConsumer.commit`).

    Args:
        consumer: The :class:`PackedConsumer` to read from.
        put_samples: The transfer-queue write.
        max_groups_per_call: Most groups merged into one call (≥ 1).
        stop_after: Return after this many groups were handed over (None: never).
        poll_timeout: Seconds one poll waits; a partial batch is flushed when
            a poll comes back empty.
        idle_timeout: Return when no record arrived for this many seconds.
        device: ``None``/``"cpu"`` (default): fields go to ``put_samples`` as
            decoded. A CUDA device: each call's fields (after merging) are
            moved there first, host tensors through pinned memory with
            ``non_blocking`` copies; fields already there (a consumer built
            with ``device=``) stay as they are.
        current_weight_version: The trainer's weight version (an int, or a
            callable asked once per record). Every delivered row then gets a
            ``weight_lag`` tag (current − its ``weight_version``) and
            :attr:`FeedStats.lags` counts delivered groups per lag.
        max_weight_lag: k ≥ 0: a group whose (oldest row's) weight version is
            below ``current − k`` is stale: not handed over, counted in
            :attr:`FeedStats.stale` per lag, passed to ``on_stale`` and done
            like a delivered group. Needs ``current_weight_version``.
        on_stale: ``on_stale(StaleGroup)`` for every stale group.

    Returns:
        :class:`FeedStats`.

    Raises:
        Exception: Whatever ``put_samples`` or ``on_stale`` raised; the groups
            of that call stay not done (uncommitted) and the consumer is rewound
            to them, so they are delivered again (to this consumer if used
            again, or to the next owner of the partition after a restart).
        RolloutStreamError: Decode or Kafka errors (the bad record stays not done).
        DeviceUnavailableError: ``device`` is CUDA but CUDA is not available
            (raised before anything is read).
        ValueError: ``max_groups_per_call`` < 1, ``max_weight_lag`` without
            ``current_weight_version`` or negative.
    """
    if max_groups_per_call < 1:
        raise ValueError("max_groups_per_call must be >= 1")
    staleness = Staleness(current_weight_version, max_weight_lag)
    pl = placement(device)
    stats = FeedStats()
    after_put = getattr(consumer, "commit_mode", "after_put") == "after_put"
    pending: list[Any] = []  # decoded deliveries waiting for put_samples
    skipped: list[Any] = []  # stale / dead-lettered records waiting for the pending ones
    last_seen = time.monotonic()

    def stale_from_headers(rec: Any) -> bool:
        # Asked on a chunk set's first chunk: a stale set is dropped there, never buffered.
        return rec.weight_version is not None and staleness.stale(staleness.current() - rec.weight_version)

    def note_done(items: list[Any]) -> None:
        for it in items:
            if consumer.is_current(it):
                key = (it.topic, it.partition)
                nxt = getattr(it, "next", None)
                stats.done[key] = max(stats.done.get(key, 0), it.offset + 1 if nxt is None else nxt)
                if after_put:
                    stats.committed[key] = stats.done[key]

    def finish_skipped() -> None:
        nonlocal skipped
        if skipped:
            batch, skipped = skipped, []
            consumer.done(batch, commit_now=False)
            note_done(batch)

    def flush() -> None:
        nonlocal pending
        if not pending:
            finish_skipped()
            return
        batch, pending = pending, []
        sample_ids, fields, tags = merge_groups([d.group for d in batch]) if len(batch) > 1 else tuple(batch[0].group)
        try:
            if pl is not None:
                fields = fields_to(fields, pl)
            put_samples(sample_ids, fields, tags)
        except BaseException:
            consumer.rewind(batch + skipped)
            skipped.clear()
            raise
        consumer.done(batch)
        note_done(batch)
        stats.calls += 1
        stats.groups += len(batch)
        stats.rows += len(sample_ids)
        for d in batch:
            if staleness.active:
                stats.lags[d.weight_lag] += 1
        finish_skipped()

    def skip(item: Any, version: int, lag: int, batch_id: str | None, group_id: str | None, decoded: bool) -> None:
        stats.stale[lag] += 1
        if not decoded:
            stats.stale_by_header += 1
        if on_stale is not None:
            on_stale(StaleGroup(item.topic, item.partition, item.offset, version, lag, batch_id, group_id, decoded))
        skipped.append(item)
        if not pending:
            finish_skipped()

    had_skip_set = hasattr(consumer, "skip_set")
    if had_skip_set and staleness.active and max_weight_lag is not None:
        consumer.skip_set = stale_from_headers
    try:
        while stop_after is None or stats.groups + len(pending) < stop_after:
            rec = consumer.poll_record(poll_timeout)
            if pending or skipped:  # a rebalance inside poll: the next owner reads those again
                pending = [d for d in pending if consumer.is_current(d)]
                skipped = [r for r in skipped if consumer.is_current(r)]
            if rec is None:
                flush()
                consumer.flush_commits()
                if idle_timeout is not None and time.monotonic() - last_seen >= idle_timeout:
                    break
                continue
            last_seen = time.monotonic()
            cur = staleness.current() if staleness.active else 0
            if getattr(rec, "stale_skipped", False) and rec.weight_version is not None:
                # Judged stale on its first chunk (weight versions only grow: it still is).
                skip(rec, rec.weight_version, cur - rec.weight_version, rec.batch_id, rec.key, decoded=False)
                continue
            if staleness.active and rec.weight_version is not None and staleness.stale(cur - rec.weight_version):
                skip(rec, rec.weight_version, cur - rec.weight_version, rec.batch_id, rec.key, decoded=False)
                continue
            d = consumer.decode(rec, defer_done=True)
            if d is None:  # undecodable, dead-lettered
                stats.dead_lettered += 1
                skipped.append(rec)
                if not pending:
                    finish_skipped()
                continue
            if staleness.active:
                version = group_weight_version(d.group.tags)
                if version is not None:
                    d.weight_lag = cur - version
                    if staleness.stale(d.weight_lag):
                        skip(d, version, d.weight_lag, d.group.batch_id, d.group.group_id, decoded=True)
                        continue
                tag_weight_lag(d.group.tags, cur)
            if pending and merge_groups([pending[0].group, d.group], check_only=True) is None:
                flush()
            pending.append(d)
            if len(pending) >= max_groups_per_call:
                flush()
        flush()
        consumer.flush_commits()
    except BaseException:
        consumer.rewind(pending + skipped)
        raise
    finally:
        if had_skip_set:
            consumer.skip_set = None
    return stats

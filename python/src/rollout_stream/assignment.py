"""Where a :class:`~rollout_stream.PackedConsumer` stands on each partition it holds (SPEC §6.1).

Pure bookkeeping, no Kafka calls: the consumer feeds it assignments,
revocations and finished records, and asks it for the position and for
what is left to commit.

- Each assignment of a partition gets a new *epoch*; a record fetched under
  an older one (its partition was revoked since, even if assigned back) is
  not current and never moves the position — its next owner reads it again.
- A start offset is, in order: what a callable ``start_offsets`` returns for
  it; the saved position's offset on the partition's first assignment; the
  larger of the group's committed offset and where this consumer last left
  the partition; the reset offset.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from .positions import Position, TopicPartitionKey, from_offsets, to_offsets


class Assignment:
    """Positions, epochs and pending commits of the assigned partitions.

    Args:
        start_offsets: A position, a callable ``(keys) -> position``, or ``None``.

    Raises:
        ValueError: ``start_offsets`` is a malformed position.
    """

    def __init__(self, start_offsets: Mapping[str, Mapping[Any, int]] | Callable[[list[TopicPartitionKey]], Any] | None) -> None:
        self.start_fn = start_offsets if callable(start_offsets) else None
        self.first_use = {} if self.start_fn else to_offsets(start_offsets)  # type: ignore[arg-type]
        self.positions: dict[TopicPartitionKey, int] = {}  # next offset after the done records
        self.epochs: dict[TopicPartitionKey, int] = {}
        self.last_known: dict[TopicPartitionKey, int] = {}  # revoked partitions: where this consumer left them
        self.uncommitted: dict[TopicPartitionKey, int] = {}  # done, not yet committed (after_put)
        self.reset_starts: set[TopicPartitionKey] = set()  # started at a watermark, not at a resume offset
        self._next_epoch = 1

    def wanted(self, keys: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """What a callable ``start_offsets`` says for ``keys`` (empty without one)."""
        return to_offsets(self.start_fn(keys)) if self.start_fn is not None and keys else {}

    def has_explicit_start(self, key: TopicPartitionKey, wanted: Mapping[TopicPartitionKey, int]) -> bool:
        """Whether ``start_offsets`` places ``key`` (then no committed offset or watermark is needed)."""
        return key in wanted or key in self.first_use

    def start_offset(
        self,
        key: TopicPartitionKey,
        wanted: Mapping[TopicPartitionKey, int],
        committed: Mapping[TopicPartitionKey, int],
        reset: Callable[[TopicPartitionKey], int],
    ) -> int:
        self.reset_starts.discard(key)
        if key in wanted:
            return wanted[key]
        if key in self.first_use:
            return self.first_use.pop(key)
        known = [o for o in (committed.get(key), self.last_known.get(key)) if o is not None]
        if known:
            return max(known)
        self.reset_starts.add(key)
        return reset(key)

    def assign(self, key: TopicPartitionKey, offset: int) -> None:
        self.positions[key] = offset
        self.epochs[key] = self._next_epoch
        self._next_epoch += 1
        self.uncommitted.pop(key, None)

    def drop(self, keys: Iterable[TopicPartitionKey], lost: bool = False) -> None:
        for key in keys:
            if key in self.positions:
                self.last_known[key] = self.positions.pop(key)
            self.epochs.pop(key, None)
            if lost:
                self.uncommitted.pop(key, None)

    def held(self, key: TopicPartitionKey) -> bool:
        return key in self.positions

    def epoch(self, key: TopicPartitionKey) -> int | None:
        return self.epochs.get(key)

    def is_current(self, item: Any) -> bool:
        return self.epochs.get((item.topic, item.partition)) == item.epoch

    def advance(self, item: Any, track_commit: bool) -> None:
        """Moves the position past a current ``item`` (records it for the next commit if asked)."""
        if not self.is_current(item):
            return
        key = (item.topic, item.partition)
        nxt = getattr(item, "next", None)
        nxt = item.offset + 1 if nxt is None else nxt  # a chunk set's next is past its last chunk
        if nxt > self.positions[key]:
            self.positions[key] = nxt
            if track_commit:
                self.uncommitted[key] = nxt

    def take_uncommitted(self) -> dict[TopicPartitionKey, int]:
        pending, self.uncommitted = self.uncommitted, {}
        return pending

    def position(self) -> Position:
        return from_offsets(self.positions)

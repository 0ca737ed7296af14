"""Consumer positions as plain JSON, and keeping them inside a trainer checkpoint.

A position is ``{topic: {partition: next_offset}}`` with the partition as a
decimal string (JSON object keys are strings) and the offset an ``int``: the
next record to read, i.e. everything before it has been handed to
``put_samples`` (or skipped as stale, or dead-lettered). It survives
``json.dumps``/``json.loads`` and ``torch.save``/``torch.load`` unchanged.

In a checkpoint dict it sits under :data:`CHECKPOINT_KEY` with a format
number, so a later release can change the layout and still read old files::

    ckpt = {"model": model.state_dict(), ...}
    put_position(ckpt, consumer.position())
    torch.save(ckpt, tmp); os.replace(tmp, path)     # durable first,
    consumer.commit(get_position(ckpt))              # then commit
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, MutableMapping

Position = dict[str, dict[str, int]]
TopicPartitionKey = tuple[str, int]

CHECKPOINT_KEY = "rollout_stream"
FORMAT = 1


def to_offsets(position: Mapping[str, Mapping[Any, Any]] | None) -> dict[TopicPartitionKey, int]:
    """``{(topic, partition): offset}`` from a position (partitions as str or int).

    Raises:
        ValueError: Not a ``{topic: {partition: offset}}`` mapping of
            non-negative integers.
    """
    out: dict[TopicPartitionKey, int] = {}
    if position is None:
        return out
    if not isinstance(position, Mapping):
        raise ValueError(f"a position is {{topic: {{partition: offset}}}}, not {type(position).__name__}")
    for topic, parts in position.items():
        if not isinstance(topic, str) or not isinstance(parts, Mapping):
            raise ValueError(f"position entry {topic!r} must map a topic name to {{partition: offset}}")
        for p, off in parts.items():
            try:
                part = int(p)
            except (TypeError, ValueError):
                raise ValueError(f"position {topic}[{p!r}]: partition must be an integer") from None
            if isinstance(off, bool) or not isinstance(off, int) or off < 0 or part < 0:
                raise ValueError(f"position {topic}[{p}]: offset must be a non-negative int, got {off!r}")
            out[(topic, part)] = off
    return out


def from_offsets(offsets: Mapping[TopicPartitionKey, int]) -> Position:
    """The JSON position of ``{(topic, partition): offset}`` (sorted, so equal positions dump equal)."""
    out: Position = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(off)
    return out


def merge_positions(positions: Iterable[Mapping[str, Mapping[Any, Any]] | None]) -> Position:
    """Per partition, the furthest offset any of ``positions`` reached.

    For several trainer ranks that each checkpoint their own partitions: a
    partition's offsets only move forward from one owner to the next, so the
    largest offset over every rank's latest checkpoint is where its next
    owner resumes (pass this as a callable ``start_offsets``).
    """
    best: dict[TopicPartitionKey, int] = {}
    for pos in positions:
        for key, off in to_offsets(pos).items():
            best[key] = max(best.get(key, off), off)
    return from_offsets(best)


def put_position(checkpoint: MutableMapping[str, Any], position: Mapping[str, Mapping[Any, Any]]) -> MutableMapping[str, Any]:
    """Stores ``position`` (validated, as plain ints and strs) in a checkpoint dict; returns the dict.

    Raises:
        ValueError: ``position`` is malformed.
    """
    checkpoint[CHECKPOINT_KEY] = {"format": FORMAT, "position": from_offsets(to_offsets(position))}
    return checkpoint


def get_position(checkpoint: Mapping[str, Any]) -> Position | None:
    """The position :func:`put_position` stored, or ``None`` when the checkpoint has none.

    Raises:
        ValueError: The entry exists but is malformed or of a newer format.
    """
    entry = checkpoint.get(CHECKPOINT_KEY)
    if entry is None:
        return None
    if not isinstance(entry, Mapping) or "position" not in entry:
        raise ValueError(f"checkpoint[{CHECKPOINT_KEY!r}] is not a stored position")
    if entry.get("format") != FORMAT:
        raise ValueError(f"checkpoint[{CHECKPOINT_KEY!r}] has format {entry.get('format')!r}; this client reads {FORMAT}")
    return from_offsets(to_offsets(entry["position"]))

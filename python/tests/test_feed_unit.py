"""feed() against an in-memory consumer: commit after put_samples, rewind on error, merging."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from builders import clean, text_group
from rollout_stream import decode_packed_body, feed
from rollout_stream.encode import encode_packed_body


@dataclass
class FakeDelivery:
    group: object
    topic: str
    partition: int
    offset: int


class FakeConsumer:
    """The slice of PackedConsumer that feed uses: poll, commit, rewind."""

    def __init__(self, groups):
        self.log = [FakeDelivery(g, "t", 0, i) for i, g in enumerate(groups)]
        self.pos = 0
        self.committed = 0
        self.events: list[str] = []

    def poll(self, timeout):
        if self.pos >= len(self.log):
            return None
        d = self.log[self.pos]
        self.pos += 1
        return d

    def commit(self, batch):
        self.committed = max(d.offset for d in batch) + 1
        self.events.append(f"commit {self.committed}")

    def rewind(self, batch):
        self.pos = min(d.offset for d in batch)
        self.events.append(f"rewind {self.pos}")


def groups(packed_schema, n, mode="numpy", lengths=(2, 3)):
    return [
        decode_packed_body(encode_packed_body(clean(text_group(f"g{i}", lengths=lengths)), packed_schema), packed_schema, jagged=mode)
        for i in range(n)
    ]


def test_offsets_are_committed_only_after_put_samples_returned(packed_schema):
    consumer = FakeConsumer(groups(packed_schema, 3))

    def put(sample_ids, fields, tags):
        consumer.events.append(f"put {sample_ids[0]}")

    stats = feed(consumer, put, stop_after=3, poll_timeout=0)
    assert consumer.events == ["put g0_g0", "commit 1", "put g1_g0", "commit 2", "put g2_g0", "commit 3"]
    assert (stats.groups, stats.rows, stats.calls) == (3, 6, 3)


def test_an_exception_in_put_samples_propagates_and_leaves_the_group_uncommitted(packed_schema):
    consumer = FakeConsumer(groups(packed_schema, 3))
    arrived = []

    def put(sample_ids, fields, tags):
        arrived.append(tags[0]["group_id"])
        if tags[0]["group_id"] == "g1" and arrived.count("g1") == 1:
            raise RuntimeError("transfer queue is full")

    with pytest.raises(RuntimeError, match="transfer queue is full"):
        feed(consumer, put, stop_after=3, poll_timeout=0)
    assert consumer.committed == 1 and consumer.events[-1] == "rewind 1"
    feed(consumer, put, stop_after=2, poll_timeout=0)  # same consumer, retried: g1 comes again
    assert arrived == ["g0", "g1", "g1", "g2"]
    assert consumer.committed == 3


@pytest.mark.parametrize("mode", ["numpy", "torch"])
def test_compatible_groups_merge_into_one_call_with_shifted_offsets(packed_schema, mode):
    consumer = FakeConsumer(groups(packed_schema, 3, mode))
    calls = []
    stats = feed(consumer, lambda s, f, t: calls.append((s, f, t)), max_groups_per_call=3, stop_after=3, poll_timeout=0)
    assert stats.calls == 1 and stats.rows == 6 and consumer.committed == 3
    sample_ids, fields, tags = calls[0]
    assert sample_ids == ["g0_g0", "g0_g1", "g1_g0", "g1_g1", "g2_g0", "g2_g1"]
    assert [t["group_id"] for t in tags] == ["g0", "g0", "g1", "g1", "g2", "g2"]
    ids = fields["input_ids"]
    offsets = ids.offsets if mode == "numpy" else ids.offsets()
    assert np.asarray(offsets).tolist() == [0, 2, 5, 7, 10, 12, 15]
    assert np.asarray(fields["input_lengths"]).tolist() == [2, 3] * 3


def test_groups_whose_dense_fields_do_not_line_up_go_in_separate_calls(packed_schema):
    a = groups(packed_schema, 1)[0]
    b = decode_packed_body(
        encode_packed_body(clean(text_group("g9", lengths=(4, 4), prompt=3)), packed_schema), packed_schema, jagged="numpy"
    )  # prompt_ids_for_adv [2, 3] vs [2, 2]
    consumer = FakeConsumer([a, b])
    calls = []
    stats = feed(consumer, lambda s, f, t: calls.append(s), max_groups_per_call=4, stop_after=2, poll_timeout=0)
    assert calls == [["g0_g0", "g0_g1"], ["g9_g0", "g9_g1"]]
    assert stats.calls == 2 and consumer.committed == 2


def test_idle_timeout_returns_when_nothing_arrives(packed_schema):
    stats = feed(FakeConsumer([]), lambda *a: None, poll_timeout=0, idle_timeout=0.05)
    assert stats.groups == 0

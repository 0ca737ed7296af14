"""feed() against an in-memory consumer: commit after put_samples, rewind on error, merging."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from builders import clean, text_group
from rollout_stream import decode_packed_body, feed
from rollout_stream.encode import encode_packed_body


@dataclass
class FakeRecord:
    group: object
    topic: str
    partition: int
    offset: int
    weight_version: int | None = None
    batch_id: str | None = None
    epoch: int = 1
    weight_lag: int | None = None

    @property
    def key(self):
        return self.group.group_id


class FakeConsumer:
    """The slice of PackedConsumer that feed uses: poll_record, decode, done, rewind (after_put commits)."""

    commit_mode = "after_put"

    def __init__(self, groups, headers=False):
        self.log = [
            FakeRecord(g, "t", 0, i, weight_version=g.tags[0]["weight_version"] if headers else None)
            for i, g in enumerate(groups)
        ]
        self.pos = 0
        self.position = 0
        self.committed = 0
        self.decoded = 0
        self.events: list[str] = []

    def poll_record(self, timeout):
        if self.pos >= len(self.log):
            return None
        d = self.log[self.pos]
        self.pos += 1
        return d

    def decode(self, rec, defer_done=False):
        self.decoded += 1
        return FakeRecord(rec.group, rec.topic, rec.partition, rec.offset)

    def is_current(self, item):
        return True

    def done(self, batch, commit_now=True):
        self.position = max([self.position] + [d.offset + 1 for d in batch])
        if commit_now:
            self.flush_commits()

    def flush_commits(self):
        if self.position != self.committed:
            self.committed = self.position
            self.events.append(f"commit {self.committed}")

    def rewind(self, batch):
        if batch:
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


# --- staleness (SPEC §6.2) against the in-memory consumer ------------------------------------


def versioned(packed_schema, versions):
    from builders import versioned_group

    return [decode_packed_body(encode_packed_body(versioned_group(f"v{v}", v), packed_schema), packed_schema, jagged="numpy") for v in versions]


@pytest.mark.parametrize("headers", [True, False])
def test_stale_groups_are_skipped_counted_per_lag_reported_and_done(packed_schema, headers):
    order = [4, 9, 0, 7, 2, 8, 5, 1, 6, 3]  # ends with a stale one: its offset must still be done
    consumer = FakeConsumer(versioned(packed_schema, order), headers=headers)
    got, stale = [], []
    stats = feed(consumer, lambda s, f, t: got.append(t), poll_timeout=0, idle_timeout=0,
                 current_weight_version=9, max_weight_lag=2, on_stale=stale.append)
    assert [t[0]["weight_version"] for t in got] == [9, 7, 8]
    assert [[r["weight_lag"] for r in t] for t in got] == [[0, 0], [2, 2], [1, 1]]
    assert stats.lags == {2: 1, 1: 1, 0: 1}
    assert stats.stale == {lag: 1 for lag in range(3, 10)}
    assert [(s.weight_version, s.lag, s.offset, s.decoded) for s in stale] == [
        (v, 9 - v, n, not headers) for n, v in enumerate(order) if v < 7
    ]
    assert stats.stale_by_header == (7 if headers else 0)
    assert consumer.decoded == (3 if headers else 10)  # headers: stale values are never decoded
    assert consumer.committed == 10 and stats.committed == {("t", 0): 10} == stats.done


def test_a_stale_group_after_a_pending_one_is_done_only_once_the_pending_one_was_put(packed_schema):
    consumer = FakeConsumer(versioned(packed_schema, [9, 0, 9]), headers=True)
    seen = []

    def put(s, f, t):
        seen.append(("put", [x["group_id"] for x in t], consumer.position))

    feed(consumer, put, max_groups_per_call=2, poll_timeout=0, idle_timeout=0, current_weight_version=9, max_weight_lag=0)
    # the stale v0 at offset 1 sits between v9@0 (pending) and v9@2: position stays 0 until the put
    assert seen == [("put", ["v9", "v9", "v9", "v9"], 0)]
    assert consumer.position == 3


def test_the_current_version_may_be_a_callable_asked_per_record(packed_schema):
    current = iter([0, 1, 5, 5])
    consumer = FakeConsumer(versioned(packed_schema, [0, 0, 0, 5]), headers=True)
    got = []
    stats = feed(consumer, lambda s, f, t: got.append(t[0]["weight_lag"]), poll_timeout=0, stop_after=3,
                 current_weight_version=lambda: next(current), max_weight_lag=1)
    assert got == [0, 1, 0] and stats.stale == {5: 1}


def test_max_weight_lag_without_a_current_version_is_refused(packed_schema):
    with pytest.raises(ValueError, match="needs current_weight_version"):
        feed(FakeConsumer([]), lambda *a: None, max_weight_lag=1)
    with pytest.raises(ValueError, match=">= 0"):
        feed(FakeConsumer([]), lambda *a: None, current_weight_version=1, max_weight_lag=-1)

"""Failed start-offset lookups inside the assignment callback: retried with backoff, then a coded error.

``OffsetLookup`` runs against a fake client on a fake clock; ``PackedConsumer``'s
assignment callback is driven the way librdkafka drives it (``_on_assign(client,
partitions)``, the client being the one whose lookups fail), with no broker.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from rollout_stream import OffsetLookupError, PackedConsumer, feed
from rollout_stream.assignment import Assignment
from rollout_stream.offset_lookup import OffsetLookup

T = "rollout.packed"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(round(s, 6))
        self.now += s


def timed_out(what: str = "injected") -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, what))


class FakeClient:
    """``committed``/``get_watermark_offsets`` from scripted answers; records what the consumer assigns.

    ``committed_fails``: how many ``committed`` calls raise first (``-1``: all).
    ``partition_errors``: partitions whose committed answer carries an error (every time).
    ``watermark_fails``: how many ``get_watermark_offsets`` calls fail first (``-1``: all); ``"none"`` answers None.
    """

    def __init__(self, committed=None, marks=None, committed_fails=0, partition_errors=(), watermark_fails=0,
                 watermark_answer="raise", clock: Clock | None = None, call_seconds: float = 0.0) -> None:
        self.committed_offsets = dict(committed or {})
        self.marks = dict(marks or {})
        self.committed_fails = committed_fails
        self.partition_errors = set(partition_errors)
        self.watermark_fails = watermark_fails
        self.watermark_answer = watermark_answer
        self.clock = clock
        self.call_seconds = call_seconds
        self.committed_calls: list[list[tuple[str, int]]] = []
        self.watermark_calls: list[tuple[str, int]] = []
        self.assigned: list[tuple[str, int, int]] | None = None
        self.unassigned: list[tuple[str, int]] | None = None

    def _spend(self) -> None:
        if self.clock is not None:
            self.clock.now += self.call_seconds

    def committed(self, tps, timeout=None):
        self.committed_calls.append([(tp.topic, tp.partition) for tp in tps])
        self._spend()
        if self.committed_fails:
            self.committed_fails -= 1
            raise timed_out("coordinator not available (injected)")
        out = []
        for tp in tps:  # TopicPartition.error is read-only: answer with look-alikes
            key = (tp.topic, tp.partition)
            err = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "loading (injected)") if key in self.partition_errors else None
            out.append(SimpleNamespace(topic=tp.topic, partition=tp.partition, error=err,
                                       offset=-1001 if err else self.committed_offsets.get(key, -1001)))
        return out

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        self.watermark_calls.append((tp.topic, tp.partition))
        self._spend()
        if self.watermark_fails:
            self.watermark_fails -= 1
            if self.watermark_answer == "none":
                return None
            raise timed_out("leader not available (injected)")
        return self.marks.get((tp.topic, tp.partition), (0, 0))

    def assign(self, tps):
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in tps]

    def incremental_assign(self, tps):
        self.assign(tps)

    def unassign(self):
        self.unassigned = []

    def incremental_unassign(self, tps):
        self.unassigned = [(tp.topic, tp.partition) for tp in tps]


def lookup(clock: Clock, timeout: float = 5.0) -> OffsetLookup:
    return OffsetLookup(timeout, first_backoff=0.1, max_backoff=1.0, clock=clock, sleep=clock.sleep)


def test_a_failing_committed_lookup_is_retried_with_doubling_backoff_until_it_answers():
    clock = Clock()
    client = FakeClient(committed={(T, 0): 7, (T, 1): 3}, committed_fails=3)
    got = lookup(clock).start_offsets(client, [(T, 0), (T, 1)], Assignment(None), reset_latest=False)
    assert got.offsets == {(T, 0): 7, (T, 1): 3} and got.failed == {}
    assert got.tries == 4 and clock.sleeps == [0.1, 0.2, 0.4]


def test_a_committed_lookup_that_keeps_failing_gives_up_at_the_deadline_and_names_every_partition():
    clock = Clock()
    client = FakeClient(committed_fails=-1, clock=clock, call_seconds=0.5)
    got = lookup(clock, timeout=5.0).start_offsets(client, [(T, 0), (T, 1)], Assignment(None), reset_latest=False)
    assert got.offsets == {}
    assert set(got.failed) == {(T, 0), (T, 1)}
    assert {f.what for f in got.failed.values()} == {"committed offset"}
    assert "coordinator not available" in str(got.failed[(T, 0)].cause)
    assert max(clock.sleeps) == 1.0  # capped
    assert 5.0 <= got.elapsed <= 5.0 + 0.5  # one last try at the deadline, no more
    assert not client.watermark_calls  # no guess at the reset offset


def test_only_the_partitions_whose_answer_carried_an_error_are_asked_again():
    clock = Clock()
    client = FakeClient(committed={(T, 0): 4}, partition_errors={(T, 1)})
    got = lookup(clock, timeout=1.0).start_offsets(client, [(T, 0), (T, 1)], Assignment(None), reset_latest=False)
    assert got.offsets == {(T, 0): 4} and set(got.failed) == {(T, 1)}
    assert "loading (injected)" in str(got.failed[(T, 1)].cause)
    assert client.committed_calls[0] == [(T, 0), (T, 1)] and all(c == [(T, 1)] for c in client.committed_calls[1:])
    assert len(client.committed_calls) > 2


@pytest.mark.parametrize("answer", ["raise", "none"])
def test_watermarks_are_retried_and_a_partition_without_them_fails_instead_of_starting_somewhere(answer):
    clock = Clock()
    client = FakeClient(marks={(T, 0): (2, 9)}, watermark_fails=2, watermark_answer=answer)
    got = lookup(clock).start_offsets(client, [(T, 0)], Assignment(None), reset_latest=True)
    assert got.offsets == {(T, 0): 9} and len(client.watermark_calls) == 3
    client = FakeClient(marks={(T, 0): (2, 9)}, watermark_fails=-1, watermark_answer=answer, clock=clock, call_seconds=0.2)
    got = lookup(clock, timeout=2.0).start_offsets(client, [(T, 0)], Assignment(None), reset_latest=False)
    assert got.offsets == {} and got.failed[(T, 0)].what == "watermarks"


def test_a_committed_offset_or_an_explicit_start_needs_no_watermark_and_an_explicit_start_no_lookup():
    clock = Clock()
    client = FakeClient(committed={(T, 0): 5}, watermark_fails=-1)
    got = lookup(clock).start_offsets(client, [(T, 0)], Assignment(None), reset_latest=False)
    assert got.offsets == {(T, 0): 5} and not client.watermark_calls
    client = FakeClient(committed_fails=-1, watermark_fails=-1)
    got = lookup(clock).start_offsets(client, [(T, 0)], Assignment({T: {"0": 11}}), reset_latest=False)
    assert got.offsets == {(T, 0): 11} and not client.committed_calls and not client.watermark_calls


# -- PackedConsumer's assignment callback ------------------------------------------------


class NoDecoder:
    resolver = None


@pytest.fixture
def make_consumer():
    made: list[PackedConsumer] = []

    def make(**kw) -> PackedConsumer:
        # No broker behind it: only the callbacks are driven; librdkafka never gets to join.
        config = {"log_level": 0, **kw.pop("config", {})}  # quiet about the broker that is not there
        c = PackedConsumer(T, "trainer", "127.0.0.1:1", check=False, deserializer=NoDecoder(), instance_id=False,
                           offset_lookup_timeout=kw.pop("offset_lookup_timeout", 0.3), config=config, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_partitions_whose_committed_offset_cannot_be_looked_up_are_not_assigned_and_poll_and_feed_fail(make_consumer):
    c = make_consumer()
    client = FakeClient(committed={(T, 0): 4}, partition_errors={(T, 2)})
    c._on_assign(client, [TopicPartition(T, 0), TopicPartition(T, 1), TopicPartition(T, 2)])
    # partition 1 has no committed offset: it starts at the low watermark; 2 is neither dropped nor guessed
    assert client.assigned == [(T, 0, 4), (T, 1, 0)]
    assert c.position() == {T: {"0": 4, "1": 0}} and c.assigned() == [(T, 0), (T, 1)]
    with pytest.raises(OffsetLookupError) as info:
        c.poll_record(0)
    e = info.value
    assert e.code == "offset_lookup" and e.retriable and e.partitions == [(T, 2)] and e.details["group_id"] == "trainer"
    assert f"{T}[2]" in str(e) and "committed offset" in str(e) and "loading (injected)" in str(e)
    assert f"{T}[0]" not in str(e).split("(")[0]
    assert isinstance(e.__cause__, KafkaException)
    with pytest.raises(OffsetLookupError):  # and every poll after it, feed's too
        feed(c, lambda *a: None, poll_timeout=0, idle_timeout=0)
    with pytest.raises(OffsetLookupError):
        c.poll(0)


def test_when_every_lookup_times_out_nothing_is_assigned_and_the_error_names_every_partition(make_consumer):
    c = make_consumer()
    client = FakeClient(committed_fails=-1)
    c._on_assign(client, [TopicPartition(T, 0), TopicPartition(T, 1)])  # must not raise into librdkafka
    assert client.assigned == [] and c.position() == {} and len(client.committed_calls) > 1
    with pytest.raises(OffsetLookupError) as info:
        c.poll_record(0)
    assert info.value.partitions == [(T, 0), (T, 1)] and "coordinator not available" in str(info.value)


def test_a_start_offsets_callable_that_raises_leaves_the_partitions_unread_with_its_error_as_cause(make_consumer):
    def broken(keys):
        raise OSError("checkpoint store unreachable")

    c = make_consumer(start_offsets=broken)
    client = FakeClient(committed={(T, 0): 4})
    c._on_assign(client, [TopicPartition(T, 0)])
    assert client.assigned == []
    with pytest.raises(OffsetLookupError) as info:
        c.poll_record(0)
    assert isinstance(info.value.__cause__, OSError) and "start_offsets: checkpoint store unreachable" in str(info.value)


def test_a_lookup_that_succeeds_on_a_retry_starts_the_partition_and_poll_goes_on(make_consumer):
    c = make_consumer(offset_lookup_timeout=5)
    client = FakeClient(committed={(T, 0): 4}, committed_fails=2)
    c._on_assign(client, [TopicPartition(T, 0)])
    assert client.assigned == [(T, 0, 4)] and len(client.committed_calls) == 3
    assert c.poll_record(0) is None  # no error: the real client has nothing to give


def test_revoking_a_partition_that_was_never_started_hands_back_only_the_started_ones(make_consumer):
    c = make_consumer(config={"partition.assignment.strategy": "cooperative-sticky"})
    client = FakeClient(committed={(T, 0): 4}, partition_errors={(T, 1)})
    c._on_assign(client, [TopicPartition(T, 0), TopicPartition(T, 1)])
    c._on_revoke(client, [TopicPartition(T, 0), TopicPartition(T, 1)])
    assert client.unassigned == [(T, 0)] and c.assigned() == []
    assert c.poll_record(0) is None  # the partition left with its error


def test_the_default_lookup_bound_stays_under_half_of_max_poll_interval(make_consumer):
    assert make_consumer(offset_lookup_timeout=None)._lookup.timeout == 30.0
    assert make_consumer(offset_lookup_timeout=None, config={"max.poll.interval.ms": 50000, "session.timeout.ms": 10000})._lookup.timeout == 25.0

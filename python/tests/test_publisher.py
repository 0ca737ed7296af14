"""RolloutPublisher without a broker: partitions, BatchEnds, delivery errors, stats, batch stamping."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest

from fake_producer import FakeProducer
from rollout_stream import (
    DeliveryError,
    InvalidRowError,
    KafkaOperationError,
    PublisherClosedError,
    RolloutPublisher,
    partition_for_key,
    row_json,
    stamp_batch,
)
from test_publisher_validation import good_result, good_row


def make(partitions: int = 4, **fake_kw) -> tuple[RolloutPublisher, FakeProducer]:
    fake = FakeProducer(partitions=partitions, **fake_kw)
    return RolloutPublisher(producer=fake, schema_id=7, topic_prefix=""), fake


def _row(group_id: str, row_index: int = 0, n: int = 1) -> dict:
    row = good_row()
    row.update(group_id=group_id, group_index=row_index // n, row_index=row_index, num_generations=n)
    return row


def test_each_row_goes_to_the_java_partition_of_its_group_id_with_the_group_id_as_key():
    pub, fake = make(partitions=5)
    groups = [f"grp-{i}-ü" for i in range(40)]
    for g in groups:
        assert pub.publish_row(_row(g)) == partition_for_key(g, 5)
    assert [(p.key.decode(), p.partition) for p in fake.produced] == [(g, partition_for_key(g, 5)) for g in groups]
    assert len({p.partition for p in fake.produced}) == 5  # the keys spread over every partition
    assert all(p.value[:5] == b"\x00\x00\x00\x00\x07" for p in fake.produced)  # framed with the schema id


def test_the_topic_gets_the_prefix_from_the_argument_or_topic_prefix(monkeypatch):
    monkeypatch.setenv("TOPIC_PREFIX", "sandbox.")
    fake = FakeProducer()
    assert RolloutPublisher(producer=fake, schema_id=1).topic == "sandbox.rollout.row-completed"
    assert RolloutPublisher(producer=fake, schema_id=1, topic_prefix="x.").topic == "x.rollout.row-completed"


def test_end_batch_waits_for_the_rows_then_writes_one_batch_end_to_every_partition():
    pub, fake = make(partitions=3, deliver_on_poll=False)
    for i in range(6):
        pub.publish_row(_row(f"g{i // 3}", i % 3, 3) | {"group_index": 0, "row_index": i % 3})
    pub.end_batch("b1", 6)
    rows, ends = fake.produced[:6], fake.produced[6:]
    assert [p.partition for p in ends] == [0, 1, 2]
    assert all(p.key == b"b1" for p in ends)
    for p in ends:
        kind, schema_id, record = row_json.decode(p.value)
        assert (kind, schema_id, record) == ("batch_end", 7, {"batch_id": "b1", "num_rows": 6})
    # nothing was in flight when the first BatchEnd went out: every row was acknowledged first
    produces = [i for i, e in enumerate(fake.events) if e[0] == "produce"]
    first_end = produces[6]
    assert fake.events[first_end] == ("produce", 0)
    assert ("flush", 0) in fake.events[produces[5]:first_end]
    assert fake.events[-1] == ("flush", 0)  # and the BatchEnds themselves were flushed
    assert pub.stats.batch_ends == 3 and pub.stats.rows == 6 and pub.stats.records == 9


def test_a_lost_row_raises_delivery_error_on_flush_once_and_names_it():
    pub, fake = make(fail=lambda p: "Broker: Not enough in-sync replicas" if p.key == b"bad" else None)
    pub.publish_row(_row("ok"))
    pub.publish_row(_row("bad"))
    with pytest.raises(DeliveryError) as e:
        pub.flush()
    assert len(e.value.failures) == 1 and e.value.failures[0].key == b"bad"
    assert "in-sync replicas" in str(e.value) and e.value.code == "delivery"
    assert pub.stats.failed == 1 and pub.stats.delivered == 1
    pub.flush()  # reported once


def test_a_lost_row_stops_end_batch_before_any_batch_end_is_written():
    pub, fake = make(deliver_on_poll=False, fail=lambda p: "Local: Message timed out" if p.key == b"bad" else None)
    pub.publish_row(_row("bad"))
    with pytest.raises(DeliveryError, match="timed out"):
        pub.end_batch("b1", 1)
    assert len(fake.produced) == 1


def test_close_raises_a_pending_delivery_error_and_the_context_manager_too():
    pub, _ = make(fail=lambda p: "Broker: Message size too large")
    pub.publish_row(_row("g"))
    with pytest.raises(DeliveryError):
        pub.close()
    pub2, _ = make(fail=lambda p: "boom")
    with pytest.raises(DeliveryError):
        with pub2 as p:
            p.publish_row(_row("g"))


def test_unacknowledged_records_after_the_timeout_are_a_delivery_error():
    pub, fake = make()
    fake.flush = lambda timeout=-1: 3  # three still queued when the time ran out
    with pytest.raises(DeliveryError, match="3 record"):
        pub.flush(0.1)


def test_a_closed_publisher_refuses_to_publish():
    pub, _ = make()
    pub.close()
    pub.close()  # idempotent
    with pytest.raises(PublisherClosedError):
        pub.publish_row(_row("g"))
    with pytest.raises(PublisherClosedError):
        pub.end_batch("b", 0)


def test_an_unknown_topic_is_a_clear_error():
    with pytest.raises(KafkaOperationError, match="topics create"):
        RolloutPublisher(producer=FakeProducer(topics=set()), schema_id=1, topic_prefix="")


def test_a_topic_the_broker_learns_of_a_moment_later_is_asked_about_again(monkeypatch):
    """Right after `topics create` a broker can answer UNKNOWN_TOPIC_OR_PART for a short while."""
    from confluent_kafka import KafkaError

    class LateTopic(FakeProducer):
        asked = 0

        def list_topics(self, topic=None, timeout=-1):
            self.asked += 1
            if self.asked < 3:
                return SimpleNamespace(topics={topic: SimpleNamespace(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), partitions={})})
            return super().list_topics(topic, timeout)

    late = LateTopic(partitions=3)
    pub = RolloutPublisher(producer=late, schema_id=1, topic_prefix="")
    assert (pub.num_partitions, late.asked) == (3, 3)
    # A topic that never appears is still reported, once the wait is over.
    monkeypatch.setattr("rollout_stream.publisher.UNKNOWN_TOPIC_WAIT_S", 0.5)
    never = LateTopic(topics=set())
    never.asked = -10**9
    with pytest.raises(KafkaOperationError, match="topics create"):
        RolloutPublisher(producer=never, schema_id=1, topic_prefix="")
    assert never.asked > -10**9 + 1


def test_idempotence_and_acks_cannot_be_configured_away():
    with pytest.raises(ValueError, match="enable.idempotence"):
        RolloutPublisher(producer_config={"enable.idempotence": False}, schema_id=1)
    with pytest.raises(ValueError, match="acks"):
        RolloutPublisher(producer_config={"acks": 1}, schema_id=1)


def test_stats_count_records_bytes_and_partitions():
    pub, fake = make(partitions=2)
    gym_row, gym_result, ident = good_result()
    pub.publish_row(_row("a"))
    pub.publish_result(gym_row, gym_result, **ident)
    pub.end_batch("b", 2)
    s = pub.stats
    assert (s.rows, s.results, s.batch_ends, s.records) == (1, 1, 2, 4)
    assert s.bytes == sum(len(p.value) for p in fake.produced)
    assert sum(s.per_partition.values()) == 4 and s.delivered == 4


def test_a_full_local_queue_is_waited_out_not_dropped():
    pub, fake = make()
    real = fake.produce
    calls = {"n": 0}

    def produce(*a, **kw):
        calls["n"] += 1
        if calls["n"] <= 2:
            raise BufferError("Local: Queue full")
        real(*a, **kw)

    fake.produce = produce
    pub.publish_row(_row("g"))
    assert len(fake.produced) == 1


# ---------------------------------------------------------------- stamping


def test_stamp_batch_gives_group_index_i_div_n_and_row_index_i():
    rows = [{"_ng_task_index": 10 + i // 2, "agent_ref": {"name": "a"}} for i in range(6)]
    ids = stamp_batch(rows, 2, "step-3", weight_version=9)
    assert [(x.group_index, x.row_index) for x in ids] == [(0, 0), (0, 1), (1, 2), (1, 3), (2, 4), (2, 5)]
    assert [x.group_id for x in ids] == ["step-3/g0"] * 2 + ["step-3/g1"] * 2 + ["step-3/g2"] * 2
    assert [x.prompt_idx for x in ids] == [10, 10, 11, 11, 12, 12]  # from _ng_task_index by default
    assert [x.task_index for x in ids] == [10, 10, 11, 11, 12, 12]
    assert [r["_rowidx"] for r in rows] == list(range(6))  # stamped like NeMo-RL does
    assert ids[3].kwargs() == {"batch_id": "step-3", "group_id": "step-3/g1", "group_index": 1, "row_index": 3,
                               "num_generations": 2, "prompt_idx": 11, "weight_version": 9, "task_index": 11,
                               "instance_label": None}


def test_stamp_batch_takes_explicit_prompt_indices_and_group_ids():
    ids = stamp_batch([{}] * 4, 2, "b", weight_version=0, prompt_idx=[5, 6], group_ids=lambda g: f"uuid-{g}", stamp_rowidx=False)
    assert [(x.prompt_idx, x.group_id) for x in ids] == [(5, "uuid-0"), (5, "uuid-0"), (6, "uuid-1"), (6, "uuid-1")]


@pytest.mark.parametrize(
    "rows,n,field",
    [([{}] * 3, 2, "task_rows"), ([{}] * 2, 0, "num_generations"), ([{"_rowidx": 1}, {}], 1, "task_rows[0]._rowidx"),
     ([{}, {}], 1, "prompt_idx")],
)
def test_stamp_batch_refuses_what_cannot_be_stamped(rows, n, field):
    with pytest.raises(InvalidRowError) as e:
        stamp_batch([dict(r) for r in rows], n, "b", weight_version=0)
    assert e.value.field == field


def test_a_batch_published_in_completion_order_lands_with_the_identity_of_its_task_rows():
    pub, fake = make(partitions=3, deliver_on_poll=False)
    task_rows = [{"responses_create_params": {"input": f"p{i // 2}"}, "agent_ref": {"name": "a"}, "_ng_task_index": i // 2}
                 for i in range(8)]

    async def collect(row):  # stands in for NeMo-Gym: finishes in random order, echoes the row
        await asyncio.sleep(random.random() / 1000)
        return row, {"response": {"output": []}, "reward": float(row["_rowidx"])}

    async def run():
        with pub.batch(task_rows, 2, "step-1", weight_version=5) as batch:
            for fut in asyncio.as_completed([collect(r) for r in task_rows]):
                gym_row, gym_result = await fut
                batch.publish_result(gym_row, gym_result)
        return batch

    batch = asyncio.run(run())
    assert batch.missing == []
    rows = [row_json.decode(p.value) for p in fake.produced[:8]]
    by_index = {rec["row_index"]: rec for kind, _, rec in rows}
    assert sorted(by_index) == list(range(8))
    for i, rec in by_index.items():
        assert (rec["group_index"], rec["group_id"], rec["prompt_idx"]) == (i // 2, f"step-1/g{i // 2}", i // 2)
        assert '"reward":' + (str(i) if i else "0") in rec["gym_result"]
    assert [row_json.decode(p.value)[0] for p in fake.produced[8:]] == ["batch_end"] * 3


def test_the_batch_helper_publishes_nemo_rl_results_with_agent_and_request_from_the_task_row():
    pub, fake = make()
    task_rows = [{"responses_create_params": {"input": "q"}, "agent_ref": {"name": "math"}, "prompt_idx": 3}]
    batch = pub.batch(task_rows, 1, "b", weight_version=2)
    result = {k: good_row()[k] for k in ("message_log", "input_message_log", "full_result")}
    batch.publish_row(result, 0)
    _, _, rec = row_json.decode(fake.produced[0].value)
    assert (rec["agent_ref"], rec["request"], rec["prompt_idx"], rec["row_index"]) == ('{"name":"math"}', '{"input":"q"}', 3, 0)
    assert batch.end() == []


def test_a_result_without_a_row_index_is_refused():
    pub, _ = make()
    batch = pub.batch([{"prompt_idx": 0}], 1, "b", weight_version=0, stamp_rowidx=False)
    gym_row, gym_result, _ = good_result()
    with pytest.raises(InvalidRowError, match="_rowidx"):
        batch.publish_result(gym_row, gym_result)


def test_the_partition_count_is_read_once_and_can_be_refreshed_between_batches():
    pub, fake = make(partitions=2)
    fake.partitions = 6
    assert pub.num_partitions == 2
    assert pub.refresh_partitions() == 6
    pub.end_batch("b", 0)
    assert [p.partition for p in fake.produced] == list(range(6))


def test_a_record_the_producer_refuses_locally_is_a_kafka_operation_error_with_its_size():
    from confluent_kafka import KafkaError, KafkaException

    pub, fake = make()

    def produce(*a, **kw):
        raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))

    fake.produce = produce
    with pytest.raises(KafkaOperationError, match="byte record") as e:
        pub.publish_row(_row("g"))
    assert e.value.details["size"] > 0 and pub.stats.records == 0

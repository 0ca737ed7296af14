"""How `collect`'s backpressure counts (rollout_stream.gym.backpressure), on the real broker.

The trainer's lag is counted in data records: transaction markers and an
aborted transaction's records take offsets on `rollout.packed` too, and are
not groups. A group of this collector is "in the pipeline" from its last
row published until it is read on `rollout.packed` or dead-lettered as a
whole group (a row-level dead letter leaves it there).
"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from rollout_stream.gym.backpressure import Backpressure, dead_letter_reason, sibling_topic

pytestmark = pytest.mark.integration


def dead_letter(reason: str) -> bytes:
    raw = reason.encode()
    n = len(raw) << 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return b"\x00\x00\x00\x00\x01" + bytes(out) + raw + b"\x02rest"


def test_dead_letter_reason_and_topic_names():
    assert dead_letter_reason(dead_letter("incomplete_group")) == "incomplete_group"
    assert dead_letter_reason(dead_letter("x" * 300)) == "x" * 300
    assert dead_letter_reason(b"") is None and dead_letter_reason(b"\x01abcdefg") is None
    assert sibling_topic("p1.rollout.row-completed", "rollout.packed") == "p1.rollout.packed"
    assert sibling_topic("rollout.row-completed", "rollout.dead-letter") == "rollout.dead-letter"


def test_lag_counts_records_not_offsets_and_groups_leave_the_pipeline_on_packed_or_a_group_dead_letter(kafka_env, packed_topics):
    packed, _ = packed_topics(2)
    dlq, _ = packed_topics(1, "rollout.dead-letter")
    trainer = f"trainer-{uuid.uuid4().hex[:6]}"
    tx = Producer({"bootstrap.servers": kafka_env.brokers, "transactional.id": f"pytest-pack-{uuid.uuid4().hex[:6]}"})
    tx.init_transactions(30)

    def transaction(records, commit=True):
        tx.begin_transaction()
        for partition, key in records:
            tx.produce(packed, key=key, value=b"packed", partition=partition)
        if not commit:
            tx.flush(30)  # on the broker before the abort (an abort drops what was not sent yet)
        (tx.commit_transaction if commit else tx.abort_transaction)(30)

    # Earlier groups of others: 3 committed transactions of one record per partition, one aborted of two.
    for i in range(3):
        transaction([(0, f"old/g{i}a"), (1, f"old/g{i}b")])
    transaction([(0, "old/aborted"), (1, "old/aborted")], commit=False)
    ends = [Consumer({"bootstrap.servers": kafka_env.brokers, "group.id": "x"}).get_watermark_offsets(TopicPartition(packed, p), 10)[1] for p in (0, 1)]
    assert ends == [8, 8], "3 records, 3 commit markers, 1 aborted record, 1 abort marker per partition"

    # The trainer group consumed partition 0's first record only (committed offset 1: the record's next offset).
    g = Consumer({"bootstrap.servers": kafka_env.brokers, "group.id": trainer, "enable.auto.commit": False})
    g.commit(offsets=[TopicPartition(packed, 0, 1)], asynchronous=False)

    ids = [SimpleNamespace(group_id=f"b/g{i // 2}") for i in range(8)]  # 4 groups of 2 rows
    batch = SimpleNamespace(identities=ids, published={0})  # row 0 was on the topic before (a re-run)
    with Backpressure(4, trainer, brokers=kafka_env.brokers, packed_topic=packed, dead_letter_topic=dlq, interval=0) as bp:
        bp.track(batch)
        bp.refresh()
        assert (bp.unconsumed, bp.buffered()) == (2 + 3, 5), "records past the committed offsets, not 7 + 8 offsets"

        batch.published |= {1, 2, 3, 4, 5, 6}  # groups 0, 1, 2 complete; 3 half
        assert (bp.buffered(), bp.in_pipeline) == (8, 3)
        transaction([(1, "b/g0")])  # group 0 packed: unconsumed now, no longer in the pipeline
        p = Producer({"bootstrap.servers": kafka_env.brokers})
        p.produce(dlq, key=b"b/g1", value=dead_letter("incomplete_group"))  # group 1 out as a whole
        p.produce(dlq, key=b"b/g2", value=dead_letter("duplicate_row_index"))  # a row of group 2: the group stays
        p.produce(dlq, key=b"other/g1", value=dead_letter("incomplete_group"))  # not ours
        p.flush(30)
        for _ in range(50):
            bp.refresh()
            if bp.unconsumed == 6 and bp.buffered() == 7:
                break
            asyncio.run(asyncio.sleep(0.1))
        assert (bp.unconsumed, bp.in_pipeline, bp.buffered()) == (6, 1, 7)

        async def held_until_the_trainer_commits():
            wait = asyncio.ensure_future(bp())
            await asyncio.sleep(0.5)
            assert not wait.done() and "7 groups buffered, max 4 (6 unconsumed" in bp.status
            # The trainer commits everything on partition 1 (offsets 0..8, then the record at 8 and its marker).
            g.commit(offsets=[TopicPartition(packed, 1, 9)], asynchronous=False)
            await asyncio.wait_for(wait, 10)
            assert bp.status == "" and bp.waited_s >= 0.5

        asyncio.run(held_until_the_trainer_commits())
        assert (bp.unconsumed, bp.in_pipeline) == (2, 1)
    g.close()

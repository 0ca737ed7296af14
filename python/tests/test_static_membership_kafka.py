"""Static membership on the real broker: a SIGKILLed trainer rank restarted with its ``group.instance.id``.

Two toy trainer ranks (``toy_trainer.py``, ``commit="on_checkpoint"``)
share a 4-partition topic fed by a publisher thread, each a static member
with a 30 s session timeout. Rank 1 is SIGKILLed and restarted with the
same id: it must get its two partitions back within a few seconds, far
under the session timeout its dead predecessor would otherwise hold them
for (a dynamic member waits it out: the coordinator's rebalance waits for
the dead member until its session expires), without rank 0 being
rebalanced, and between them the ranks must checkpoint every group
exactly once and commit the end.

The flip side, with consumers in this process: a static member that closes
cleanly sends no LeaveGroup, so its partitions move to the others only
once its session timed out (scaling down pauses them that long); and a
second live member with the same id fences the first, whose poll then fails.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import pytest

from kafka_helpers import committed_offsets, end_offsets
from rollout_stream import KafkaOperationError, PackedConsumer
from test_resume_kafka import PARTITIONS, Harness, Publisher, Rank, ranks_to_reap, wait_until  # noqa: F401 (fixture)

pytestmark = pytest.mark.integration
SESSION_MS = 30_000
BACK_WITHIN_S = 10.0  # a third of the session timeout: a restart that waited it out fails


def events(h: Harness, rank: int) -> list[dict]:
    try:
        text = (h.dir / f"assigned-{rank}.jsonl").read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line]


def assignments(h: Harness, r: Rank) -> list[dict]:
    """The assignments the rank's current process got, oldest first."""
    return [e for e in events(h, r.rank) if e["pid"] == r.proc.pid and "assigned" in e]


def held(h: Harness, r: Rank) -> list[int]:
    got = assignments(h, r)
    return got[-1]["partitions"] if got else []


def test_a_sigkilled_static_rank_restarted_with_its_instance_id_gets_its_partitions_back_within_seconds(
    kafka_env, packed_topics, packed_schema, tmp_path, ranks_to_reap
):
    topic, schema_id = packed_topics(partitions=PARTITIONS)
    h = Harness(kafka_env, topic, tmp_path, "on_checkpoint")
    tag = uuid.uuid4().hex[:8]
    ranks = [Rank(h, 0), Rank(h, 1)]
    a, b = ranks
    for r in ranks:
        r.args = ["--instance-id", f"pytest-{tag}-rank-{r.rank}", "--session-timeout-ms", str(SESSION_MS),
                  "--max-poll-interval-ms", str(2 * SESSION_MS)]
    ranks_to_reap.extend(ranks)
    pub = Publisher(kafka_env, topic, schema_id, packed_schema, gap=0.3)
    pub.start()
    a.start()
    wait_until(lambda: held(h, a) == list(range(PARTITIONS)), 60, "rank 0 to hold every partition", ranks, h)
    b.start()
    wait_until(lambda: len(held(h, a)) == 2 and sorted(held(h, a) + held(h, b)) == list(range(PARTITIONS)), 60,
               "the two ranks to split the partitions", ranks, h)
    wait_until(lambda: a.state() and b.state(), 60, "both ranks to checkpoint", ranks, h)
    mine, rank0_assignments = held(h, b), len(assignments(h, a))

    b.kill()
    restarted = time.time()
    b.start()
    wait_until(lambda: assignments(h, b), BACK_WITHIN_S,
               f"the restarted rank 1 to get partitions back (session timeout {SESSION_MS / 1000:g}s)", ranks, h)
    back = assignments(h, b)[0]
    started = next(e["started"] for e in events(h, 1) if e["pid"] == b.proc.pid and "started" in e)
    print(f"\nstatic member back: partitions {back['partitions']} {back['assigned'] - restarted:.2f}s after the restart "
          f"({back['assigned'] - started:.2f}s after its process started; session timeout {SESSION_MS / 1000:g}s)")
    assert back["partitions"] == mine
    progress = len(b.state())
    wait_until(lambda: len(b.state()) > progress, 30, "the restarted rank 1 to train again", ranks, h)
    assert len(assignments(h, a)) == rank0_assignments, "rank 0 was rebalanced by rank 1's restart"

    names = pub.stop()
    wait_until(lambda: len(h.checkpointed(ranks)) >= len(names), 60, "every group to be checkpointed", ranks, h)
    h.stop(ranks)
    got = h.checkpointed(ranks)
    dupes = {g: n for g, n in got.items() if n > 1}
    assert not dupes, f"groups trained twice: {dupes}"
    assert set(got) == set(names), f"missing {sorted(set(names) - set(got))[:20]}"
    assert committed_offsets(h.brokers, h.group_id, topic, PARTITIONS) == end_offsets(h.brokers, topic, PARTITIONS)
    assert Counter(len(r.state()) > 0 for r in ranks) == Counter({True: 2})


def members(kafka_env, topic: str, group_id: str, ids: list, session_ms: int) -> list[PackedConsumer]:
    conf = {"session.timeout.ms": session_ms, "heartbeat.interval.ms": 500, "max.poll.interval.ms": 2 * session_ms}
    return [PackedConsumer(topic, group_id, kafka_env.brokers, kafka_env.registry_url, jagged="numpy",
                           instance_id=i, config=conf) for i in ids]


def poll_until(consumers: list[PackedConsumer], cond, timeout: float, what: str) -> float:
    """Polls every consumer until ``cond()``; the seconds it took."""
    begun = time.monotonic()
    while not cond():
        assert time.monotonic() - begun < timeout, f"timed out waiting for {what}"
        for c in consumers:
            c.poll_record(0.05)
    return time.monotonic() - begun


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_a_cleanly_closed_static_member_keeps_its_partitions_until_its_session_times_out(kafka_env, packed_topics, static):
    topic, _ = packed_topics(partitions=PARTITIONS)
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    tag = uuid.uuid4().hex[:8]
    session_ms = 6000  # the broker's group.min.session.timeout.ms
    stay, leave = members(kafka_env, topic, group_id, [f"{tag}-0", f"{tag}-1"] if static else [False, False], session_ms)
    try:
        poll_until([stay, leave], lambda: len(stay.assigned()) == 2 and len(leave.assigned()) == 2, 60, "the split")
        leave.close()  # a rank removed when scaling down
        took = poll_until([stay], lambda: len(stay.assigned()) == PARTITIONS, 30, "the remaining member to get every partition")
    finally:
        stay.close()
        leave.close()
    print(f"\n{'static' if static else 'dynamic'} member closed: its partitions moved after {took:.2f}s "
          f"(session timeout {session_ms / 1000:g}s)")
    if static:  # no LeaveGroup: the coordinator waits for the same id to come back
        assert took > session_ms / 1000 - 2
    else:
        assert took < 3


def test_a_second_live_member_with_the_same_instance_id_fences_the_first_whose_poll_fails(kafka_env, packed_topics):
    topic, _ = packed_topics(partitions=2)
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    same = f"pytest-{uuid.uuid4().hex[:8]}"
    (first,) = members(kafka_env, topic, group_id, [same], 10_000)
    try:
        poll_until([first], lambda: first.assigned(), 30, "the first member's assignment")
        (second,) = members(kafka_env, topic, group_id, [same], 10_000)
        try:
            poll_until([second], lambda: second.assigned(), 30, "the second member's assignment")
            with pytest.raises(KafkaOperationError, match="fenced"):
                poll_until([first], lambda: False, 15, "the first member to be fenced")
        finally:
            second.close()
    finally:
        first.close()

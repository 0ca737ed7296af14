"""The Python publisher writes a row above its topic's limit as one chunk set (integration).

A router-replay-shaped row of ~12 MB (32k tokens, routes [32768, 24, 8] int16)
goes into a ``rollout.row-completed`` created with ``max.message.bytes`` =
1 MiB: the publisher discovers the limit, sends the row as chunks from its
transactional chunk producer to the partition its key maps to, and a
reassembling reader (replay_reader.whole_records) gets the encoded row back
byte for byte. A publisher SIGKILLed inside its chunk transaction leaves chunks
in the log that no read_committed reader hands on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
from chunk_topics import MIB, delete_topics, make_topics
from confluent_kafka import Consumer, TopicPartition
from test_publisher_validation import good_row

from rollout_stream import RolloutPublisher, partition_for_key, row_encoder, row_input
from rollout_stream.chunks import is_chunk
from rollout_stream.replay_reader import whole_records

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
TOKENS = 32768


def big_row(group_id: str) -> dict:
    rng = np.random.default_rng(5)
    row = good_row() | {"group_id": group_id, "group_index": 0, "row_index": 0, "num_generations": 1}
    user = row["message_log"][0]
    row["message_log"] = [user, {
        "role": "assistant", "content": "a",
        "token_ids": rng.integers(0, 151_000, TOKENS).astype(np.int32),
        "generation_logprobs": -rng.random(TOKENS, dtype=np.float32),
        "routed_experts": rng.integers(0, 128, (TOKENS, 24, 8)).astype(np.int16),
    }]
    return row


def encoded(row: dict, schema_id: int) -> bytes:
    """The value the publisher sends for ``row`` (what a reader must get back)."""
    parts = row_encoder.row_parts(row_input.row(row))
    return row_encoder.header(schema_id) + b"".join(parts)


def raw_records(brokers: str, topic: str, partition: int, isolation: str) -> list:
    c = Consumer({"bootstrap.servers": brokers, "group.id": f"pytest-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        out, empty = [], 0
        while empty < 3:
            m = c.poll(1.0)
            if m is None:
                empty += 1
            elif m.error() is None:
                out.append(m)
        return out
    finally:
        c.close()


@pytest.fixture
def mib_rows(kafka_env):
    prefix, topics = make_topics(kafka_env.brokers, ["rollout.row-completed"], max_message_bytes=MIB, partitions=2)
    yield prefix, topics[0]
    delete_topics(kafka_env.brokers, topics)


def test_a_12_mb_router_replay_row_published_into_a_1_mib_topic_arrives_whole(kafka_env, mib_rows):
    prefix, topic = mib_rows
    row, small = big_row("g-moe"), good_row() | {"group_id": "g-small", "num_generations": 1, "row_index": 0, "group_index": 0}
    with RolloutPublisher(brokers=kafka_env.brokers, registry_url=kafka_env.registry_url, topic_prefix=prefix) as pub:
        assert pub.record_limit == MIB, "the limit is the topic's max.message.bytes, not the 64 MiB default"
        p_big = pub.publish_row(row)
        p_small = pub.publish_row(small)
        pub.end_batch("b1", 2)
        want = encoded(row, pub.schema_id)
        assert len(want) > 12 * 10**6
        s = pub.stats
        assert (s.rows, s.chunk_sets, s.failed) == (2, 1, 0) and s.chunks == -(-len(want) // pub._chunk_producer.budget(b"g-moe"))
    assert p_big == partition_for_key("g-moe", 2) and p_small == partition_for_key("g-small", 2)

    chunks = [m for m in raw_records(kafka_env.brokers, topic, p_big, "read_committed") if is_chunk(m.value())]
    assert len(chunks) == s.chunks and all(m.key() == b"g-moe" and len(m.value()) < MIB for m in chunks)

    got = {r.key: r for r in whole_records(topic, kafka_env.brokers) if r.key in ("g-moe", "g-small")}
    assert set(got) == {"g-moe", "g-small"}
    moe = got["g-moe"]
    assert bytes(moe.value) == want, "the reassembled row differs from what was published"
    assert moe.partition == p_big and moe.offset == chunks[0].offset() and moe.chunks == len(chunks)
    assert moe.next == chunks[-1].offset() + 1
    assert np.frombuffer(moe.value, np.uint8).ctypes.data % 64 == 0


CHILD = """
import sys
from rollout_stream import RolloutPublisher
sys.path.insert(0, {here!r})
from test_publisher_chunks_kafka import big_row
pub = RolloutPublisher(brokers={brokers!r}, registry_url={registry!r}, topic_prefix={prefix!r}, transactional_id={tid!r})
pub.publish_row(big_row("g-moe"))
print("published: the crash point did not fire")
"""


def test_a_publisher_sigkilled_inside_its_chunk_transaction_leaves_no_partial_row(kafka_env, mib_rows, tmp_path):
    prefix, topic = mib_rows
    tid = f"pytest-pub-{uuid.uuid4().hex[:8]}"
    code = CHILD.format(here=str(HERE), brokers=kafka_env.brokers, registry=kafka_env.registry_url, prefix=prefix, tid=tid)
    env = {**os.environ, "RS_CRASH_AT": "publisher.mid-set:3"}
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr[-3000:]
    p = partition_for_key("g-moe", 2)
    left = [m for m in raw_records(kafka_env.brokers, topic, p, "read_uncommitted") if is_chunk(m.value())]
    assert len(left) == 4, "the killed publisher's first four chunks are in the log, in its open transaction"

    # Restarted with the same transactional id, the publisher aborts that transaction at once and publishes again.
    row = big_row("g-moe")
    with RolloutPublisher(brokers=kafka_env.brokers, registry_url=kafka_env.registry_url, topic_prefix=prefix,
                          transactional_id=tid) as pub:
        pub.publish_row(row)
        pub.end_batch("b1", 1)
        want = encoded(row, pub.schema_id)
    rows = [r for r in whole_records(topic, kafka_env.brokers, offsets={p: 0}) if r.key == "g-moe"]
    assert len(rows) == 1 and bytes(rows[0].value) == want, "one whole row, the aborted chunks nowhere"
    assert rows[0].offset > left[-1].offset()

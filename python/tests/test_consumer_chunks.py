"""Chunk sets through a real broker into a trainer that dies mid set (integration).

Packed groups of ~3 MB go into a ``rollout.packed`` created with
``max.message.bytes`` = 1 MiB, each as a chunk set written in its own
transaction by the transactional chunk producer, with a small whole group
before them. A child trainer (chunk_consumer_child.py) SIGKILLs itself after
chunk k of the second set; restarted from its committed position it must hand
every group to ``put_samples`` exactly once, each whole (field hashes equal to
the packed values').
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
from builders import clean, routed_group, versioned_group
from chunk_consumer_child import field_hash
from chunk_topics import MIB, chunk_writer, delete_topics, make_topics
from kafka_helpers import produce

from rollout_stream.deserializer import PackedDeserializer
from rollout_stream.encode import encode_packed_value, load_packed_schema
from rollout_stream.registry import StaticResolver

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent


@pytest.fixture
def mib_topic(kafka_env, packed_schema_text):
    _, (topic,) = make_topics(kafka_env.brokers, ["rollout.packed"], max_message_bytes=MIB)
    schema_id = kafka_env.register(f"{topic}-value", packed_schema_text)
    yield topic, schema_id
    delete_topics(kafka_env.brokers, [topic])


def run_child(kafka_env, topic: str, group: str, log: Path, crash: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "KAFKA_BROKERS": kafka_env.brokers, "SCHEMA_REGISTRY_URL": kafka_env.registry_url,
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    env.pop("RS_CRASH_AT", None)
    if crash:
        env["RS_CRASH_AT"] = crash
    return subprocess.run([sys.executable, str(HERE / "chunk_consumer_child.py"), "--topic", topic, "--group", group,
                           "--log", str(log), "--idle", "15"], env=env, capture_output=True, text=True, timeout=180)


def test_a_consumer_sigkilled_mid_set_hands_each_group_to_put_samples_exactly_once_and_never_a_partial_one(
        kafka_env, mib_topic, tmp_path):
    topic, schema_id = mib_topic
    schema = load_packed_schema()
    small = clean(versioned_group("g-small", 11))
    bigs = [clean(routed_group(f"g-big-{i}", lengths=(3000 + 500 * i, 4000, 5000), layers=16, topk=8)) for i in range(3)]
    values = {r["group_id"]: encode_packed_value(r, schema_id, schema) for r in [small, *bigs]}
    assert all(len(values[r["group_id"]]) > 2 * MIB for r in bigs)

    produce(kafka_env.brokers, topic, [("g-small", values["g-small"], None, 0)])
    writer = chunk_writer(kafka_env.brokers, topic)
    assert writer.limit == MIB, "the limit comes from the topic's max.message.bytes"
    counts = [writer.send(r["group_id"].encode(), values[r["group_id"]], 0) for r in bigs]
    assert all(n >= 3 for n in counts), counts

    deser = PackedDeserializer(StaticResolver({schema_id: schema}), jagged="numpy")
    want = {g: field_hash(dict(deser.decode(v).fields)) for g, v in values.items()}

    log = tmp_path / "put_samples.jsonl"
    group = f"pytest-chunks-{uuid.uuid4().hex[:8]}"
    first = run_child(kafka_env, topic, group, log, crash="consumer.mid-set:1")
    assert first.returncode == -signal.SIGKILL, f"the child was to SIGKILL itself mid set:\n{first.stderr[-3000:]}"
    assert "RS_CRASH_AT consumer.mid-set:1" in first.stderr
    before = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["group"] for x in before] == ["g-small", "g-big-0"], "it died inside the second set, after the first"

    second = run_child(kafka_env, topic, group, log, crash=None)
    assert second.returncode == 0, second.stderr[-3000:]
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    assert Counter(x["group"] for x in calls) == {g: 1 for g in values}, calls
    for x in calls:
        assert x["hash"] == want[x["group"]], f"{x['group']} reached put_samples not equal to its packed value"
    # Committed past the last chunk (offsets also hold the transaction markers).
    done = json.loads(second.stdout.strip().splitlines()[-1])["done"]
    assert done[f"{topic}[0]"] >= 1 + sum(counts), done


def test_replay_and_inspect_reassemble_chunk_sets_and_a_range_starting_inside_one_leaves_it_out(kafka_env, mib_topic):
    from rollout_stream.cli import main
    from rollout_stream.replay_reader import ReplayStats, replay_records

    topic, schema_id = mib_topic
    schema = load_packed_schema()
    bigs = [clean(routed_group(f"g-big-{i}", lengths=(3000, 4000), layers=16, topk=8)) for i in range(2)]
    values = {r["group_id"]: encode_packed_value(r, schema_id, schema) for r in bigs}
    writer = chunk_writer(kafka_env.brokers, topic)
    counts = [writer.send(r["group_id"].encode(), values[r["group_id"]], 0) for r in bigs]
    deser = PackedDeserializer(StaticResolver({schema_id: schema}), jagged="numpy")
    want = {g: field_hash(dict(deser.decode(v).fields)) for g, v in values.items()}

    got = list(replay_records(topic, kafka_env.brokers, kafka_env.registry_url, jagged="numpy"))
    assert [(g.group.group_id, g.offset) for g in got] == [("g-big-0", 0), ("g-big-1", counts[0] + 1)]  # +1: the commit marker
    assert all(field_hash(dict(g.group.fields)) == want[g.group.group_id] for g in got)

    st = ReplayStats()
    late = list(replay_records(topic, kafka_env.brokers, kafka_env.registry_url, jagged="numpy", offsets={0: 1}, stats=st))
    assert [g.group.group_id for g in late] == ["g-big-1"] and st.skipped_incomplete == 1

    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["inspect", "--topic", topic, "--group", "g-big-1", "--brokers", kafka_env.brokers,
                   "--registry", kafka_env.registry_url, "--json", "--jagged", "numpy"])
    assert rc == 0 and json.loads(out.getvalue())["packed"]["group_id"] == "g-big-1"


def test_undecodable_and_incomplete_chunk_sets_become_dead_letters_the_large_one_chunked_itself(kafka_env, packed_schema_text):
    import fastavro

    from rollout_stream import PackedConsumer, feed
    from rollout_stream.chunks import split_into_chunks
    from rollout_stream.dead_letters import DEAD_LETTER_SCHEMA
    from rollout_stream.replay_reader import whole_records

    _, (topic, dlq) = make_topics(kafka_env.brokers, ["rollout.packed", "rollout.dead-letter"], max_message_bytes=MIB)
    try:
        schema_id = kafka_env.register(f"{topic}-value", packed_schema_text)
        schema = load_packed_schema()
        garbage = bytes([0]) + schema_id.to_bytes(4, "big") + os.urandom(3 * MIB)  # framed, but no PackedGroup
        writer = chunk_writer(kafka_env.brokers, topic)
        writer.send(b"g-garbage", garbage, 0)
        # A set whose second chunk never made it (a foreign writer's bug): chunk 2 follows chunk 0.
        broken = split_into_chunks(os.urandom(3000), 1024, b"b" * 16)
        produce(kafka_env.brokers, topic, [("g-broken", broken[0], None, 0), ("g-broken", broken[2], None, 0)], transactional=True)
        good = clean(versioned_group("g-good", 11))
        produce(kafka_env.brokers, topic, [("g-good", encode_packed_value(good, schema_id, schema), None, 0)])

        got = []
        with PackedConsumer(topic, f"pytest-dl-{uuid.uuid4().hex[:8]}", kafka_env.brokers, kafka_env.registry_url,
                            jagged="numpy", on_undecodable="dead-letter", dead_letter_topic=dlq, instance_id=False) as c:
            stats = feed(c, lambda ids, fields, tags: got.append(tags[0]["group_id"]), idle_timeout=8, poll_timeout=0.5)
        assert got == ["g-good"] and stats.dead_lettered == 2

        parsed = fastavro.parse_schema(DEAD_LETTER_SCHEMA)
        import io
        letters = {}
        for rec in whole_records(dlq, kafka_env.brokers):
            letters[rec.key] = (rec.chunks, fastavro.schemaless_reader(io.BytesIO(bytes(rec.value)[5:]), parsed))
        chunks_garbage, dl = letters["g-garbage"]
        assert chunks_garbage > 1, "a dead letter above the topic's limit is a chunk set"
        assert dl["reason"] == "undecodable" and dl["records"][0]["offset"] == 0 and dl["records"][0]["value"] == garbage
        _, dl = letters["g-broken"]
        assert dl["reason"] == "incomplete_record" and "inconsistent" in dl["message"] and dl["records"][0]["value"] is None
    finally:
        delete_topics(kafka_env.brokers, [topic, dlq])

"""SPEC §6.3 on the real broker: replaying chosen batches gives back what the consumer delivered, joining no group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from builders import versioned_group
from kafka_helpers import consumer_groups, group_state, headers_for, packed_value, produce
from rollout_stream import PackedConsumer, replay, replay_records
from rollout_stream.json_form import group_to_json

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent


def publish_batches(kafka_env, packed_schema, topic, schema_id, *, headers=True):
    """Batches step-0..step-3, 3 groups each, spread over 2 partitions (key order interleaved)."""
    recs = [versioned_group(f"s{b}-g{i}", 5, batch_id=f"step-{b}", lengths=(b + 1, i + 2)) for i in range(3) for b in range(4)]
    produce(kafka_env.brokers, topic,
            [(r["group_id"], packed_value(schema_id, packed_schema, r), headers_for(r) if headers else None, n % 2)
             for n, r in enumerate(recs)])
    return recs


def first_delivery(kafka_env, topic):
    """What a trainer's consumer delivered: {group_id: (partition, offset, JSON form)}."""
    seen = {}
    with PackedConsumer(topic, f"pytest-{uuid.uuid4().hex[:8]}", kafka_env.brokers, kafka_env.registry_url, jagged="numpy") as c:
        while len(seen) < 12:
            d = c.poll(5)
            assert d is not None, f"only {len(seen)} groups arrived"
            seen[d.group.group_id] = (d.partition, d.offset, group_to_json(d.group), d.group.batch_id)
            c.done([d])
    return seen


@pytest.mark.parametrize("headers", [True, False], ids=["headers", "no-headers"])
def test_two_chosen_batches_come_back_as_first_delivered_in_partition_offset_order_with_no_group(
    kafka_env, packed_topics, packed_schema, headers
):
    topic, schema_id = packed_topics(partitions=2)
    publish_batches(kafka_env, packed_schema, topic, schema_id, headers=headers)
    first = first_delivery(kafka_env, topic)

    got = []
    stats = replay(topic, lambda s, f, t: got.append((s, t)), to_jsonl=None, brokers=kafka_env.brokers,
                   registry_url=kafka_env.registry_url, batch_ids=["step-1", "step-2"], jagged="numpy")
    items = list(replay_records(topic, kafka_env.brokers, kafka_env.registry_url, batch_ids=["step-2", "step-1"], jagged="numpy"))

    want = sorted((p, o, g) for g, (p, o, _, b) in first.items() if b in ("step-1", "step-2"))
    assert {p for p, _, _ in want} == {0, 1}  # the two batches span both partitions
    assert [(i.partition, i.offset, i.group.group_id) for i in items] == want
    assert [group_to_json(i.group) for i in items] == [first[g][2] for _, _, g in want]
    assert [t[0]["group_id"] for _, t in got] == [g for _, _, g in want]
    assert stats.groups == 6 and stats.records == 12 and stats.ranges == {0: (0, 6), 1: (0, 6)}
    assert (stats.skipped_by_header, stats.skipped_decoded) == ((6, 0) if headers else (0, 6))
    # the admin API: the client's group.id was never joined or committed under, so no such group exists
    assert stats.client_group_id.startswith("rollout-stream-replay-")
    assert stats.client_group_id not in consumer_groups(kafka_env.brokers)
    assert group_state(kafka_env.brokers, stats.client_group_id) == ("DEAD", [])


def test_replay_by_offsets_and_by_time_range_stops_at_the_end_of_the_range(kafka_env, packed_topics, packed_schema):
    topic, schema_id = packed_topics(partitions=1)
    recs = [versioned_group(f"a{i}", 1, batch_id="early") for i in range(3)]
    produce(kafka_env.brokers, topic, [(r["group_id"], packed_value(schema_id, packed_schema, r), headers_for(r), 0) for r in recs])
    time.sleep(0.05)
    t_mid = int(time.time() * 1000)
    time.sleep(0.05)
    recs = [versioned_group(f"b{i}", 1, batch_id="late") for i in range(3)]
    produce(kafka_env.brokers, topic, [(r["group_id"], packed_value(schema_id, packed_schema, r), headers_for(r), 0) for r in recs])
    kw = dict(brokers=kafka_env.brokers, registry_url=kafka_env.registry_url, jagged="numpy")
    by_offsets = [i.group.group_id for i in replay_records(topic, offsets={0: (1, 4)}, **kw)]
    assert by_offsets == ["a1", "a2", "b0"]
    assert [i.group.group_id for i in replay_records(topic, from_time=t_mid, **kw)] == ["b0", "b1", "b2"]
    assert [i.group.group_id for i in replay_records(topic, to_time=t_mid, **kw)] == ["a0", "a1", "a2"]


def test_the_replay_command_writes_json_lines_or_calls_put_with_progress_and_a_summary(kafka_env, packed_topics, packed_schema, tmp_path):
    topic, schema_id = packed_topics(partitions=2)
    publish_batches(kafka_env, packed_schema, topic, schema_id)
    first = first_delivery(kafka_env, topic)
    want = sorted((p, o, g) for g, (p, o, _, b) in first.items() if b == "step-2")
    base = [sys.executable, "-m", "rollout_stream", "replay", "--topic", topic, "--batch", "step-2",
            "--brokers", kafka_env.brokers, "--registry", kafka_env.registry_url, "--jagged", "numpy"]
    out_file = tmp_path / "step-2.jsonl"
    run = subprocess.run(base + ["--to-jsonl", str(out_file)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(l) for l in out_file.read_text().splitlines()]
    assert lines == [first[g][2] for _, _, g in want]
    assert "partition 0: 6/6 records read" in run.stderr and "partition 1: 6/6 records read" in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("replayed 3 groups (")

    put_out = tmp_path / "put.jsonl"
    env = {**os.environ, "REPLAY_PUT_OUT": str(put_out), "PYTHONPATH": str(HERE)}
    run = subprocess.run(base + ["--put", "replay_put_target:put_samples", "--quiet"], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert [json.loads(l)["group_id"] for l in put_out.read_text().splitlines()] == [g for _, _, g in want]
    assert "records read" not in run.stderr and "replayed 3 groups" in run.stderr

    nothing = subprocess.run(base[:4] + ["--topic", topic], capture_output=True, text=True, timeout=60)
    assert nothing.returncode == 2 and "say what to replay" in nothing.stderr
    bad_put = subprocess.run(base + ["--put", "no_such_module_xyz:f"], capture_output=True, text=True, timeout=60)
    assert bad_put.returncode == 2 and "no_such_module_xyz" in bad_put.stderr

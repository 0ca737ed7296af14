"""The rollout-worker side end to end, on the real broker and registry (SPEC §2.1, §2.2).

NeMo-Gym results go in through the Python ``RolloutPublisher`` (batches 1–2)
and through ``./rollout-stream produce`` from a JSON-lines file (batches
3–4), each SIGKILLed mid-batch and run again on the same batch; the
TypeScript pipeline (``./rollout-stream run``) packs them; the packed
records must be, byte for byte, what ``./rollout-stream offline all`` makes
of the same lines, each group exactly once, with no dead letter, the
re-sent records counted as idempotent replays, and the Python consumer must
hand every group to ``put_samples`` once.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from rollout_stream import InvalidRowError, PackedConsumer, RolloutPublisher, feed
from rollout_stream.encode import encode_packed_value
from rollout_stream.framing import HEADER_SIZE
from rollout_stream.json_form import record_from_json

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = str(ROOT / "rollout-stream")
PUBLISH = str(Path(__file__).with_name("publish_lines.py"))
BATCHES, GROUPS, GENERATIONS = 4, 4, 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launcher(env: dict[str, str], *args: str, stdin: str | None = None, timeout: float = 180) -> str:
    out = subprocess.run([LAUNCHER, *args], env=env, input=stdin, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(args)} failed ({out.returncode}): {out.stderr[-3000:]}"
    return out.stdout


def split_batches(lines: list[str]) -> list[list[str]]:
    """The loadgen lines per batch, each batch ending with its batch_end line."""
    batches: list[list[str]] = [[]]
    for line in lines:
        batches[-1].append(line)
        if '"batch_end"' in line:
            batches.append([])
    return [b for b in batches if b]


def wait_for_line(proc: subprocess.Popen, pattern: str, timeout: float = 120) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"process exited (rc {proc.poll()}) before printing {pattern!r}")
        if re.search(pattern, line):
            return line
    raise AssertionError(f"no line matching {pattern!r} within {timeout} s")


def read_all(brokers: str, topic: str, want: int, timeout: float = 240) -> list[tuple[str, bytes]]:
    """Every record of ``topic`` (read_committed) once ``want`` have arrived and nothing more came for 3 s."""
    c = Consumer({"bootstrap.servers": brokers, "group.id": f"pytest-{uuid.uuid4().hex[:8]}", "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        parts = c.list_topics(topic, timeout=30).topics[topic].partitions
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        got: list[tuple[str, bytes]] = []
        deadline, quiet_since = time.time() + timeout, None
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                if len(got) >= want:
                    quiet_since = quiet_since or time.time()
                    if time.time() - quiet_since > 3:
                        break
                continue
            if m.error():
                continue
            quiet_since = None
            got.append((m.key().decode(), m.value()))
        return got
    finally:
        c.close()


def end_offsets(brokers: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": brokers, "group.id": f"pytest-{uuid.uuid4().hex[:8]}"})
    try:
        parts = c.list_topics(topic, timeout=30).topics[topic].partitions
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in sorted(parts)]
    finally:
        c.close()


def metric(port: int, name: str, labels: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and all(part in line for part in labels.split(",")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@contextlib.contextmanager
def running_pipeline(kafka_env, tmp_path: Path, tag: str, **extra_env: str):
    """A fresh topic prefix `<tag><uuid>.` with its topics, and ``./rollout-stream run`` on it (fused, all three
    stages); yields (env, prefix, config file)."""
    prefix = f"{tag}{uuid.uuid4().hex[:8]}."
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"accumulate": {"batch_end_grace_ms": 300}}))
    env = {
        **os.environ,
        "KAFKA_BROKERS": kafka_env.brokers,
        "SCHEMA_REGISTRY_URL": kafka_env.registry_url,
        "TOPIC_PREFIX": prefix,
        "ROLLOUT_STREAM_CONFIG": str(config),
        **extra_env,
    }
    launcher(env, "topics", "create")
    log = open(tmp_path / "run.log", "w")
    run = subprocess.Popen([LAUNCHER, "run"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield env, prefix, config
    finally:
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(30)
        except subprocess.TimeoutExpired:
            run.kill()
        log.close()
        print((tmp_path / "run.log").read_text()[-4000:], file=sys.stderr)


@pytest.fixture
def pipeline(kafka_env, tmp_path):
    """``running_pipeline`` with its metrics on a free port; yields (env, prefix, metrics port)."""
    port = free_port()
    with running_pipeline(kafka_env, tmp_path, "pypub", METRICS_PORT=str(port)) as (env, prefix, _config):
        yield env, prefix, port


def test_gym_results_from_both_publishers_survive_a_publisher_kill_and_pack_like_offline(kafka_env, pipeline, tmp_path):
    env, prefix, port = pipeline
    lines = launcher(
        env, "loadgen", "--format", "gym-result", "--dry-run", "--profile", "small", "--seed", "17", "--run-id", prefix.rstrip("."),
        "--batches", str(BATCHES), "--groups", str(GROUPS), "--generations", str(GENERATIONS),
    ).splitlines()
    batches = split_batches(lines)
    assert len(batches) == BATCHES and all(len(b) == GROUPS * GENERATIONS + 1 for b in batches)

    # Batches 1-2 through the Python publisher: killed after 5 acknowledged records of batch 1, then run again on both batches.
    py_lines = tmp_path / "python.jsonl"
    py_lines.write_text("\n".join(batches[0] + batches[1]) + "\n")
    child_env = {**env, "PYTHONUNBUFFERED": "1"}
    killed = subprocess.Popen([sys.executable, PUBLISH, str(py_lines), "--ack-each", "--delay", "0.05"], env=child_env, stdout=subprocess.PIPE, text=True)
    wait_for_line(killed, r"^acked 5$")
    killed.send_signal(signal.SIGKILL)
    killed.wait(30)
    subprocess.run([sys.executable, PUBLISH, str(py_lines)], env=child_env, check=True, timeout=300, stdout=subprocess.DEVNULL)

    # Batches 3-4 through `produce` from a JSON-lines file: killed after 7 lines of batch 3 reached it, then run again.
    produce_lines = "\n".join(batches[2] + batches[3]) + "\n"
    cut = subprocess.Popen([LAUNCHER, "produce", "--format", "gym-result", "--quiet"], env=env, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in batches[2][:7]:
        cut.stdin.write(line + "\n")
        cut.stdin.flush()
    time.sleep(3)  # sent and acknowledged (linger 5 ms), batch 3 unfinished
    cut.send_signal(signal.SIGKILL)
    cut.wait(30)
    launcher(env, "produce", "--format", "gym-result", stdin=produce_lines)

    offline = [json.loads(l) for l in launcher(env, "offline", "all", stdin="\n".join(lines) + "\n").splitlines()]
    expected = {o["packed"]["group_id"]: o["packed"] for o in offline if "packed" in o}
    assert len(expected) == BATCHES * GROUPS
    assert not [o for o in offline if "dead_letter" in o]

    packed = read_all(kafka_env.brokers, f"{prefix}rollout.packed", len(expected))
    keys = [k for k, _ in packed]
    assert sorted(keys) == sorted(expected), "every group exactly once"
    for key, value in packed:
        want = encode_packed_value(record_from_json(expected[key]), 0)
        assert value[HEADER_SIZE:] == want[HEADER_SIZE:], f"group {key} differs from offline all"
    dead = end_offsets(kafka_env.brokers, f"{prefix}rollout.dead-letter")
    assert dead == [0] * len(dead), f"dead letters per partition: {dead}"

    # Re-sent records were dropped as identical (produced_at differs): at least the acknowledged ones, at most one more each.
    replays = metric(port, "rollout_stream_events_total", 'event="idempotent_replays"')
    assert 5 + 7 <= replays <= 5 + 7 + 2, replays

    # The Python consumer hands each group to put_samples once.
    seen: list[str] = []
    with PackedConsumer(f"{prefix}rollout.packed", f"pytest-{uuid.uuid4().hex[:8]}", kafka_env.brokers, kafka_env.registry_url) as consumer:
        feed(consumer, lambda ids, fields, tags: seen.append(tags[0]["group_id"]), stop_after=len(expected), idle_timeout=60)
    assert sorted(seen) == sorted(expected)


def test_a_malformed_row_is_refused_before_anything_is_sent(kafka_env, pipeline):
    env, prefix, _ = pipeline
    topic = f"{prefix}rollout.row-completed"
    before = end_offsets(kafka_env.brokers, topic)
    ident = dict(batch_id="b", group_id="g", group_index=1, num_generations=2, prompt_idx=0, weight_version=0)
    gym_row = {"responses_create_params": {"input": "hi"}, "agent_ref": {"name": "agent"}}
    gym_result = {"reward": 1.0, "response": {"output": []}}
    with RolloutPublisher(brokers=kafka_env.brokers, registry_url=kafka_env.registry_url, topic_prefix=prefix) as pub:
        with pytest.raises(InvalidRowError) as e:
            pub.publish_result(gym_row, gym_result, row_index=5, **ident)  # group 1 of N=2 owns rows 2-3
        assert e.value.field == "row_index" and "row_index" in str(e.value)
        with pytest.raises(InvalidRowError) as e:
            pub.publish_result({**gym_row, "agent_ref": {}}, gym_result, row_index=2, **ident)
        assert "agent_ref" in e.value.field
        pub.flush()
    assert end_offsets(kafka_env.brokers, topic) == before

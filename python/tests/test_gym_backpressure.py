"""Backpressure of `collect` (issue 24 item 5): a trainer that stops consuming stalls collection at M groups.

NeMo-Gym's servers, the toy policy and `./rollout-stream run` as in
test_gym_collect.py (its fixtures). `collect --max-buffered-groups 2
--trainer-group G --concurrency 1` over 6 groups while G consumes nothing:
it publishes 2 groups' rows and then holds its next rollout, saying so in
its progress line; nothing more is published while G stays put. Then the
trainer consumes (slowly): collection resumes, never more than M groups
ahead of what G committed, and every group is packed once and reaches the
trainer; nothing dead-lettered.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid

import pytest

from rollout_stream import PackedConsumer, feed

from gym_env import gym_tasks
from test_gym_collect import GENERATIONS, pipeline  # noqa: F401 - fixture
from test_publisher_pipeline import end_offsets, read_all

pytestmark = pytest.mark.integration

M = 2
TASKS = 6


def test_a_trainer_that_stops_consuming_stalls_collection_at_m_groups_and_nothing_is_lost(kafka_env, gym, pipeline, tmp_path):
    head, _record, py = gym
    env, prefix, _ = pipeline
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in (gym_tasks() * (TASKS // 2))))
    batch, trainer = f"{prefix}bp", f"trainer-{uuid.uuid4().hex[:6]}"
    rows_topic, packed_topic = f"{prefix}rollout.row-completed", f"{prefix}rollout.packed"
    groups = [f"{batch}/g{t}" for t in range(TASKS)]

    proc = subprocess.Popen([py, "-m", "rollout_stream", "collect", "--tasks", str(tasks), "--generations", str(GENERATIONS),
                             "--batch-id", batch, "--head-server", head, "--concurrency", "1", "--summary-json",
                             "--max-buffered-groups", str(M), "--trainer-group", trainer],
                            env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        def published() -> int:
            return min(sum(end_offsets(kafka_env.brokers, rows_topic)), TASKS * GENERATIONS)

        # The trainer consumes nothing: M groups are published, packed, and then collection holds.
        deadline = time.time() + 60
        while time.time() < deadline and not (published() >= M * GENERATIONS and any("waiting for the trainer" in l for l in stderr)):
            time.sleep(0.2)
        assert any(f"waiting for the trainer: {M} groups buffered, max {M}" in l for l in stderr), "".join(stderr[-20:])
        time.sleep(3)
        assert published() == M * GENERATIONS, "published past M groups while the trainer consumed nothing"
        assert proc.poll() is None
        assert sorted(k for k, _ in read_all(kafka_env.brokers, packed_topic, M, timeout=30)) == groups[:M]

        # The trainer catches up, slowly: collection resumes, at most M groups ahead of what it committed.
        seen, ahead = [], []
        with PackedConsumer(packed_topic, trainer, kafka_env.brokers, kafka_env.registry_url, jagged="numpy") as consumer:
            def put(sample_ids, fields, tags):
                ahead.append(published() // GENERATIONS - len(seen))
                seen.append(tags[0]["group_id"])
                time.sleep(0.5)

            feed(consumer, put, stop_after=TASKS, idle_timeout=60)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    assert proc.returncode == 0, "".join(stderr[-20:])
    s = json.loads(out.strip().splitlines()[-1])
    assert s["published"] == TASKS * GENERATIONS and s["failed"] == 0, s
    assert s["waited_s"] >= 3, s
    assert sorted(seen) == groups, "the trainer gets every group once"
    assert max(ahead) <= M, ahead
    packed = read_all(kafka_env.brokers, packed_topic, TASKS, timeout=30)
    assert sorted(k for k, _ in packed) == groups, "every group packed once"
    assert sum(end_offsets(kafka_env.brokers, f"{prefix}rollout.dead-letter")) == 0

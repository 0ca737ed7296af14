"""NeMo-Gym itself drives the pipeline (SPEC §2.1, §2.3), on the real broker and registry.

NeMo-Gym's own servers from the PyPI package (head server, `vllm_model` with
token ids, `simple_agent` over the `example_single_tool_call` and the
`example_multi_step` resource servers; tools/gym/servers.py starts them on
127.0.0.1 without Ray) answer with a toy policy (tools/gym/toy_policy.py)
that records every prompt it tokenized and every token it generated.
`python -m rollout_stream collect` (in NeMo-Gym's venv, through NeMo-Gym's
own client) publishes the results; `./rollout-stream run` packs them; the
trainer's `PackedConsumer` + `feed` receives them. Checked: every group
once; every trainable turn's token ids and logprobs are exactly what the
policy generated, in order, with the token mask on exactly those
positions; the prompt tokens are what it tokenized; rewards are the
resource servers' verify rewards; the packed values equal `offline all` of
the published GymResults. Then: `collect` SIGKILLed in the middle of a batch
and run again (the policy samples, so a second run of a rollout would be a
different row): nothing lost, nothing duplicated; and a prompt the policy
always fails: its group is an `incomplete_group` dead letter naming the
missing rows, the other group of the batch is packed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import fastavro
import pytest

from rollout_stream import PackedConsumer, feed
from rollout_stream import row_completed_schema, row_json
from rollout_stream.encode import encode_packed_value
from rollout_stream.framing import HEADER_SIZE
from rollout_stream.json_form import record_from_json

from gym_env import FAIL_MARK, gym_tasks
from test_publisher_pipeline import end_offsets, launcher, read_all, running_pipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "gym"))
from ground_truth import PolicyRecord, check_group  # noqa: E402

pytestmark = pytest.mark.integration

GENERATIONS = 3


@pytest.fixture
def pipeline(kafka_env, tmp_path):
    with running_pipeline(kafka_env, tmp_path, "pygym") as running:
        yield running


def collect(py: str, env: dict, head: str, tasks: Path, batch: str, *extra: str, check: bool = True, backend: str = "nemo_gym") -> dict:
    out = subprocess.run([py, "-m", "rollout_stream", "collect", "--tasks", str(tasks), "--generations", str(GENERATIONS),
                          "--batch-id", batch, "--head-server", head, "--backend", backend, "--summary-json", "--quiet", *extra],
                         env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert out.returncode == 0, f"collect {batch} failed ({out.returncode}): {out.stderr[-3000:]}"
    return {"rc": out.returncode, "stderr": out.stderr, **json.loads(out.stdout.strip().splitlines()[-1])}


def published_results(brokers: str, topic: str) -> list[dict]:
    """The GymResult and BatchEnd records on row-completed, as `offline` input lines."""
    schema = row_completed_schema.parsed(row_completed_schema.load())
    lines = []
    for _key, value in read_all(brokers, topic, 1, timeout=60):
        import io

        ev = fastavro.schemaless_reader(io.BytesIO(value[HEADER_SIZE:]), schema)["event"]
        if "gym_row" in ev:
            line = {k: ev[k] for k in ("batch_id", "group_id", "group_index", "row_index", "num_generations",
                                       "prompt_idx", "task_index", "weight_version")}
            line["gym_row"], line["gym_result"] = json.loads(ev["gym_row"]), row_json.gym_result_object(ev, json_form=True)
            lines.append(line)
        elif "num_rows" in ev:
            lines.append({"batch_end": {"batch_id": ev["batch_id"], "num_rows": ev["num_rows"]}})
    return lines


def test_nemo_gym_rollouts_reach_the_trainer_exactly_as_the_policy_generated_them(kafka_env, gym, pipeline, tmp_path):
    head, record, py = gym
    env, prefix, config = pipeline
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in gym_tasks()))
    batches = [f"{prefix}b{i}" for i in (1, 2)]
    for b in batches:
        s = collect(py, env, head, tasks, b, "--weight-version", "3")
        assert s["published"] == 2 * GENERATIONS and s["failed"] == 0 and s["backend"] == "nemo_gym", s

    lines = published_results(kafka_env.brokers, f"{prefix}rollout.row-completed")
    gym_lines = [l for l in lines if "gym_row" in l]
    assert len(gym_lines) == 2 * 2 * GENERATIONS
    # Several turns with tool calls in every rollout, and reasoning items NeMo-Gym split off.
    for l in gym_lines:
        out = l["gym_result"]["response"]["output"]
        assert sum(1 for o in out if o.get("generation_token_ids")) >= 2
        assert any(o["type"] == "function_call" for o in out) and any(o["type"] == "reasoning" for o in out)
    rewards = {}
    for l in gym_lines:
        rewards[(l["group_id"], l["row_index"] % GENERATIONS)] = l["gym_result"]["reward"]
    assert {v for v in rewards.values()} <= {0.0, 1.0}

    offline = [json.loads(x) for x in launcher(env, "offline", "all", "--config", str(config),
                                               stdin="".join(json.dumps(l) + "\n" for l in lines)).splitlines()]
    expected = {o["packed"]["group_id"]: o["packed"] for o in offline if "packed" in o}
    assert len(expected) == 4 and not [o for o in offline if "dead_letter" in o]
    packed = read_all(kafka_env.brokers, f"{prefix}rollout.packed", len(expected))
    assert sorted(k for k, _ in packed) == sorted(expected), "every group exactly once"
    for key, value in packed:
        assert value[HEADER_SIZE:] == encode_packed_value(record_from_json(expected[key]), 0)[HEADER_SIZE:], key

    seen, checked, mismatches = [], 0, []
    truth = PolicyRecord(record)
    with PackedConsumer(f"{prefix}rollout.packed", f"trainer-{uuid.uuid4().hex[:6]}", kafka_env.brokers,
                        kafka_env.registry_url, jagged="numpy") as consumer:
        def put(sample_ids, fields, tags):
            nonlocal checked
            seen.append(tags[0]["group_id"])
            assert all(t["weight_version"] == 3 for t in tags)
            n, bad = check_group(fields, sample_ids, truth)
            checked += n
            mismatches.extend(bad)
            for r, t in enumerate(tags):
                assert float(fields["total_reward"][r]) == pytest.approx(rewards[(t["group_id"], r)]), sample_ids[r]
        feed(consumer, put, stop_after=len(expected), idle_timeout=60)
    assert sorted(seen) == sorted(expected)
    assert mismatches == [] and checked > 0


def test_a_killed_collect_run_again_loses_and_duplicates_nothing(kafka_env, gym, pipeline, tmp_path):
    head, record, py = gym
    env, prefix, _ = pipeline
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in gym_tasks()))
    batch = f"{prefix}crash"
    topic = f"{prefix}rollout.row-completed"
    # One rollout at a time, so the kill lands in the middle of the batch.
    started_ms = int(time.time() * 1000) - 1000
    killed = subprocess.Popen([py, "-m", "rollout_stream", "collect", "--tasks", str(tasks), "--generations", str(GENERATIONS),
                               "--batch-id", batch, "--head-server", head, "--concurrency", "1"],
                              env={**env, "PYTHONUNBUFFERED": "1"}, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while sum(end_offsets(kafka_env.brokers, topic)) < 2 and time.time() < deadline:
        time.sleep(0.1)
    killed.send_signal(signal.SIGKILL)
    killed.wait(30)
    first = sum(end_offsets(kafka_env.brokers, topic))
    assert 2 <= first < 2 * GENERATIONS, f"{first} records before the kill: not in the middle of the batch"

    # Read back from a time before the first run (the offsets-for-times path), as an operator would on a long topic.
    s = collect(py, env, head, tasks, batch, "--resume-since", str(started_ms))
    assert s["already_published"] >= 2 and s["already_published"] + s["published"] == 2 * GENERATIONS, s

    packed = read_all(kafka_env.brokers, f"{prefix}rollout.packed", 2)
    assert sorted(k for k, _ in packed) == [f"{batch}/g0", f"{batch}/g1"]
    assert sum(end_offsets(kafka_env.brokers, f"{prefix}rollout.dead-letter")) == 0, "no duplicate_row_index, nothing dead-lettered"


def test_a_rollout_that_keeps_failing_dead_letters_its_group_as_incomplete(kafka_env, gym, pipeline, tmp_path):
    head, _record, _py = gym
    env, prefix, _ = pipeline
    good, bad = gym_tasks()[0], json.loads(json.dumps(gym_tasks()[0]))
    bad["responses_create_params"]["input"][-1]["content"] += f" {FAIL_MARK}"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    batch = f"{prefix}fail"
    # From this suite's own Python (3.11 here, no nemo-gym): the plain-HTTP way to NeMo-Gym's agents.
    s = collect(sys.executable, env, head, tasks, batch, "--add-seed", check=False, backend="http")
    assert s["backend"] == "http"
    # Rollout 1 of the bad prompt (seed 1, batch row N + 1) fails all three attempts; its other rollouts succeed.
    assert s["rc"] == 1 and s["failed"] == 1 and s["published"] == 2 * GENERATIONS - 1 and s["retried"] == 2, s
    assert [(f["row_index"], f["group_id"], f["attempts"]) for f in s["failures"]] == [(GENERATIONS + 1, f"{batch}/g1", 3)]
    assert f"failed: row {GENERATIONS + 1}" in s["stderr"]

    packed = read_all(kafka_env.brokers, f"{prefix}rollout.packed", 1)
    assert [k for k, _ in packed] == [f"{batch}/g0"]
    dead = read_all(kafka_env.brokers, f"{prefix}rollout.dead-letter", 1)
    assert len(dead) == 1 and dead[0][0] == f"{batch}/g1"
    assert b"incomplete_group" in dead[0][1]
    # The dead letter names the row that never came; the others it carries, and nothing was published for it.
    assert f"missing [{GENERATIONS + 1}]".encode() in dead[0][1]

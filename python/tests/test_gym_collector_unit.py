"""The NeMo-Gym collector without servers or a broker: batch preparation, attempt rules, what gets published."""

from __future__ import annotations

import json

import pytest

from fake_producer import FakeProducer
from rollout_stream import RolloutPublisher
from rollout_stream.errors import InvalidRowError
from rollout_stream.gym import collector, prepare_rows
from rollout_stream.gym.published import row_identity
from rollout_stream.gym.rollouts import RolloutFailedError, Runner

TASK = {"responses_create_params": {"input": [{"role": "user", "content": "hi"}]}, "agent_ref": {"name": "agent_a"}}


def result(tokens: int = 3, reward: float = 1.0, **extra) -> dict:
    item = {
        "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}],
        "prompt_token_ids": [1, 2], "generation_token_ids": list(range(5, 5 + tokens)),
        "generation_log_probs": [-0.5] * tokens,
    }
    return {"response": {"output": [item]}, "reward": reward, **extra}


class ScriptedRunner(Runner):
    """Answers each batch row (by `_rowidx`) from a list of outcomes, one per attempt; the last repeats."""

    backend = "scripted"

    def __init__(self, script: dict[int, list]) -> None:
        self.script, self.calls = script, []

    async def run(self, row):
        i = row["_rowidx"]
        self.calls.append(i)
        outcomes = self.script.get(i, [result()])
        out = outcomes[min(self.calls.count(i) - 1, len(outcomes) - 1)]
        if isinstance(out, Exception):
            raise out
        return out


def run(monkeypatch, tasks, n, script, **kw):
    runner = ScriptedRunner(script)
    monkeypatch.setattr(collector, "open_runner", lambda *a, **k: runner)
    fake = FakeProducer(partitions=2)
    pub = RolloutPublisher(producer=fake, schema_id=7, topic_prefix="")
    summary = collector.collect(tasks, n, "b1", publisher=pub, resume=False, **kw)
    published = [row_identity(p.value) for p in fake.produced]
    return summary, [p for p in published if p is not None], runner


def test_prepare_rows_repeats_each_task_n_times_and_stamps_it_as_nemo_rl_does():
    tasks = [TASK, {**TASK, "_ng_task_index": 40, "agent_ref": None, "_rowidx": 99}]
    rows = prepare_rows(tasks, 2, agent="fallback")
    assert [r["_rowidx"] for r in rows] == [0, 1, 2, 3]
    assert [r["_ng_task_index"] for r in rows] == [0, 0, 40, 40]
    assert [r["_ng_rollout_index"] for r in rows] == [0, 1, 0, 1]
    assert [r["agent_ref"]["name"] for r in rows] == ["agent_a", "agent_a", "fallback", "fallback"]
    rows[0]["responses_create_params"]["input"].append("changed")
    assert rows[1]["responses_create_params"]["input"] == TASK["responses_create_params"]["input"], "copies are independent"


def test_prepare_rows_adds_the_rollout_index_as_seed_keeping_other_extra_body_keys():
    task = {**TASK, "responses_create_params": {"input": "x", "metadata": {"extra_body": json.dumps({"top_k": 5})}}}
    rows = prepare_rows([task], 3, add_seed=True)
    assert [json.loads(r["responses_create_params"]["metadata"]["extra_body"]) for r in rows] == [
        {"top_k": 5, "seed": 0}, {"top_k": 5, "seed": 1}, {"top_k": 5, "seed": 2}]
    assert "metadata" not in prepare_rows([TASK], 1)[0]["responses_create_params"]


@pytest.mark.parametrize(
    "task, field",
    [({"agent_ref": {"name": "a"}}, "tasks[0].responses_create_params"), ({"responses_create_params": {}}, "tasks[0].agent_ref"), ([1], "tasks[0]")],
)
def test_prepare_rows_refuses_a_task_it_cannot_send(task, field):
    with pytest.raises(InvalidRowError) as e:
        prepare_rows([task], 2)
    assert e.value.field == field


def test_every_result_is_published_with_its_rows_identity_and_the_batch_ends(monkeypatch):
    summary, published, _ = run(monkeypatch, [TASK, TASK], 2, {})
    assert summary.published == 4 and summary.failed == 0
    assert sorted(published) == [("b1", "b1/g0", 0), ("b1", "b1/g0", 1), ("b1", "b1/g1", 2), ("b1", "b1/g1", 3)]
    assert summary.bytes > 0


def test_a_failure_is_retried_and_a_rollout_that_keeps_failing_is_never_published(monkeypatch):
    boom = RolloutFailedError("agent answered HTTP 500")
    script = {1: [boom, result()], 2: [boom], 3: [result(_ng_failure_class="timeout")]}
    summary, published, runner = run(monkeypatch, [TASK, TASK], 2, script)
    assert sorted(i for _, _, i in published) == [0, 1]  # row 1 on its second attempt
    assert [(f.row_index, f.attempts) for f in sorted(summary.failures, key=lambda f: f.row_index)] == [(2, 3), (3, 3)]
    assert runner.calls.count(2) == 3 and summary.retried == 1 + 2 + 2
    assert "failure class 'timeout'" in [f for f in summary.failures if f.row_index == 3][0].error
    assert summary.empty_groups == ["b1/g1"], "a group with no row at all is reported: accumulate never sees it"


def test_a_terminal_failure_is_not_retried_and_the_attempts_follow_nemo_gyms_variable(monkeypatch):
    monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "5")
    script = {0: [result(_ng_failure_class="bad", _ng_failure_terminal=True)], 1: [RolloutFailedError("x")]}
    summary, published, runner = run(monkeypatch, [TASK], 2, script)
    assert published == [] and runner.calls.count(0) == 1 and runner.calls.count(1) == 5
    monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "0")
    with pytest.raises(InvalidRowError):
        collector.max_attempts_from_env()


def test_row_identity_reads_the_leading_fields_and_passes_batch_ends_over():
    fake = FakeProducer(partitions=1)
    pub = RolloutPublisher(producer=fake, schema_id=3, topic_prefix="")
    pub.publish_result({**TASK, "_rowidx": 5}, result(), batch_id="bé", group_id="bé/g2", group_index=2, row_index=5,
                       num_generations=2, prompt_idx=0, weight_version=1)
    pub.end_batch("bé", 6)
    assert [row_identity(p.value) for p in fake.produced] == [("bé", "bé/g2", 5), None]
    with pytest.raises(ValueError):
        row_identity(b"\x01rest")
    with pytest.raises(ValueError):
        row_identity(fake.produced[0].value[:12])  # cut inside the group id

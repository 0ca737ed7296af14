"""A malformed row or result fails in the worker, naming its field, and nothing reaches Kafka (SPEC §2.2)."""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

import numpy as np
import pytest
import torch

from fake_producer import FakeProducer
from rollout_stream import InvalidRowError, RolloutPublisher, RolloutStreamError


def good_row() -> dict[str, Any]:
    user = {"role": "user", "token_ids": [1, 2, 3], "content": "q"}
    return {
        "batch_id": "b1", "group_id": "g1", "group_index": 2, "row_index": 7, "num_generations": 3,
        "prompt_idx": 11, "weight_version": 4, "task_index": 1, "instance_label": "w", "timing": {"gen": 1.0},
        "produced_at": 1700000000000, "agent_ref": {"name": "math"}, "request": {"input": "q"},
        "input_message_log": [user],
        "message_log": [
            user,
            {"role": "assistant", "token_ids": [4, 5], "generation_logprobs": [-0.1, -0.2],
             "routed_experts": np.zeros((2, 2, 2), np.int16), "has_malformed_thinking": False,
             "is_invalid_tool_call": False, "content": "a", "media": {"img": np.zeros((1, 2), np.float32)}},
        ],
        "full_result": {"reward": 1.0},
    }


def good_result() -> tuple[dict, dict, dict]:
    gym_row = {"responses_create_params": {"input": "q"}, "agent_ref": {"name": "math"}}
    gym_result = {"response": {"output": [{"type": "message"}]}, "reward": 1.0}
    ident = {"batch_id": "b1", "group_id": "g1", "group_index": 0, "row_index": 0, "num_generations": 2,
             "prompt_idx": 1, "weight_version": 0}
    return gym_row, gym_result, ident


@pytest.fixture
def pub():
    fake = FakeProducer(partitions=2)
    p = RolloutPublisher(producer=fake, schema_id=1, topic_prefix="")
    p.fake = fake
    return p


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def mutate(r: dict) -> None:
        *parents, last = path.split(".")
        target: Any = r
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        if value is _DELETE:
            del target[last]
        else:
            target[int(last) if last.isdigit() else last] = value

    return mutate


_DELETE = object()

ROW_CASES = [
    # (mutation, field the error names, words the message has)
    (_set("row_index", _DELETE), "row_index", "missing"),
    (_set("row_index", "5"), "row_index", "integer"),
    (_set("row_index", 5.0), "row_index", "integer"),
    (_set("num_generations", 0), "num_generations", ">= 1"),
    (_set("group_index", -1), "group_index", "non-negative"),
    (_set("row_index", 9), "row_index", "outside [6, 9)"),
    (_set("row_index", 5 + 1 - 3 * 1), "row_index", "outside [6, 9)"),
    (_set("batch_id", ""), "batch_id", "non-empty string"),
    (_set("group_id", 7), "group_id", "string"),
    (_set("group_id", "bad\ud800"), "group_id", "lone surrogate"),
    (_set("prompt_idx", None), "prompt_idx", "missing"),
    (_set("prompt_idx", 2**53), "prompt_idx", "2**53"),
    (_set("task_index", "1"), "task_index", "integer"),
    (_set("agent_ref", _DELETE), "agent_ref", "missing"),
    (_set("agent_ref", ["math"]), "agent_ref", "JSON object"),
    (_set("agent_ref", {"id": 1}), "agent_ref.name", "string"),
    (_set("weight_version", True), "weight_version", "integer"),
    (_set("instance_label", 3), "instance_label", "string"),
    (_set("request", "q"), "request", "JSON object"),
    (_set("input_message_log", _DELETE), "input_message_log", "missing"),
    (_set("message_log", {"role": "user"}), "message_log", "list of messages"),
    (_set("message_log.1", "hi"), "message_log[1]", "message object"),
    (_set("message_log.1.role", None), "message_log[1].role", "not a string"),
    (_set("message_log.1.token_ids", _DELETE), "message_log[1].token_ids", "missing"),
    (_set("message_log.1.token_ids", [4.0, 5.0]), "message_log[1].token_ids", "integers"),
    (_set("message_log.1.token_ids", [True, False]), "message_log[1].token_ids", "integers"),
    (_set("message_log.1.token_ids", [[4, 5]]), "message_log[1].token_ids", "1-D"),
    (_set("message_log.1.token_ids", [4, 2**31]), "message_log[1].token_ids", "int32"),
    (_set("message_log.1.token_ids", torch.tensor([4.0, 5.0])), "message_log[1].token_ids", "integers"),
    (_set("message_log.1.token_ids", "4 5"), "message_log[1].token_ids", "torch tensor, numpy array or list"),
    (_set("message_log.1.generation_logprobs", [-0.1]), "message_log[1].generation_logprobs", "1 entries for 2 tokens"),
    (_set("message_log.1.generation_logprobs", ["NaN", "x"]), "message_log[1].generation_logprobs", "numbers"),
    (_set("message_log.1.routed_experts", np.zeros((2, 2), np.int16)), "message_log[1].routed_experts", "rank 2"),
    (_set("message_log.1.routed_experts", np.zeros((2, 2, 2), np.float32)), "message_log[1].routed_experts", "integers"),
    (_set("message_log.1.routed_experts", np.zeros((3, 2, 2), np.int16)), "message_log[1].routed_experts", "covers 3 tokens"),
    (_set("message_log.1.routed_experts", np.zeros((2, 2, 2), np.uint16)), "message_log[1].routed_experts", "uint16"),
    (_set("message_log.1.has_malformed_thinking", 0), "message_log[1].has_malformed_thinking", "boolean"),
    (_set("message_log.1.is_invalid_tool_call", "no"), "message_log[1].is_invalid_tool_call", "boolean"),
    (_set("message_log.1.content", ["a"]), "message_log[1].content", "string"),
    (_set("message_log.1.media", [1]), "message_log[1].media", "map"),
    (_set("message_log.1.media.img", torch.zeros(2, dtype=torch.float16)), "message_log[1].media.img", "half"),
    (_set("input_message_log.0.token_ids", np.zeros(2, np.float32)), "input_message_log[0].token_ids", "integers"),
    (_set("full_result", None), "full_result", "missing"),
    (_set("full_result", {"x": {1, 2}}), "full_result.x", "not JSON"),
    (_set("timing", [1.0]), "timing", "map"),
    (_set("timing", {"gen": "fast"}), "timing.gen", "number"),
    (_set("produced_at", 1.5), "produced_at", "integer"),
]


@pytest.mark.parametrize("mutate,field,words", ROW_CASES)
def test_a_bad_row_raises_invalid_row_error_naming_the_field_and_sends_nothing(pub, mutate, field, words):
    row = good_row()
    mutate(row)
    with pytest.raises(InvalidRowError) as e:
        pub.publish_row(row)
    assert e.value.field == field
    assert str(e.value).startswith(field) and words in str(e.value)
    assert isinstance(e.value, RolloutStreamError) and isinstance(e.value, ValueError) and e.value.code == "invalid_row"
    assert pub.fake.produced == [] and pub.stats.records == 0


def test_the_good_row_itself_is_sent(pub):
    pub.publish_row(good_row())
    assert len(pub.fake.produced) == 1


def test_nan_logprobs_are_not_a_publisher_error(pub):
    row = good_row()
    row["message_log"][1]["generation_logprobs"] = [math.nan, -0.2]
    pub.publish_row(row)  # accumulate dead-letters it as nan_logprobs, with the row in hand
    assert len(pub.fake.produced) == 1


def test_nemo_gym_names_are_accepted_for_request_and_task_index(pub):
    row = good_row()
    del row["request"], row["task_index"]
    row["responses_create_params"] = {"input": "q"}
    row["_ng_task_index"] = 1
    pub.publish_row(row)
    assert pub.fake.produced[0].value == _value_of(good_row())


def _value_of(row: dict) -> bytes:
    fake = FakeProducer(partitions=2)
    RolloutPublisher(producer=fake, schema_id=1, topic_prefix="").publish_row(row)
    return fake.produced[0].value


RESULT_CASES = [
    ("ident", "row_index", 2, "row_index", "outside [0, 2)"),
    ("ident", "num_generations", -2, "num_generations", ">= 1"),
    ("ident", "batch_id", None, "batch_id", "missing"),
    ("ident", "weight_version", 1.0, "weight_version", "integer"),
    ("ident", "timing", {"t": None}, "timing.t", "number"),
    ("row", None, ["not", "a", "dict"], "gym_row", "JSON object"),
    ("row", "agent_ref", {"name": None}, "gym_row.agent_ref.name", "string"),
    ("row", "responses_create_params", None, "gym_row.responses_create_params", "missing"),
    ("row", "_ng_task_index", "3", "gym_row._ng_task_index", "integer when present"),
    ("result", None, None, "gym_result", "missing"),
    ("result", "response", [], "gym_result.response", "object"),
    ("result", "response", {"output": {"type": "message"}}, "gym_result.response.output", "list"),
    ("result", "response", {"output": [{"x": b"bytes"}]}, "gym_result.response.output[0].x", "not JSON"),
]


@pytest.mark.parametrize("where,key,value,field,words", RESULT_CASES)
def test_a_bad_result_raises_invalid_row_error_naming_the_field_and_sends_nothing(pub, where, key, value, field, words):
    gym_row, gym_result, ident = good_result()
    target = {"ident": ident, "row": gym_row, "result": gym_result}[where]
    if key is None:
        gym_row, gym_result = (value, gym_result) if where == "row" else (gym_row, value)
    else:
        target[key] = value
    with pytest.raises(InvalidRowError) as e:
        pub.publish_result(gym_row, gym_result, **ident)
    assert e.value.field == field and words in str(e.value)
    assert pub.fake.produced == []


def test_the_task_rows_task_index_is_not_judged_when_the_identity_has_one(pub):
    gym_row, gym_result, ident = good_result()
    gym_row["_ng_task_index"] = "not read"  # ingest takes the line's task_index
    pub.publish_result(gym_row, gym_result, **ident, task_index=4)
    assert len(pub.fake.produced) == 1


def test_non_finite_floats_in_a_result_travel_as_strings_not_invalid_json(pub):
    gym_row, gym_result, ident = good_result()
    gym_result["reward"] = math.nan
    gym_result["scores"] = [math.inf, -math.inf]
    pub.publish_result(gym_row, gym_result, **ident)
    assert b'"reward":"NaN"' in pub.fake.produced[0].value
    assert b'"scores":["Infinity","-Infinity"]' in pub.fake.produced[0].value


@pytest.mark.parametrize("batch_id,num_rows,field", [("", 1, "batch_id"), ("b", -1, "num_rows"), ("b", "3", "num_rows")])
def test_a_bad_batch_end_is_refused_before_anything_is_sent(pub, batch_id, num_rows, field):
    with pytest.raises(InvalidRowError) as e:
        pub.end_batch(batch_id, num_rows)
    assert e.value.field == field and pub.fake.produced == []


def test_validation_does_not_change_the_callers_row(pub):
    row = good_row()
    before = copy.deepcopy(row)
    pub.publish_row(row)
    assert row.keys() == before.keys() and row["full_result"] == before["full_result"]

"""The JSON text of the JSON-typed fields: valid JSON of the same values, the same bytes for the same value.

The pipeline recognises a re-sent row by its decoded content (SPEC §3 rule
3), so the spelling is orjson's; what matters is that it reads back to the
values sent and that a re-send, in this process or another, is byte-identical.
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest
import torch

from conftest import REPO_ROOT
from fake_producer import FakeProducer
from rollout_stream import RolloutPublisher, json_text
from rollout_stream.errors import InvalidRowError

AWKWARD = {
    "reward": 1.0, "zero": -0.0, "small": 1e-05, "tiny": 1e-7, "big": 1e21, "huge_int": 2**63, "beyond_64_bits": 2**70,
    "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
    "scores": [1.5, float("nan"), 2], "ints": list(range(50)), "mixed": [1, "a", None, True, 2.5],
    "text": 'Prüfung 🚀 "q" \\ \t\n\x02 \u2028 日本語', "lone": "\ud800 lone",
    "numpy": {"f32": np.float32(0.1), "i64": np.int64(-3), "arr": np.arange(3), "nan_arr": np.asarray([np.nan, 1.0]),
              "bool": np.bool_(True)},
    "torch": torch.tensor([[1, 2], [3, 4]]), "tuple": (1, 2.5, None), 7: "an int key", "ordered": OrderedDict(b=1, a=2),
    "deep": {"a": [{"b": [{"c": float("inf")}]}]},
}
PLAIN = {
    "reward": 1.0, "zero": 0.0, "small": 1e-05, "tiny": 1e-7, "big": 1e21, "huge_int": 2**63, "beyond_64_bits": 2**70,
    "nan": "NaN", "inf": "Infinity", "-inf": "-Infinity",
    "scores": [1.5, "NaN", 2], "ints": list(range(50)), "mixed": [1, "a", None, True, 2.5],
    "text": 'Prüfung 🚀 "q" \\ \t\n\x02 \u2028 日本語', "lone": "\ud800 lone",
    "numpy": {"f32": float(np.float32(0.1)), "i64": -3, "arr": [0, 1, 2], "nan_arr": ["NaN", 1.0], "bool": True},
    "torch": [[1, 2], [3, 4]], "tuple": [1, 2.5, None], "7": "an int key", "ordered": {"b": 1, "a": 2},
    "deep": {"a": [{"b": [{"c": "Infinity"}]}]},
}


def test_the_text_reads_back_to_the_values_with_non_finite_numbers_as_strings():
    text = json_text.dumps(AWKWARD, "full_result")
    assert json.loads(text) == PLAIN
    assert math.copysign(1, json.loads(text)["zero"]) == -1  # -0.0 is kept (the digest reads it as 0)


def test_without_anything_odd_it_is_orjson_s_compact_text_in_the_dict_s_order():
    value = {"b": [1, 2.5, -1e-7], "a": {"x": "ü", "y": None}, "c": True}
    assert json_text.dumps(value) == b'{"b":[1,2.5,-1e-7],"a":{"x":"\xc3\xbc","y":null},"c":true}'


def test_the_caller_s_objects_are_not_changed():
    value = copy.deepcopy({k: v for k, v in AWKWARD.items() if k not in ("torch", "numpy")})
    before = repr(value)
    json_text.dumps(value)
    assert repr(value) == before


def test_the_same_value_gives_the_same_bytes_in_another_process():
    here = json_text.dumps({k: v for k, v in AWKWARD.items() if k != "torch"})
    code = ("import sys, pickle; from rollout_stream import json_text; "
            "sys.stdout.buffer.write(json_text.dumps(pickle.loads(sys.stdin.buffer.read())))")
    import pickle

    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps({k: v for k, v in AWKWARD.items() if k != "torch"}),
                             capture_output=True, check=True, cwd=REPO_ROOT,
                             env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO_ROOT / "python" / "src")})
        assert out.stdout == here


@pytest.mark.parametrize("value, path, what", [
    ({"x": {1, 2}}, "full_result.x", "is a set, which is not JSON"),
    ({"a": [1, {"b": b"raw"}]}, r"full_result.a\[1\].b", "is a bytes"),
    ({"a": [1.5, object()]}, r"full_result.a\[1\]", "is a object"),
])
def test_what_is_not_json_is_refused_naming_its_path(value, path, what):
    with pytest.raises(InvalidRowError, match=rf"^{path} {what}"):
        json_text.dumps(value, "full_result")


def test_a_cycle_is_refused():
    loop: dict = {"a": []}
    loop["a"].append(loop)
    with pytest.raises(InvalidRowError, match="circular reference"):
        json_text.dumps(loop, "full_result")


def _row() -> dict:
    msg = {"role": "user", "token_ids": [1, 2], "content": "hi"}
    return {"batch_id": "b", "group_id": "g", "group_index": 0, "row_index": 0, "num_generations": 1, "prompt_idx": 0,
            "weight_version": 0, "agent_ref": {"name": "a", "0": "first"}, "request": {"input": "\ud83d\ude00 pair"},
            "input_message_log": [msg], "message_log": [msg, {"role": "assistant", "token_ids": [3], "generation_logprobs": [-0.5]}],
            "full_result": {k: v for k, v in AWKWARD.items()}, "timing": {"generate": 0.5, 7: float("nan")}}


def _published(send) -> list[bytes]:
    fake = FakeProducer(partitions=1)
    with RolloutPublisher(producer=fake, schema_id=1, topic_prefix="") as pub:
        send(pub)
    return [p.value for p in fake.produced]


def test_a_re_sent_row_and_result_are_byte_identical():
    gym_row = {"responses_create_params": {"input": "q", "temperature": 1.0}, "agent_ref": {"name": "a"}}
    result = {"response": {"output": [{"generation_token_ids": [1], "generation_log_probs": [None], "x": 2**70}]},
              **{k: v for k, v in AWKWARD.items() if k != "torch"}}
    ident = {"batch_id": "b", "group_id": "g", "group_index": 0, "row_index": 0, "num_generations": 1, "prompt_idx": 0,
             "weight_version": 0}

    def send(pub):
        pub.publish_row(_row())
        pub.publish_result(gym_row, result, **ident)

    first = _published(send)
    assert len(first) == 2
    assert _published(send) == first
    result = copy.deepcopy(result)  # an equal object built again
    assert _published(send) == first

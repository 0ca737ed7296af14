"""Writes the Python side of the shared row-completed vectors: test/vectors/row-completed/py-<name>.*

Each vector is a value exactly as :class:`RolloutPublisher` sends it
(through a fake producer, schema id 1), built from Python values: torch
tensors, numpy arrays, plain lists, Python floats NaN/inf/-0.0/1e-05,
numpy scalars and integer-like keys inside the JSON fields. ``<name>.json``
is its SPEC §9 JSON form as the Python decoder reads it back.
``test/unit/row-completed-vectors.test.ts`` decodes them with avsc;
``test_row_completed_vectors.py`` checks that what this script builds
today says the same as these files. Run after an intended change::

    .venv/bin/python python/tests/make_py_vectors.py
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fake_producer import FakeProducer  # noqa: E402

from rollout_stream import RolloutPublisher, json_text, row_json  # noqa: E402

OUT = HERE.parents[1] / "test" / "vectors" / "row-completed"

TEXT = 'Prüfung 🚀 "q" \\ \t\n\x02 \u2028 日本語'
# Only JSON text can hold a lone surrogate (escaped as \ud800); a plain Avro string cannot.
JSON_TEXT = TEXT + " \ud800 lone, \ud83d\ude00 a pair held as two code points"


def _identity(row_index: int) -> dict:
    return {
        "batch_id": "py-batch-1",
        "group_id": "py-group/é-1",
        "group_index": 1,
        "row_index": row_index,
        "num_generations": 4,
        "prompt_idx": 77,
        "weight_version": 12,
    }


def _full_result() -> dict:
    # Insertion order on purpose: JavaScript lists "10" and "2" before "b".
    return {
        "b": 1.0,
        "10": -0.0,
        "2": 1e-05,
        "reward": np.float32(0.1),
        "reward_components": {"acc": 1e21, "len": float("nan"), "inf": float("inf"), "neg": float("-inf")},
        "tokens": np.arange(3, dtype=np.int64),
        "big": 2**63,
        "tuple": (1, 2.5, None, True),
        "text": JSON_TEXT,
        "response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}]},
        "made_by": "python",
    }


def _row(kind: str) -> dict:
    """One multi-turn row; ``kind`` picks the tensor form (torch / numpy / lists) and dtypes."""
    prompt = [151644, 872, 198, 2147483647, -2147483648]
    gen = [40, 1079, 264, 13]
    lp = [-0.5, -1.25e-05, float("nan"), -3.0]
    gen2 = [11, 12]
    lp2 = [-0.125, -7.0]
    if kind == "torch":
        t = torch
        tokens = t.tensor(prompt, dtype=t.int64)
        msg_gen = {
            "role": "assistant",
            "token_ids": t.tensor(gen, dtype=t.int64),
            "generation_logprobs": t.tensor(lp, dtype=t.float32),
            "routed_experts": t.arange(16, dtype=t.int16).reshape(4, 2, 2) - 8,
            "is_invalid_tool_call": False,
            "content": TEXT,
        }
        msg_tool = {
            "role": "user",
            "token_ids": t.tensor([5, 6], dtype=t.int32),
            "media": {"pixel_values": t.full((1, 2, 2), 0.5), "mask": t.tensor([True, False])},
        }
        msg_gen2 = {
            "role": "assistant",
            "token_ids": t.tensor(gen2),
            "generation_logprobs": t.tensor(lp2, dtype=t.bfloat16),  # exact in bf16; sent as float32
            "has_malformed_thinking": t.tensor(True).item(),
        }
    elif kind == "numpy":
        tokens = np.asarray(prompt, dtype=np.int32)
        msg_gen = {
            "role": "assistant",
            "token_ids": np.asarray(gen, dtype=np.uint16),
            "generation_logprobs": np.asarray(lp, dtype=np.float64),
            "routed_experts": np.arange(16, dtype=np.uint8).reshape(4, 2, 2),
            "is_invalid_tool_call": np.bool_(False),
            "content": TEXT,
        }
        msg_tool = {
            "role": "user",
            "token_ids": np.asarray([5, 6], dtype=np.int64),
            "media": {"pixel_values": np.full((1, 2, 2), 0.5, dtype=np.float64), "ids": np.asarray([2**40, -1], dtype=np.int64)},
        }
        msg_gen2 = {
            "role": "assistant",
            "token_ids": np.asarray(gen2, dtype=np.int64),
            "generation_logprobs": np.asarray(lp2, dtype=np.float32),
            "has_malformed_thinking": True,
        }
    else:
        tokens = list(prompt)
        msg_gen = {
            "role": "assistant",
            "token_ids": list(gen),
            "generation_logprobs": list(lp),
            "routed_experts": [[[i * 4 + j * 2 + k - 8 for k in range(2)] for j in range(2)] for i in range(4)],
            "is_invalid_tool_call": False,
            "content": TEXT,
        }
        msg_tool = {"role": "user", "token_ids": [5, 6], "media": {"pixel_values": [[[0.5, 0.5], [0.5, 0.5]]]}}
        msg_gen2 = {"role": "assistant", "token_ids": list(gen2), "generation_logprobs": list(lp2), "has_malformed_thinking": True}
    user = {"role": "user", "token_ids": tokens, "content": "Wie geht's?"}
    return {
        **_identity({"torch": 4, "numpy": 5, "lists": 6}[kind]),
        "task_index": 3,
        "instance_label": "py-actor",
        "agent_ref": {"name": "py-agent", "0": "first"},
        "responses_create_params": {"input": [{"role": "user", "content": "Wie geht's?"}], "max_output_tokens": 64},
        "input_message_log": [user],
        "message_log": [user, msg_gen, msg_tool, msg_gen2],
        "full_result": _full_result(),
        "timing": {"generate": 0.25, "7": 1, "nan": math.nan},
        "produced_at": 1717171717171,
        "ignored_key": "not in the schema, not sent",
    }


def _gym() -> tuple[dict, dict, dict]:
    request = {"input": [{"role": "user", "content": "Σ of 1e-7 and 2?"}], "max_output_tokens": 128, "temperature": 1.0}
    gym_row = {"responses_create_params": request, "agent_ref": {"name": "py-gym-agent"}, "_ng_task_index": 8, "_rowidx": 7}
    gym_result = {
        "reward": 0.0,
        "response": {
            "output": [
                {
                    "type": "message",
                    "content": [{"type": "output_text", "text": JSON_TEXT}],
                    "prompt_token_ids": [1, 2, 3],
                    "generation_token_ids": np.asarray([4, 5], dtype=np.int32),
                    "generation_log_probs": [-0.5, float("nan")],
                    "routed_experts": "nrlre1:int16:5x1x1:AQACAAMABAAFAA==",
                }
            ]
        },
        "responses_create_params": request,
        "scores": {"2": 2.0, "1": 1e-7, "z": -1e16},
    }
    ident = {**_identity(7), "task_index": None, "timing": None, "produced_at": None}
    return gym_row, gym_result, ident


def build() -> dict[str, tuple[bytes, str]]:
    """``{name: (framed value, JSON line)}`` of every Python vector."""
    fake = FakeProducer(partitions=3)
    pub = RolloutPublisher(producer=fake, schema_id=1, topic_prefix="")
    names = []
    for kind in ("torch", "numpy", "lists"):
        pub.publish_row(_row(kind))
        names.append(f"py-row-{kind}")
    gym_row, gym_result, ident = _gym()
    pub.publish_result(gym_row, gym_result, **ident)
    names.append("py-gym-result")
    pub.end_batch("py-batch-1", 8)
    names.append("py-batch-end")
    pub.close()
    values = [p.value for p in fake.produced[: len(names)]]
    out = {}
    for name, value in zip(names, values):
        kind, _, record = row_json.decode(value)
        out[name] = (value, json_text.dumps(row_json.to_json(kind, record)).decode("utf-8") + "\n")
    return out


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (value, text) in build().items():
        (OUT / f"{name}.avro").write_bytes(value)
        (OUT / f"{name}.json").write_text(text, encoding="utf-8")
        print(f"wrote {OUT / name}.avro ({len(value)} bytes) and .json")


if __name__ == "__main__":
    main()

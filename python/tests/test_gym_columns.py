"""GymResult version 2 (SPEC §2.1): each output item's numbers as binary columns, put back on reading.

Encoded by the publisher, decoded with fastavro and assembled, a result is
the ``gym_result`` it was; what fails a column's rule stays in the JSON text
exactly as before; entries are in item order and name their item; a re-send
gives the same bytes.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import random
from typing import Any

import numpy as np
import pytest

from fake_producer import FakeProducer
from rollout_stream import RolloutPublisher, gym_columns, row_encoder, row_input, row_json
from rollout_stream.errors import DecodeError

GYM_ROW = {"responses_create_params": {"input": [{"role": "user", "content": "q"}]}, "agent_ref": {"name": "agent"}}
IDENT = {"batch_id": "b1", "group_id": "g1", "group_index": 0, "row_index": 1, "num_generations": 2, "prompt_idx": 3,
         "weight_version": 4}
INT32 = np.iinfo(np.int32)
ROUTE_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (INT32.min, INT32.max)}


def envelope(dtype: str, arr: np.ndarray) -> str:
    s, l, k = arr.shape
    return f"nrlre1:{dtype}:{s}x{l}x{k}:{base64.b64encode(arr.astype(f'<{np.dtype(dtype).str[1:]}').tobytes()).decode()}"


def generated_result(seed: int) -> dict[str, Any]:
    """A multi-turn NeMo-Gym result: reasoning, tool calls, function outputs, several trainable turns."""
    rng = random.Random(seed)
    form = ("envelope", "lists", None)[seed % 3]
    dtype = ("int8", "int16", "int32")[seed % 3 if form == "envelope" else 2]
    output: list[Any] = []
    seen: list[int] = []
    for turn in range(rng.randint(1, 4)):
        prompt = seen + [rng.randint(INT32.min, INT32.max) for _ in range(rng.randint(0 if turn else 1, 40))]
        gen = [rng.choice([0, 1, INT32.min, INT32.max, rng.randint(0, 150000)]) for _ in range(rng.randint(1, 60))]
        lp = [rng.choice([-rng.random() * 20, 0.0, -0.0, -1e-300, -5e-324, float("nan"), float("-inf"), -3]) for _ in gen]
        if rng.random() < 0.5:
            output.append({"type": "reasoning", "id": f"rs_{turn}", "summary": [{"type": "summary_text", "text": "<think>x"}]})
        item: dict[str, Any] = {"type": "function_call" if turn % 2 else "message", "id": f"it_{turn}", "status": "completed"}
        if turn % 2:
            item.update(name="tool", arguments=json.dumps({"x": turn, "y": "ü"}), call_id=f"c{turn}")
        else:
            item["content"] = [{"type": "output_text", "text": f"turn {turn} ✓ \"q\"", "annotations": []}]
        item.update(prompt_token_ids=prompt, generation_token_ids=gen, generation_log_probs=lp)
        if form is not None:
            lo, hi = ROUTE_RANGE[dtype]
            n = len(prompt) + len(gen)
            arr = np.asarray([rng.randint(lo, hi) for _ in range(n * 2 * 3)], dtype=np.int64).reshape(n, 2, 3)
            item["routed_experts"] = envelope(dtype, arr) if form == "envelope" else arr.tolist()
        output.append(item)
        if turn % 2:
            output.append({"type": "function_call_output", "call_id": f"c{turn}", "output": "{\"ok\": true}"})
        seen = prompt + gen
    return {"response": {"id": "resp", "output": output, "usage": {"input_tokens": 3}}, "reward": rng.choice([0.0, 1.0]),
            "responses_create_params": GYM_ROW["responses_create_params"]}


def publish(gym_result: Any, gym_row: Any = GYM_ROW) -> bytes:
    fake = FakeProducer(partitions=1)
    with RolloutPublisher(producer=fake, schema_id=1, topic_prefix="") as pub:
        pub.publish_result(gym_row, gym_result, **IDENT)
    return fake.produced[0].value


def decoded(value: bytes) -> dict[str, Any]:
    kind, _, record = row_json.decode(value)
    assert kind == "gym_result"
    return record


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (bit for bit), -0.0 only equal to -0.0, int and float told apart only by value."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and (
            np.float64(a).tobytes() == np.float64(b).tobytes() or (math.isnan(a) and math.isnan(b)))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def moved(record: dict[str, Any]) -> dict[int, set[str]]:
    return {c["item"]: {k for k in gym_columns.KEYS if c[k] is not None} for c in record["columns"]}


@pytest.mark.parametrize("seed", range(12))
def test_a_generated_result_comes_back_as_it_was_with_its_numbers_as_columns(seed):
    result = generated_result(seed)
    original = copy.deepcopy(result)
    record = decoded(publish(result))
    assert same(result, original), "the publisher changed the caller's object"
    assert same(row_json.gym_result_object(record), original)
    trainable = {i for i, o in enumerate(original["response"]["output"]) if "generation_token_ids" in o}
    assert set(moved(record)) == trainable
    for i in trainable:
        assert moved(record)[i] == {k for k in gym_columns.KEYS if k in original["response"]["output"][i]}
    text = json.loads(record["gym_result"])
    for i, item in enumerate(text["response"]["output"]):  # the JSON keeps everything else, in its order
        assert list(item) == [k for k in original["response"]["output"][i] if k not in gym_columns.KEYS]
    forms = {c["routed_experts"]["form"] for c in record["columns"] if c["routed_experts"]}
    assert forms == ({"envelope"}, {"lists"}, set())[seed % 3]


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32"])
def test_an_envelope_keeps_its_dtype_and_bytes(dtype):
    lo, hi = ROUTE_RANGE[dtype]
    arr = np.asarray([lo, hi, 0, -1, 1, 7] * 3, dtype=np.int64).reshape(3, 3, 2)
    env = envelope(dtype, arr)
    result = {"response": {"output": [{"generation_token_ids": [1, 2], "routed_experts": env}]}}
    routes = decoded(publish(result))["columns"][0]["routed_experts"]
    assert routes == {"form": "envelope", "dtype": dtype, "shape": [3, 3, 2], "data": base64.b64decode(env.split(":")[3])}
    assert row_json.gym_result_object(decoded(publish(result)))["response"]["output"][0]["routed_experts"] == env


def test_lists_routes_are_an_int32_tensor_and_come_back_as_nested_lists():
    routes = [[[INT32.min, 1], [2, 3]], [[4, 5], [6, INT32.max]]]
    result = {"response": {"output": [{"routed_experts": routes}]}}
    record = decoded(publish(result))
    assert record["columns"][0]["routed_experts"] == {
        "form": "lists", "dtype": "int32", "shape": [2, 2, 2], "data": np.asarray(routes, "<i4").tobytes()}
    assert row_json.gym_result_object(record)["response"]["output"][0]["routed_experts"] == routes


def test_torch_tensors_travel_as_the_lists_they_stand_for():
    import torch

    result = {"response": {"output": [{"generation_token_ids": torch.tensor([3, 4]), "generation_log_probs": torch.tensor([-0.5, -1.0]),
                                       "routed_experts": torch.arange(8, dtype=torch.int16).reshape(2, 2, 2)}]}}
    record = decoded(publish(result))
    assert moved(record) == {0: {"generation_token_ids", "generation_log_probs", "routed_experts"}}
    assert row_json.gym_result_object(record)["response"]["output"][0] == {
        "generation_token_ids": [3, 4], "generation_log_probs": [-0.5, -1.0], "routed_experts": np.arange(8).reshape(2, 2, 2).tolist()}


def test_numpy_values_travel_as_the_lists_they_stand_for():
    result = {"response": {"output": [{
        "prompt_token_ids": np.asarray([1, 2], np.int64), "generation_token_ids": [np.int32(3), np.uint16(4)],
        "generation_log_probs": np.asarray([-0.5, np.nan], np.float32), "routed_experts": np.arange(8, dtype=np.uint8).reshape(2, 2, 2)}]}}
    got = row_json.gym_result_object(decoded(publish(result)))["response"]["output"][0]
    assert got["prompt_token_ids"] == [1, 2] and got["generation_token_ids"] == [3, 4]
    assert got["generation_log_probs"][0] == -0.5 and math.isnan(got["generation_log_probs"][1])
    assert got["routed_experts"] == np.arange(8).reshape(2, 2, 2).tolist()
    assert set(moved(decoded(publish(result)))[0]) == set(gym_columns.KEYS)


FALLBACKS = {
    "token id 2**31": ("generation_token_ids", [1, 2**31]),
    "token id below int32": ("prompt_token_ids", [-(2**31) - 1]),
    "True among token ids": ("generation_token_ids", [5, True]),
    "a float token id": ("prompt_token_ids", [1, 2.0]),
    "a None token id": ("prompt_token_ids", [1, None]),
    "token ids as a string": ("prompt_token_ids", "1,2"),
    "a None logprob": ("generation_log_probs", [-0.5, None]),
    "True among logprobs": ("generation_log_probs", [-0.5, True]),
    "a string logprob": ("generation_log_probs", [-0.5, "NaN"]),
    "nested logprobs": ("generation_log_probs", [[-0.5]]),
    "logprobs as an object": ("generation_log_probs", {"0": -0.5}),
    "an unpadded envelope": ("routed_experts", "nrlre1:int8:5x1x1:AQIDBAU"),
    "an envelope with a newline": ("routed_experts", "nrlre1:int8:5x1x1:AQIDBAU=\n"),
    "an envelope with non-canonical bits": ("routed_experts", "nrlre1:int8:5x1x1:AQIDBAV="),
    "an envelope too short for its shape": ("routed_experts", "nrlre1:int16:5x1x1:AQIDBAU="),
    "an envelope with a leading zero": ("routed_experts", "nrlre1:int8:05x1x1:AQIDBAU="),
    "an envelope with a bad dtype": ("routed_experts", "nrlre1:uint8:5x1x1:AQIDBAU="),
    "an envelope of another magic": ("routed_experts", "nrlre2:int8:5x1x1:AQIDBAU="),
    "an envelope of two dims": ("routed_experts", "nrlre1:int8:5x1:AQIDBAU="),
    "ragged lists": ("routed_experts", [[[1, 2]], [[3]]]),
    "lists of rank 2": ("routed_experts", [[1, 2], [3, 4]]),
    "lists with an empty dim": ("routed_experts", [[[]]]),
    "lists with a bool": ("routed_experts", [[[1, False]]]),
    "lists beyond int32": ("routed_experts", [[[2**31]]]),
    "routes as a number": ("routed_experts", 7),
}


@pytest.mark.parametrize("case", FALLBACKS)
def test_a_value_that_fails_its_rule_stays_in_the_json_and_the_rest_still_moves(case):
    key, value = FALLBACKS[case]
    item = {"type": "message", "prompt_token_ids": [1], "generation_token_ids": [2], "generation_log_probs": [-1.0],
            "routed_experts": [[[3]], [[4]]]}
    item[key] = value
    result = {"response": {"output": [item]}, "reward": 1.0}
    record = decoded(publish(copy.deepcopy(result)))
    assert moved(record) == {0: set(gym_columns.KEYS) - {key}}
    in_json = json.loads(record["gym_result"])["response"]["output"][0]
    assert list(in_json) == ["type", key]
    want = {"response": {"output": [item]}, "reward": 1.0}
    assert same(row_json.gym_result_object(record), json.loads(json.dumps(want)))


def test_null_values_and_items_without_numbers_have_no_entry():
    result = {"response": {"output": [{"type": "message", "routed_experts": None, "generation_token_ids": None}]}}
    record = decoded(publish(result))
    assert record["columns"] == []
    assert json.loads(record["gym_result"]) == result


def test_entries_follow_item_order_and_name_their_items():
    output = ["a string item", {"type": "message", "content": []}, {"generation_token_ids": [1]}, None, [1, 2],
              {"generation_log_probs": [-1.5]}, {"routed_experts": "nrlre1:int8:1x1x1:Bw=="}, {"prompt_token_ids": []}]
    record = decoded(publish({"response": {"output": output}}))
    assert [c["item"] for c in record["columns"]] == [2, 5, 6, 7]
    assert moved(record) == {2: {"generation_token_ids"}, 5: {"generation_log_probs"}, 6: {"routed_experts"},
                             7: {"prompt_token_ids"}}
    assert record["columns"][3]["prompt_token_ids"] == b""  # an empty list moves
    assert json.loads(record["gym_result"])["response"]["output"] == ["a string item", {"type": "message", "content": []},
                                                                       {}, None, [1, 2], {}, {}, {}]
    assert row_json.gym_result_object(record)["response"]["output"] == output


def test_the_hand_written_bytes_are_what_fastavro_writes():
    import io

    import fastavro

    from rollout_stream import row_completed_schema

    value = publish(generated_result(1))
    schema = row_completed_schema.parsed(row_completed_schema.load())
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, {"event": ("dev.rolloutstream.v1.GymResult", decoded(value))})
    assert buf.getvalue() == value[5:]


@pytest.mark.parametrize("seed", range(4))
def test_a_re_send_gives_byte_identical_records(seed):
    result = generated_result(seed)
    first = publish(result)
    assert publish(result) == first
    assert publish(copy.deepcopy(result)) == first  # an equal object built again
    assert publish(json.loads(json.dumps(result, allow_nan=True))) == first  # ... or read back from JSON


def _record(columns: list[dict], output: list | None = None) -> dict:
    full = {"item": 0, "prompt_token_ids": None, "generation_token_ids": None, "generation_log_probs": None,
            "routed_experts": None}
    return {"gym_result": json.dumps({"response": {"output": output if output is not None else [{"type": "message"}]}}),
            "columns": [{**full, **c} for c in columns]}


@pytest.mark.parametrize("columns, output, message", [
    ([{"generation_token_ids": b"\x01\x00\x00"}], None, r"output\[0\]\.generation_token_ids has 3 bytes"),
    ([{"generation_log_probs": b"\x00" * 12}], None, r"output\[0\]\.generation_log_probs has 12 bytes"),
    ([{"item": 1, "prompt_token_ids": b""}], None, r"output\[1\] is not an object"),
    ([{"prompt_token_ids": b""}], ["text"], r"output\[0\] is not an object"),
    ([{"prompt_token_ids": b""}], [{"prompt_token_ids": [1]}], r"output\[0\]\.prompt_token_ids is both in the JSON"),
    ([{"routed_experts": {"form": "lists", "dtype": "int32", "shape": [1, 1, 2], "data": b"\x00" * 4}}], None,
     r"output\[0\]\.routed_experts has 4 bytes for shape \[1, 1, 2\]"),
    ([{"routed_experts": {"form": "envelope", "dtype": "int64", "shape": [1, 1, 1], "data": b"\x00" * 8}}], None,
     r"output\[0\]\.routed_experts has dtype 'int64'"),
])
def test_columns_that_do_not_fit_the_json_are_a_decode_error_naming_the_field(columns, output, message):
    with pytest.raises(DecodeError, match=message):
        row_json.gym_result_object(_record(columns, output))


def test_a_version_1_record_without_columns_reads_as_its_json():
    assert row_json.gym_result_object({"gym_result": '{"response":{"output":[{"generation_token_ids":[1]}]}}', "columns": None}) == {
        "response": {"output": [{"generation_token_ids": [1]}]}}
    assert row_json.gym_result_object({"gym_result": '{"a":1}'}) == {"a": 1}


def test_the_json_form_spells_non_finite_logprobs_as_strings():
    result = {"response": {"output": [{"generation_log_probs": [-0.5, float("nan"), float("inf"), float("-inf")]}]}}
    kind, _, record = row_json.decode(publish(result))
    lp = row_json.to_json(kind, record)["gym_result"]["response"]["output"][0]["generation_log_probs"]
    assert lp == [-0.5, "NaN", "Infinity", "-Infinity"]


def test_wire_values_keep_the_column_bytes_exact():
    wire = row_input.gym_result(GYM_ROW, {"response": {"output": [{"generation_log_probs": [-0.1, 2**60, -0.0]}]}},
                                row_input.identity(**IDENT))
    assert wire.columns[0].generation_log_probs == np.asarray([-0.1, float(2**60), -0.0], "<f8").tobytes()
    assert row_encoder.encode(wire, 1) == publish({"response": {"output": [{"generation_log_probs": [-0.1, 2**60, -0.0]}]}})


def _envelope_by_definition(s: str) -> bytes | None:
    """The contract's envelope rule spelled out: parse, decode leniently, and the text must re-render exactly."""
    try:
        magic, dtype, dims, payload = s.split(":", 3)
        shape = [int(d) for d in dims.split("x")]
        data = base64.b64decode(payload)
    except ValueError:  # binascii.Error is a ValueError
        return None
    if magic != "nrlre1" or dtype not in gym_columns.ROUTE_ITEMSIZE or len(shape) != 3:
        return None
    if len(data) != math.prod(shape) * gym_columns.ROUTE_ITEMSIZE[dtype]:
        return None
    return data if f"nrlre1:{dtype}:{shape[0]}x{shape[1]}x{shape[2]}:{base64.b64encode(data).decode()}" == s else None


@pytest.mark.parametrize("decoder", ["pybase64", "binascii strict", "binascii and compare"])
def test_envelopes_move_exactly_when_they_re_render_byte_for_byte(decoder, monkeypatch):
    if decoder != "pybase64":
        monkeypatch.setattr(gym_columns, "pybase64", None)
    elif gym_columns.pybase64 is None:
        pytest.skip("pybase64 is not installed")
    if decoder == "binascii and compare":
        monkeypatch.setattr(gym_columns, "_STRICT", False)
    elif decoder == "binascii strict" and not gym_columns._STRICT:
        pytest.skip("binascii's strict mode needs Python 3.11")
    rng = random.Random(27)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n -_:x0é"
    moved_count = 0
    for _ in range(4000):
        dtype = rng.choice(["int8", "int16", "int32"])
        s, k = rng.randint(0, 4), rng.randint(1, 2)
        data = bytes(rng.randrange(256) for _ in range(s * k * gym_columns.ROUTE_ITEMSIZE[dtype]))
        text = list(f"nrlre1:{dtype}:{s}x1x{k}:{base64.b64encode(data).decode()}")
        for _ in range(rng.randint(0, 2)):  # a few random edits anywhere
            at = rng.randrange(len(text) + 1)
            edit = rng.random()
            if edit < 0.4 and at < len(text):
                text[at] = rng.choice(alphabet)
            elif edit < 0.7:
                text.insert(at, rng.choice(alphabet))
            elif at < len(text):
                del text[at]
        text = "".join(text)
        got, want = gym_columns.routes(text), _envelope_by_definition(text)
        assert (got.data if got else None) == want, text
        moved_count += got is not None
    assert 1000 < moved_count < 3000  # both outcomes were exercised

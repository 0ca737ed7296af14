"""The orjson path of js_json (js_json_fast): JSON.stringify's exact text, or None and the exact path.

Every comparison is against ``dumps_exact``, the reference walk (itself
checked against Node's JSON.stringify in test_js_json.py); each test also
asserts the fast path was taken where it should be, so a fast path that
always gives up cannot pass.
"""

from __future__ import annotations

import math
import random
import struct
from collections import OrderedDict

import numpy as np
import pytest

from rollout_stream import js_json, js_json_fast
from rollout_stream.js_json import dumps, dumps_exact, dumps_parts


def fast(value) -> str | None:
    out = js_json_fast.dumps_utf8(value)
    return None if out is None else out.decode("utf-8")


def test_javascript_spellings_orjson_gets_wrong_are_repaired_in_lists_and_scalars():
    values = [1.0, -0.0, 0.0, 1.5e-6, -1e-6, 9.5e-6, 1e-5, 5e-7, 1e16, -1.5e20, 1e21, 2.0**53, 123.0, -0.5, 2**53 + 2, 2**63]
    # node -e 'console.log(JSON.stringify([1, -0, 0, 1.5e-6, ...]))' (2**53+2 and 2**63 as doubles)
    expected = (
        "[1,0,0,0.0000015,-0.000001,0.0000095,0.00001,5e-7,10000000000000000,-150000000000000000000,1e+21,"
        "9007199254740992,123,-0.5,9007199254740994,9223372036854776000]"
    )
    assert fast(values) == expected
    assert fast({"v": values, "x": 1.0, "y": -0.0, "z": 2.5e-6, "w": 3e16, "big": 2**63}) == (
        '{"v":' + expected + ',"x":1,"y":0,"z":0.0000025,"w":30000000000000000,"big":9223372036854776000}'
    )


def test_nan_and_infinities_become_the_json_form_strings_in_place():
    lp = [-0.5] * 40 + [math.nan, -0.25, math.inf, -math.inf, -1.0]
    assert fast({"lp": lp, "r": math.nan}) == (
        '{"lp":[' + "-0.5," * 40 + '"NaN",-0.25,"Infinity","-Infinity",-1],"r":"NaN"}'
    )


def _number(rng: random.Random):
    c = rng.random()
    if c < 0.2:
        return struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]  # any double, NaN included
    if c < 0.45:
        return rng.uniform(-10, 10) * 10.0 ** rng.randint(-9, 23)
    if c < 0.55:
        return float(rng.randint(-1000, 1000)) * 10.0 ** rng.randint(0, 22)  # integral floats of every size
    if c < 0.65:
        return rng.choice([0.0, -0.0, 1.0, -1.0, 1e-6, 9.999999999999999e-06, 1e-5, 1e16, 1e20, 1e21, 2.0**53, math.inf, -math.inf])
    if c < 0.75:
        return rng.choice([rng.randint(-100, 100), 2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, rng.randint(-(2**60), 2**60)])
    if c < 0.8:
        return rng.choice([True, False])
    # logprob-like: float32 values widened, many near zero
    return struct.unpack("<f", struct.pack("<f", -rng.random() * 10.0 ** -rng.randint(0, 8)))[0]


@pytest.mark.parametrize("length", [3, 40, 700])
def test_random_number_lists_match_the_reference_and_take_the_fast_path(length):
    rng = random.Random(length)
    taken = 0
    for _ in range(1500 if length < 100 else 150):
        items = [_number(rng) for _ in range(rng.randint(1, length))]
        if rng.random() < 0.4:  # all-float lists, as logprobs are
            items = [float(x) if type(x) is int and abs(x) < 2**53 else x for x in items]
        if rng.random() < 0.2:  # all-int lists, as token ids are
            items = [rng.randint(0, 200_000) for _ in items] + [rng.choice([5, 2**53 + 1, -(2**60)])]
        value = {"output": [{"lp": items, "first": items[0]}]}
        got = fast(value)
        want = dumps_exact(value)
        if got is not None:
            taken += 1
            assert got == want, items
        assert dumps(value) == want
    assert taken > 0.95 * (1500 if length < 100 else 150)


def test_a_float_among_token_ids_is_not_taken_for_an_integer():
    ids = list(range(30)) + [2.0, -0.0, 0.5] + list(range(30))
    assert fast(ids) == "[" + ",".join(map(str, range(30))) + ",2,0,0.5," + ",".join(map(str, range(30))) + "]"
    for odd in ([None, 1], ["7", 1], [[1], 1], [True, 1], [math.nan, 1], [math.inf, 1], [{"b": 1, "10": 2}, 1], [[{"3": 1, "1": 0}], 1]):
        items = list(range(30)) + odd
        assert dumps(items) == dumps_exact(items)
        assert fast(items) in (None, dumps_exact(items))


def test_integer_lists_beyond_two_to_the_53_are_spelled_as_doubles():
    ids = list(range(100)) + [2**53 + 1, -(2**53) - 3, 10**17 + 1]
    assert fast(ids) == dumps_exact(ids)
    assert fast(ids).endswith(",9007199254740992,-9007199254740996,100000000000000000]")
    assert fast([2**64, 1.5]) is None and dumps([2**64, 1.5]) == "[18446744073709552000,1.5]"  # orjson refuses > 64 bits


def test_nested_integer_lists_routed_experts_shape_take_one_piece():
    rng = np.random.default_rng(0)
    routes = rng.integers(0, 128, size=(300, 8, 4)).tolist()
    value = {"routed_experts": routes, "n": 1}
    parts = js_json_fast.dumps_parts(value)
    assert parts is not None and len(parts) == 3  # skeleton head, the routes' own piece, skeleton tail
    assert b"".join(parts).decode() == dumps_exact(value)
    for odd in ([[1, 2**60], [3, 4]], [[1.0, 2], [3, 4]], [[1, None]], [[True, 1]], [[1, "2"]], [[]]):
        assert dumps(odd) == dumps_exact(odd)


def test_long_number_lists_stay_their_own_pieces_between_the_skeleton_parts():
    value = {"a": "x\x01y", "ids": list(range(500)), "s": "\x01", "lp": [-0.125] * 300}
    parts = js_json_fast.dumps_parts(value)
    assert parts is not None and len(parts) == 5
    assert parts[1] == js_json_fast.orjson.dumps(list(range(500)))
    assert b"".join(parts).decode() == dumps_exact(value)  # "\x01" in strings is escaped, never a mark


def test_strings_are_escaped_exactly_like_json_stringify():
    s = "".join(chr(c) for c in range(0x80)) + "é€😀\u2028\u2029\ufeff\U0010ffff"
    assert fast({"s": s, s: [s]}) == dumps_exact({"s": s, s: [s]})


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "10": 2},  # integer-like key: JavaScript puts it first
        {1: "int key"},
        {"s": "lone \ud800 surrogate"},
        {"x": np.float32(0.1)},
        {"x": np.arange(3)},
        OrderedDict(a=1),
        {"d": OrderedDict(a=1.0)},
    ],
)
def test_what_orjson_cannot_prove_goes_to_the_exact_path(value):
    assert js_json_fast.dumps_utf8(value) is None
    assert dumps(value) == dumps_exact(value)
    assert b"".join(dumps_parts(value)).decode() == dumps_exact(value)


def test_deep_nesting_is_left_to_the_exact_path_or_written_right():
    deep: dict = {}
    for _ in range(300):
        deep = {"a": deep}
    assert js_json_fast.dumps_utf8(deep) is None  # deeper than orjson goes
    assert dumps(deep) == '{"a":' * 300 + "{}" + "}" * 300
    nest: list = []
    for _ in range(300):
        nest = [nest]
    assert fast(nest) in (None, "[" * 301 + "]" * 301) and dumps(nest) == "[" * 301 + "]" * 301


def test_without_orjson_the_exact_path_writes_the_same_text(monkeypatch):
    value = {"lp": [-0.5, 1.0, 1.5e-6, math.nan] * 20, "ids": list(range(40))}
    want = dumps(value)
    monkeypatch.setattr(js_json_fast, "orjson", None)
    assert js_json_fast.dumps_parts(value) is None
    assert dumps(value) == want and dumps_parts(value) == [want.encode()]


def test_a_realistic_gym_result_is_written_by_the_fast_path(gym_result_value):
    parts = js_json_fast.dumps_parts(gym_result_value)
    assert parts is not None and len(parts) > 3
    assert b"".join(parts) == dumps_exact(gym_result_value).encode("utf-8") == js_json.dumps_utf8(gym_result_value)


@pytest.fixture
def gym_result_value():
    rng = random.Random(3)
    prompt = [rng.randint(0, 150_000) for _ in range(200)]
    gen = [rng.randint(0, 150_000) for _ in range(300)]
    lp = [struct.unpack("<f", struct.pack("<f", -rng.random() * 10.0 ** -rng.randint(0, 7)))[0] for _ in gen]
    lp[5], lp[9] = 0.0, -0.0
    return {
        "reward": 1.0,
        "response": {
            "id": "resp_1",
            "output": [
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think \"hard\"\n"}]},
                {
                    "type": "message",
                    "content": [{"type": "output_text", "text": "<tool_call>x</tool_call>"}],
                    "prompt_token_ids": prompt,
                    "generation_token_ids": gen,
                    "generation_log_probs": lp,
                },
            ],
            "usage": {"input_tokens": 200, "output_tokens": 300},
            "incomplete_details": None,
        },
        "responses_create_params": {"temperature": 1.0, "top_p": 0.95, "input": [{"role": "user", "content": "hi"}]},
    }

"""JSON text spelled exactly as JavaScript's JSON.stringify writes it (expected strings come from Node)."""

from __future__ import annotations

import math
import random
import struct

import numpy as np
import pytest
import torch

from rollout_stream.errors import InvalidRowError
from rollout_stream.js_json import dumps, dumps_exact, js_number


def test_numbers_are_spelled_as_javascript_spells_them():
    values = [1.0, 1.5, -0.0, 0.1 + 0.2, 1e-5, 1e-6, 1e-7, 1.5e-10, 1e16, 1.5e16, 1e20, 1e21, 2.0**53, 2**53 + 2, 2**63,
              5e-324, 1.7976931348623157e308, -1.2e-5, 123456789.125, 100]
    # node -e 'console.log(JSON.stringify([1, 1.5, -0, 0.1+0.2, 1e-5, ...]))'
    assert dumps(values) == (
        "[1,1.5,0,0.30000000000000004,0.00001,0.000001,1e-7,1.5e-10,10000000000000000,15000000000000000,"
        "100000000000000000000,1e+21,9007199254740992,9007199254740994,9223372036854776000,5e-324,"
        "1.7976931348623157e+308,-0.000012,123456789.125,100]"
    )


def test_keys_follow_javascript_property_order():
    d = {"b": 1, "10": 2, "2": 3, "a": 4, "01": 5, "-1": 6, "4294967295": 7, "4294967294": 8}
    assert dumps(d) == '{"2":3,"10":2,"4294967294":8,"b":1,"a":4,"01":5,"-1":6,"4294967295":7}'


def test_int_keys_are_their_decimal_text_and_a_later_duplicate_overwrites_in_place():
    assert dumps({"x": 0, 3: "int", "3": "str", 1: True}) == '{"1":true,"3":"str","x":0}'


def test_strings_escape_only_what_json_stringify_escapes():
    s = 'q"b\\ \b\f\n\r\t\x00\x1f\x7f\u2028 é😀'
    assert dumps(s) == '"q\\"b\\\\ \\b\\f\\n\\r\\t\\u0000\\u001f\x7f\u2028 é😀"'


def test_a_lone_surrogate_is_escaped_and_a_pair_held_as_two_code_points_is_one_character():
    assert dumps("\ud800x\udc00\ud83d\ude00") == '"\\ud800x\\udc00😀"'
    assert dumps("\ud800x\udc00\ud83d\ude00").encode("utf-8")  # always valid UTF-8


def test_non_finite_floats_become_the_json_form_strings():
    assert dumps({"a": math.nan, "b": [math.inf, -math.inf]}) == '{"a":"NaN","b":["Infinity","-Infinity"]}'


def test_number_spellings_inside_strings_are_left_alone():
    text = 'the value 1.0 and 1e-05 and NaN and 12345678901234567890, "1.0"'
    assert dumps({"t": text, "n": 1.0}) == '{"t":"the value 1.0 and 1e-05 and NaN and 12345678901234567890, \\"1.0\\"","n":1}'


def test_numpy_and_torch_values_are_written_as_their_python_numbers():
    value = {"f32": np.float32(0.1), "i64": np.int64(7), "b": np.bool_(True), "arr": np.arange(3), "t": torch.tensor([1.5, 2.0])}
    assert dumps(value) == '{"f32":0.10000000149011612,"i64":7,"b":true,"arr":[0,1,2],"t":[1.5,2]}'


@pytest.mark.parametrize(
    "value,field",
    [({"a": {"b": {1, 2}}}, "request.a.b"), ({"a": [0, b"raw"]}, "request.a[1]"), ({"k": 10**400}, "request.k")],
)
def test_what_is_not_json_is_an_invalid_row_error_naming_its_path(value, field):
    with pytest.raises(InvalidRowError) as e:
        dumps(value, "request")
    assert e.value.field == field and str(e.value).startswith(field)


def test_a_circular_reference_is_an_error_not_a_hang():
    d: dict = {"a": []}
    d["a"].append(d)
    with pytest.raises(InvalidRowError, match="request.a"):
        dumps(d, "request")


def test_js_number_matches_ecmascript_layout_rules_at_every_boundary():
    assert [js_number(x) for x in (1e-6, 9.99e-7, 1e21, 9.99e20, 123e-20, 0.5)] == [
        "0.000001", "9.99e-7", "1e+21", "999000000000000000000", "1.23e-18", "0.5"
    ]


def _random_value(rng: random.Random, depth: int = 0):
    alphabet = ['a', '"', '\\', '\n', '\x00', '\x7f', 'é', '😀', '\ud800', '\udc00', '1', ' ']
    r = rng.random()
    if depth > 3 or r < 0.55:
        c = rng.random()
        if c < 0.3:
            return struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if c < 0.45:
            return rng.uniform(-10, 10) * 10.0 ** rng.randint(-12, 25)
        if c < 0.6:
            return rng.choice([rng.randint(-100, 100), rng.randint(-(2**70), 2**70), 2**53 + 1, -0.0, 1.0])
        if c < 0.85:
            return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))
        return rng.choice([True, False, None])
    if r < 0.75:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["a", "b", "0", "7", "10", "01", "-1", "x y", 3, "true"]
    return {rng.choice(keys): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def test_the_fast_path_and_the_reference_walk_agree_on_random_values():
    # Both were also compared with Node's JSON.stringify on 20k such values while writing them.
    rng = random.Random(20261201)
    for _ in range(3000):
        v = _random_value(rng)
        assert dumps(v) == dumps_exact(v), repr(v)

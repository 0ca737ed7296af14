"""Shared row-completed vectors: the Python publisher writes what TypeScript's say, and the reverse.

``test/vectors/row-completed/<name>.avro`` is a framed value written by avsc
(``test/unit/row-completed-vectors.test.ts``), ``<name>.json`` its SPEC §9
JSON form. Here the JSON goes through the publisher's validation and
encoder and must give a value with the .avro's content (the pipeline
recognises a row by its decoded content, so the JSON spelling and a
GymResult's version may differ); the .avro, decoded with fastavro, must give
the .json's values back. ``py-<name>.*`` were written by
``make_py_vectors.py``; what that script builds today must say the same
(the TypeScript test decodes them). A vector written before GymResult
version 2 is decoded with version 1's schema.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import make_py_vectors
from conftest import REPO_ROOT
from rollout_stream import row_encoder, row_json
from vector_content import assert_same, content

VECTORS = REPO_ROOT / "test" / "vectors" / "row-completed"
TS_NAMES = ["row-multi-turn", "row-minimal", "gym-result", "gym-result-v2", "gym-result-v2-routes", "batch-end"]


@pytest.mark.parametrize("name", TS_NAMES)
def test_the_python_encoder_writes_the_typescript_vectors_content_from_the_json(name):
    obj = json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8"))
    expected = (VECTORS / f"{name}.avro").read_bytes()
    got = row_encoder.encode(row_json.wire_from_json(obj), 1)
    assert_same(content(got), content(expected))


@pytest.mark.parametrize("name", TS_NAMES)
def test_fastavro_decodes_the_typescript_bytes_to_the_json(name):
    obj = json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8"))
    value = (VECTORS / f"{name}.avro").read_bytes()
    assert value[1:5] == b"\x00\x00\x00\x01"
    assert_same(content(value), obj)


def test_the_decoded_tensors_are_the_json_values_not_just_the_same_text():
    kind, _, record = row_json.decode((VECTORS / "row-multi-turn.avro").read_bytes())
    obj = json.loads((VECTORS / "row-multi-turn.json").read_text(encoding="utf-8"))
    gen = record["message_log"][1]
    lp = np.frombuffer(gen["generation_logprobs"], "<f4")
    want = np.asarray([{"NaN": np.nan, "-Infinity": -np.inf}.get(v, v) for v in obj["message_log"][1]["generation_logprobs"]], np.float32)
    assert kind == "row" and np.array_equal(lp, want, equal_nan=True)
    routes = gen["routed_experts"]
    assert routes["dtype"] == "int16" and routes["shape"] == [7, 2, 2]
    assert np.frombuffer(routes["data"], "<i2").tolist() == obj["message_log"][1]["routed_experts"]["values"]
    assert json.loads(record["full_result"]) == obj["full_result"]


def test_the_vectors_cover_the_awkward_cases():
    text = (VECTORS / "row-multi-turn.avro").read_bytes().decode("latin1")
    for spelling in ("1e+21", "0.00001", "1e-7", "9007199254740994", "\\ud800"):
        assert spelling in text


@pytest.fixture(scope="module")
def built():
    return make_py_vectors.build()


def test_the_python_vectors_are_all_checked_in(built):
    assert sorted(built) == sorted(p.stem for p in VECTORS.glob("py-*.avro"))


@pytest.mark.parametrize("name", ["py-row-torch", "py-row-numpy", "py-row-lists", "py-gym-result", "py-batch-end"])
def test_the_checked_in_python_vectors_say_what_the_publisher_sends_today(built, name):
    value, text = built[name]
    assert_same(content(value), content((VECTORS / f"{name}.avro").read_bytes()))
    assert_same(json.loads(text), json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8")))
    # and the JSON description publishes the same content again
    assert_same(content(row_encoder.encode(row_json.wire_from_json(json.loads(text)), 1)), json.loads(text))


@pytest.mark.parametrize("name", ["gym-result-v2", "gym-result-v2-routes"])
def test_the_python_encoder_writes_the_typescript_columns_exactly(name):
    obj = json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8"))
    _, _, ours = row_json.decode(row_encoder.encode(row_json.wire_from_json(obj), 1))
    _, _, theirs = row_json.decode((VECTORS / f"{name}.avro").read_bytes())
    assert theirs["columns"], f"{name} has no columns"
    assert ours["columns"] == theirs["columns"]  # the same values moved, in the same entries, with the same bytes

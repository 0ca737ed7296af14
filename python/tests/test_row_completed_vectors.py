"""Shared row-completed vectors: the Python publisher writes TypeScript's bytes, and the reverse.

``test/vectors/row-completed/<name>.avro`` is a framed value written by avsc
(``test/unit/row-completed-vectors.test.ts``), ``<name>.json`` its SPEC §9
JSON form. Here the JSON goes through the publisher's validation and
encoder and must give the .avro byte for byte; the .avro, decoded with
fastavro, must give the .json text back. ``py-<name>.*`` are written by
``make_py_vectors.py``; they must still be what that script builds (the
TypeScript test decodes them and re-encodes them to the same bytes).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import make_py_vectors
from conftest import REPO_ROOT
from rollout_stream import js_json, row_encoder, row_json

VECTORS = REPO_ROOT / "test" / "vectors" / "row-completed"
TS_NAMES = ["row-multi-turn", "row-minimal", "gym-result", "batch-end"]


@pytest.mark.parametrize("name", TS_NAMES)
def test_the_python_encoder_reproduces_the_typescript_bytes_from_the_json(name):
    obj = json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8"))
    expected = (VECTORS / f"{name}.avro").read_bytes()
    got = row_encoder.encode(row_json.wire_from_json(obj), 1)
    if got != expected:
        at = next((i for i in range(min(len(got), len(expected))) if got[i] != expected[i]), min(len(got), len(expected)))
        pytest.fail(f"{name}: first difference at byte {at}: ours {got[at - 16:at + 24]!r}, avsc {expected[at - 16:at + 24]!r}")


@pytest.mark.parametrize("name", TS_NAMES)
def test_fastavro_decodes_the_typescript_bytes_to_the_json(name):
    text = (VECTORS / f"{name}.json").read_text(encoding="utf-8")
    kind, schema_id, record = row_json.decode((VECTORS / f"{name}.avro").read_bytes())
    assert schema_id == 1
    assert js_json.dumps(row_json.to_json(kind, record)) + "\n" == text


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
def test_the_checked_in_python_vectors_are_what_the_publisher_sends_today(built, name):
    value, text = built[name]
    assert (VECTORS / f"{name}.avro").read_bytes() == value, f"{name}.avro changed: rerun python/tests/make_py_vectors.py"
    assert (VECTORS / f"{name}.json").read_text(encoding="utf-8") == text
    # and the JSON description publishes to the same bytes again
    assert row_encoder.encode(row_json.wire_from_json(json.loads(text)), 1) == value

"""Shared test vectors: TypeScript-packed bytes decode to exactly their JSON form.

For every ``test/vectors/<name>.avro`` (a full Confluent-framed value written
by the TypeScript packer) with its ``<name>.json`` (the SPEC §9 JSON form
``{"packed": {...}}``), the Avro body is decoded with ``test/vectors/packed.avsc``
(or ``schemas/packed.avsc``; the frame's schema id is ignored) and every
field, dtype, offset, shape, value and tag is compared with the JSON.

Until the TypeScript side has written vectors (no ``test/vectors/`` folder),
one vector is built here from a JSON form, so the comparison itself stays
tested. A ``test/vectors/`` folder without any pair fails loudly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT
from rollout_stream import JaggedArray, decode_packed_body, frame
from rollout_stream.encode import encode_packed_body, load_packed_schema
from rollout_stream.json_form import field_from_json, record_from_json, tags_from_json

VECTORS = REPO_ROOT / "test" / "vectors"

# A built-in vector in the JSON form: narrow-wire token ids and masks, NaN and
# infinities, an empty row, routed experts, a media field and an object field.
BUILTIN = {
    "packed": {
        "group_id": "vec-g",
        "batch_id": "vec-b",
        "sample_ids": ["vec-g_g0", "vec-g_g1", "vec-g_g2"],
        "tags": [
            {
                "weight_version": 3, "prompt_idx": 17, "group_id": "vec-g",
                "num_invalid_tool_calls": 1, "num_malformed_thinking": 0,
                "num_assistant_messages": 2, "num_routed_experts_backfilled": 1,
                "pixel_values__row_shapes": [[1, 2]],
            },
            {
                "weight_version": 3, "prompt_idx": 17, "group_id": "vec-g",
                "num_invalid_tool_calls": 0, "num_malformed_thinking": 1,
                "num_assistant_messages": 1, "num_routed_experts_backfilled": 0,
                "pixel_values__row_shapes": [],
            },
            {
                "weight_version": 3, "prompt_idx": 17, "group_id": "vec-g",
                "num_invalid_tool_calls": 0, "num_malformed_thinking": 0,
                "num_assistant_messages": 0, "num_routed_experts_backfilled": 0,
                "pixel_values__row_shapes": [[2, 2]],
            },
        ],
        "fields": {
            "input_ids": {"dtype": "int64", "layout": "jagged", "offsets": [0, 3, 5, 5], "inner_shape": [],
                          "values": [151643, 0, 2147483647, -5, 77]},
            "generation_logprobs": {"dtype": "float32", "layout": "jagged", "offsets": [0, 3, 5, 5], "inner_shape": [],
                                    "values": [0, -0.125, "NaN", "-Infinity", -1e-30]},
            "token_mask": {"dtype": "int64", "layout": "jagged", "offsets": [0, 3, 5, 5], "inner_shape": [],
                           "values": [0, 1, 1, 0, 1]},
            "routed_experts": {"dtype": "int16", "layout": "jagged", "offsets": [0, 3, 5, 5], "inner_shape": [2, 2],
                               "values": [-1, -1, -1, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -1, -1, -1, -1]},
            "pixel_values": {"dtype": "float32", "layout": "jagged", "offsets": [0, 1, 1, 3], "inner_shape": [2],
                             "values": [0.5, 1.5, "Infinity", 2, 3, 4]},
            "input_lengths": {"dtype": "int32", "layout": "dense", "shape": [3], "values": [3, 2, 0]},
            "sample_mask": {"dtype": "float32", "layout": "dense", "shape": [3], "values": [1, 1, 1]},
            "total_reward": {"dtype": "float32", "layout": "dense", "shape": [3], "values": [1, 0.1, -0.5]},
            "mask_sample": {"dtype": "bool", "layout": "dense", "shape": [3], "values": [False, True, False]},
            "truncated": {"dtype": "bool", "layout": "dense", "shape": [3], "values": [True, False, False]},
            "prompt_ids_for_adv": {"dtype": "int64", "layout": "dense", "shape": [3, 2],
                                   "values": [151643, 0, 151643, 0, 0, 0]},
            "extra": {"dtype": "object", "layout": "dense", "shape": [3], "values": [{"a": 1}, None, "x"]},
        },
    }
}
NARROW = {"input_ids": "int32", "token_mask": "uint8", "prompt_ids_for_adv": "int32", "mask_sample": "uint8", "truncated": "uint8"}


def vector_pairs() -> list[tuple[str, Path, Path]]:
    if not VECTORS.exists():
        return []
    return [(p.stem, p, p.with_suffix(".json")) for p in sorted(VECTORS.glob("*.avro")) if p.with_suffix(".json").exists()]


def vector_schema() -> dict:
    own = VECTORS / "packed.avsc"
    return load_packed_schema(own if own.exists() else None)


def test_the_vectors_folder_is_not_empty_when_it_exists():
    if VECTORS.exists():
        assert vector_pairs(), f"{VECTORS} exists but holds no <name>.avro + <name>.json pair"


def _values_equal(got: np.ndarray, want: np.ndarray) -> bool:
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    # Exact: NaN matches NaN, every other value equal in the same dtype (JSON
    # cannot carry the sign of -0.0, so zeros compare by value).
    return np.array_equal(got, want, equal_nan=got.dtype.kind == "f")


def assert_matches_json(avro_value: bytes, doc: dict, schema: dict, mode: str) -> None:
    """Decodes the framed value and compares it field by field with the JSON form."""
    packed = doc["packed"]
    group = decode_packed_body(memoryview(avro_value)[5:], schema, jagged=mode)
    assert group.group_id == packed["group_id"]
    if "batch_id" in packed:
        assert group.batch_id == packed["batch_id"]
    assert group.sample_ids == packed["sample_ids"]
    assert group.tags == tags_from_json(packed["tags"])
    assert set(group.fields) == set(packed["fields"])
    for name, spec in packed["fields"].items():
        want = field_from_json(name, spec)
        got = group.fields[name]
        assert group.field_info[name]["dtype"] == want.dtype, name
        assert group.field_info[name]["layout"] == want.layout, name
        if want.dtype == "object":
            assert isinstance(got, np.ndarray) and got.dtype == object
            assert list(got) == list(want.values), name
            continue
        if want.layout == "jagged":
            values = got.values if isinstance(got, JaggedArray) else got.values().numpy()
            offsets = got.offsets if isinstance(got, JaggedArray) else got.offsets().numpy()
            assert offsets.tolist() == want.offsets.tolist(), name
            assert list(values.shape[1:]) == want.shape, name
            assert _values_equal(values.reshape(-1), want.values), (name, values, want.values)
        else:
            arr = got if isinstance(got, np.ndarray) else got.numpy()
            assert list(arr.shape) == want.shape, name
            assert _values_equal(arr.reshape(-1), want.values), (name, arr, want.values)


@pytest.mark.parametrize("mode", ["numpy", "torch"])
def test_every_shared_vector_decodes_to_its_json_form(mode, tmp_path):
    pairs = vector_pairs()
    schema = vector_schema()
    if not VECTORS.exists():  # no TypeScript vectors yet: build one, still check the comparison
        value = frame(0, encode_packed_body(record_from_json(BUILTIN["packed"], wire_dtypes=NARROW), schema))
        (tmp_path / "builtin.avro").write_bytes(value)
        (tmp_path / "builtin.json").write_text(json.dumps(BUILTIN))
        pairs = [("builtin", tmp_path / "builtin.avro", tmp_path / "builtin.json")]
    assert pairs, f"{VECTORS} exists but holds no <name>.avro + <name>.json pair"
    for name, avro, js in pairs:
        try:
            assert_matches_json(avro.read_bytes(), json.loads(js.read_text()), schema, mode)
        except AssertionError as e:
            raise AssertionError(f"vector {name}: {e}") from e


def test_the_comparison_catches_a_changed_value(packed_schema):
    value = frame(0, encode_packed_body(record_from_json(BUILTIN["packed"], wire_dtypes=NARROW), packed_schema))
    doc = json.loads(json.dumps(BUILTIN))
    doc["packed"]["fields"]["input_ids"]["values"][2] = 2147483646
    with pytest.raises(AssertionError):
        assert_matches_json(value, doc, packed_schema, "numpy")
    doc = json.loads(json.dumps(BUILTIN))
    doc["packed"]["fields"]["total_reward"]["dtype"] = "float64"
    with pytest.raises(AssertionError):
        assert_matches_json(value, doc, packed_schema, "numpy")


def test_json_nan_and_infinity_strings_become_floats():
    f = field_from_json("x", {"dtype": "float32", "layout": "dense", "shape": [3], "values": ["NaN", "Infinity", "-Infinity"]})
    assert math.isnan(f.values[0]) and f.values[1] == np.inf and f.values[2] == -np.inf


def _wire_dtypes(value: bytes, schema: dict) -> dict[str, str]:
    from rollout_stream.packed_reader import known_layout, read_packed_group

    layout = known_layout(schema)
    assert layout is not None and layout[1], "the vectors' schema has the known layout with pad"
    return {f[0]: f[2] for f in read_packed_group(value, 5, *layout)[4]}


@pytest.mark.parametrize("name", [p[0] for p in vector_pairs()])
def test_the_python_writer_writes_the_typescript_bytes(name):
    """encode_packed_value mirrors streams/codecs/packed-writer.ts: same pads, same bytes."""
    from rollout_stream.encode import encode_packed_value

    value = (VECTORS / f"{name}.avro").read_bytes()
    doc = json.loads((VECTORS / f"{name}.json").read_text())
    schema = vector_schema()
    record = record_from_json(doc["packed"], wire_dtypes=_wire_dtypes(value, schema))
    assert encode_packed_value(record, 1, schema) == value


@pytest.mark.parametrize("mode", ["numpy", "torch"])
def test_trainer_wire_vectors_decode_without_copying_tensor_bytes(mode):
    """Aligned values in their trainer dtype are views of the message, in both modes."""
    schema = vector_schema()
    seen = 0
    for name, avro, _ in vector_pairs():
        value = avro.read_bytes()
        wires = _wire_dtypes(value, schema)
        message = np.frombuffer(value, np.uint8)
        group = decode_packed_body(memoryview(value)[5:], schema, jagged=mode)
        for field, info in group.field_info.items():
            if info["dtype"] == "object" or wires[field] != info["dtype"]:
                continue
            got = group.fields[field]
            if isinstance(got, JaggedArray):
                arr = got.values
            elif isinstance(got, np.ndarray):
                arr = got
            else:
                arr = (got.values() if got.is_nested else got).numpy()
            if arr.size:
                assert np.shares_memory(arr, message), f"{name} {field} was copied"
                seen += 1
    assert seen >= 8, "the trainer-wire vectors have zero-copy fields to check"


def test_views_of_the_message_are_read_only_in_numpy_and_writable_in_torch():
    """As python/README.md says: numpy views of the immutable message are read-only, copies are
    writable, and torch tensors can be changed in place either way."""
    schema = vector_schema()
    value = (VECTORS / "small-text-0.avro").read_bytes()  # trainer wire: every field a view
    g = decode_packed_body(memoryview(value)[5:], schema, jagged="numpy")
    assert not g.fields["input_ids"].values.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        g.fields["total_reward"][0] = 1.0
    narrow = (VECTORS / "routes-media-violations-0.avro").read_bytes()  # int32 ids on the wire: widened copy
    assert decode_packed_body(memoryview(narrow)[5:], schema, jagged="numpy").fields["input_ids"].values.flags.writeable
    t = decode_packed_body(memoryview(value)[5:], schema, jagged="torch")
    before = t.fields["total_reward"].clone()
    t.fields["total_reward"].add_(1)
    assert (t.fields["total_reward"] == before + 1).all()

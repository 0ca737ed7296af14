"""Decoding hand-built packed records: dtypes, values, layouts, tags."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from builders import clean, media_group, routed_group, text_group
from rollout_stream import DecodeError, JaggedArray, decode_packed_body, materialize, media_segments
from rollout_stream.encode import dense_field, encode_packed_body, jagged_field, object_field, packed_record, row_tags

TRAINER_DTYPES = {
    "input_ids": np.int64,
    "input_lengths": np.int32,
    "generation_logprobs": np.float32,
    "token_mask": np.int64,
    "sample_mask": np.float32,
    "prompt_ids_for_adv": np.int64,
    "total_reward": np.float32,
    "mask_sample": np.bool_,
    "truncated": np.bool_,
}


def body_of(rec, schema) -> bytes:
    return encode_packed_body(clean(rec), schema)


@pytest.mark.parametrize("narrow", [True, False], ids=["narrow-wire", "exact-wire"])
def test_numpy_decode_restores_trainer_dtypes_and_values(packed_schema, narrow):
    rec = text_group(narrow=narrow)
    sample_ids, fields, tags = decode_packed_body(body_of(rec, packed_schema), packed_schema, jagged="numpy")
    exp = rec["_expected"]
    assert sample_ids == [f"grp-1_g{i}" for i in range(4)]
    for name, dt in TRAINER_DTYPES.items():
        assert fields[name].dtype == np.dtype(dt), name
    for name in ("input_ids", "generation_logprobs", "token_mask"):
        f = fields[name]
        assert isinstance(f, JaggedArray)
        assert f.offsets.tolist() == [0, 5, 8, 8, 15]
        for i, row in enumerate(exp[name]):
            np.testing.assert_array_equal(f.row(i), row)
    np.testing.assert_array_equal(fields["input_lengths"], [5, 3, 0, 7])
    np.testing.assert_array_equal(fields["total_reward"], exp["total_reward"])
    np.testing.assert_array_equal(fields["prompt_ids_for_adv"], exp["prompt_ids_for_adv"])
    assert fields["mask_sample"].tolist() == [False, True, False, True]
    assert fields["truncated"].tolist() == [True, False, False, False]
    assert fields["sample_mask"].tolist() == [1.0] * 4
    assert tags[1] == {
        "weight_version": 11,
        "prompt_idx": 42,
        "group_id": "grp-1",
        "num_invalid_tool_calls": 1,
        "num_malformed_thinking": 0,
        "num_assistant_messages": 2,
        "num_routed_experts_backfilled": 0,
    }


def test_torch_decode_gives_jagged_nested_tensors_sharing_one_ragged_dim(packed_schema):
    rec = text_group()
    group = decode_packed_body(body_of(rec, packed_schema), packed_schema, jagged="torch")
    ids, mask = group.fields["input_ids"], group.fields["token_mask"]
    assert ids.is_nested and ids.layout == torch.jagged
    assert ids.dtype == torch.int64 and mask.dtype == torch.int64
    assert group.fields["generation_logprobs"].dtype == torch.float32
    assert group.fields["input_lengths"].dtype == torch.int32
    assert group.fields["mask_sample"].dtype == torch.bool
    assert group.fields["prompt_ids_for_adv"].dtype == torch.int64
    for i, row in enumerate(rec["_expected"]["input_ids"]):
        assert ids.unbind()[i].tolist() == row.tolist()
    assert ids.offsets().tolist() == [0, 5, 8, 8, 15]
    trained = ids * mask  # same offsets tensor → same ragged dim, so elementwise ops work
    assert trained.values().tolist() == (ids.values() * mask.values()).tolist()


def test_auto_mode_prefers_torch_when_importable(packed_schema):
    group = decode_packed_body(body_of(text_group(), packed_schema), packed_schema)
    assert group.fields["input_ids"].is_nested


def test_narrow_wire_values_widen_exactly_including_negatives(packed_schema):
    vals = np.array([-(2**31), -1, 0, 2**31 - 1], dtype=np.int64)
    rec = packed_record(
        "g",
        "b",
        [
            jagged_field("input_ids", [vals[:1], vals[1:]], "int64", "int32"),
            dense_field("flags", np.array([0, 1, 1]), "bool", "uint8"),
            jagged_field("token_mask", [np.array([0, 255]), np.array([1])], "int64", "uint8"),
            dense_field("x", np.array([1.5, -2.25], np.float32), "float64", "float32"),
        ],
        [row_tags(weight_version=0, prompt_idx=0, group_id="g") for _ in range(2)],
    )
    _, f, _ = decode_packed_body(encode_packed_body(rec, packed_schema), packed_schema, jagged="numpy")
    assert f["input_ids"].values.dtype == np.int64
    assert f["input_ids"].values.tolist() == vals.tolist()
    assert f["flags"].dtype == np.bool_ and f["flags"].tolist() == [False, True, True]
    assert f["token_mask"].values.dtype == np.int64 and f["token_mask"].values.tolist() == [0, 255, 1]
    assert f["x"].dtype == np.float64 and f["x"].tolist() == [1.5, -2.25]


@pytest.mark.parametrize(("wire", "trainer"), [("int64", "int32"), ("float64", "float32"), ("float32", "int64")])
def test_a_wire_dtype_that_cannot_widen_losslessly_is_refused(packed_schema, wire, trainer):
    field = dense_field("x", np.zeros(2), wire)
    field["dtype"] = trainer
    rec = packed_record("g", "b", [field], [row_tags(weight_version=0, prompt_idx=0, group_id="g")] * 2)
    with pytest.raises(DecodeError, match="cannot be widened"):
        decode_packed_body(encode_packed_body(rec, packed_schema), packed_schema)


@pytest.mark.parametrize("group_id", ["g", "gg", "ggg", "gggg"])  # shifts the values through all 4 alignments
def test_fields_already_in_trainer_dtype_are_views_of_the_message_unless_unaligned(packed_schema, group_id):
    rec = text_group(group_id, lengths=(600, 700), narrow=True)
    body = body_of(rec, packed_schema)
    _, f, _ = decode_packed_body(body, packed_schema, jagged="numpy")
    logp = f["generation_logprobs"].values
    message = np.frombuffer(body, np.uint8)
    at = body.find(np.concatenate(rec["_expected"]["generation_logprobs"]).tobytes())
    aligned = (message.ctypes.data + at) % 4 == 0
    assert np.shares_memory(logp, message) == aligned  # zero-copy view, or one copy when unaligned
    assert logp.ctypes.data % 4 == 0
    assert not np.shares_memory(f["input_ids"].values, message)  # widened int32 → int64


def test_empty_rows_decode_and_materialize(packed_schema):
    rec = text_group(lengths=(0, 0, 0))
    for mode in ("numpy", "torch"):
        _, f, tags = decode_packed_body(body_of(rec, packed_schema), packed_schema, jagged=mode)
        offsets = f["input_ids"].offsets if mode == "numpy" else f["input_ids"].offsets()
        assert list(offsets.tolist()) == [0, 0, 0, 0]
        padded = materialize(f, {"input_ids": 9})
        assert tuple(padded["input_ids"].shape) == (3, 0)
        padded = materialize(f, {"input_ids": 9}, pad_to_seqlen=4)
        assert padded["input_ids"].tolist() == [[9] * 4] * 3
        assert len(tags) == 3


@pytest.mark.parametrize("dtype", ["int16", "int8", "int32"])
def test_routed_experts_are_jagged_with_layers_and_topk_inner_dims(packed_schema, dtype):
    rec = routed_group(dtype=dtype)
    body = body_of(rec, packed_schema)
    _, f, tags = decode_packed_body(body, packed_schema, jagged="numpy")
    re = f["routed_experts"]
    assert re.dtype == np.dtype(dtype)
    assert re.inner_shape == (3, 2)
    assert re.lengths.tolist() == [4, 0, 6]
    for i, row in enumerate(rec["_expected"]["routed_experts"]):
        np.testing.assert_array_equal(re.row(i), row)
    assert tags[0]["num_routed_experts_backfilled"] == 1
    nt = decode_packed_body(body, packed_schema, jagged="torch").fields["routed_experts"]
    assert nt.dtype == getattr(torch, dtype) and nt.unbind()[2].shape == (6, 3, 2)
    padded = materialize({"routed_experts": nt})["routed_experts"]
    assert tuple(padded.shape) == (3, 6, 3, 2)
    assert padded[0, 4:].eq(0).all() and padded[1].eq(0).all()  # padding is 0, not the -1 sentinel


@pytest.mark.parametrize("mode", ["numpy", "torch"])
def test_media_row_shapes_come_back_in_tags_and_cut_the_segments(packed_schema, mode):
    rec = media_group()
    group = decode_packed_body(body_of(rec, packed_schema), packed_schema, jagged=mode)
    assert group.tags[0]["pixel_values__row_shapes"] == [[2, 3, 3], [1, 3, 3]]
    assert group.tags[1]["pixel_values__row_shapes"] == [[3, 3, 3]]
    for row, segments in rec["_expected"]["segments"].items():
        got = media_segments(group.fields, group.tags, "pixel_values", row)
        assert [tuple(g.shape) for g in got] == [s.shape for s in segments]
        for g, s in zip(got, segments):
            np.testing.assert_array_equal(np.asarray(g), s)


@pytest.mark.parametrize("mode", ["numpy", "torch"])
def test_object_fields_are_numpy_object_arrays(packed_schema, mode):
    _, f, _ = decode_packed_body(body_of(media_group(), packed_schema), packed_schema, jagged=mode)
    obj = f["extra_env_info"]
    assert isinstance(obj, np.ndarray) and obj.dtype == object and obj.shape == (2,)
    assert obj[0] == {"task": "a", "ok": True} and obj[1] == [1, 2, None]


def test_object_field_with_a_wrong_count_is_refused(packed_schema):
    field = object_field("o", [1, 2])
    field["shape"] = [3]
    rec = packed_record("g", "b", [field], [row_tags(weight_version=0, prompt_idx=0, group_id="g")] * 2)
    with pytest.raises(DecodeError, match="object field 'o'"):
        decode_packed_body(encode_packed_body(rec, packed_schema), packed_schema)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.update(offsets=f["offsets"][:-8]), "offsets hold"),
        (lambda f: f.update(values=f["values"][:-4]), "values hold"),
        (lambda f: f.update(values=f["values"][:-1]), "not a multiple"),
        (lambda f: f.update(offsets=np.array([0, 5, 3, 8, 15], "<i8").tobytes()), "never decrease"),
        (lambda f: f.update(offsets=None), "has no offsets"),
        (lambda f: f.update(dtype="complex64"), "unknown dtype"),
    ],
    ids=["short-offsets", "short-values", "ragged-bytes", "decreasing-offsets", "no-offsets", "unknown-dtype"],
)
def test_inconsistent_field_headers_are_decode_errors(packed_schema, mutate, message):
    rec = clean(text_group())
    mutate(rec["fields"][0])
    with pytest.raises(DecodeError, match=message):
        decode_packed_body(encode_packed_body(rec, packed_schema), packed_schema)


def test_tags_and_sample_ids_must_agree_in_count(packed_schema):
    rec = clean(text_group())
    rec["tags"] = rec["tags"][:-1]
    with pytest.raises(DecodeError, match="3 tags for 4 sample ids"):
        decode_packed_body(encode_packed_body(rec, packed_schema), packed_schema)

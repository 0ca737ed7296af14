"""The hand-written row-completed encoder: same bytes from torch, numpy and lists, and what fastavro writes."""

from __future__ import annotations

import copy
import io

import fastavro
import numpy as np
import pytest
import torch

from conftest import REPO_ROOT
from rollout_stream import row_completed_schema, row_encoder, row_input, row_json
from rollout_stream import SchemaLayoutError

VECTORS = REPO_ROOT / "test" / "vectors" / "row-completed"


def _row(form: str) -> dict:
    tokens, gen = [7, 8, 9], [10, 11]
    lp = [-0.5, float("nan")]
    routes = np.arange(2 * 3 * 2, dtype=np.int32).reshape(2, 3, 2) - 5
    pixels = np.linspace(-1, 1, 6, dtype=np.float32).reshape(1, 2, 3)
    if form == "torch":
        conv = (torch.tensor(tokens), torch.tensor(gen, dtype=torch.int32), torch.tensor(lp, dtype=torch.float64),
                torch.from_numpy(routes.copy()), torch.from_numpy(pixels.copy()))
    elif form == "numpy":
        conv = (np.asarray(tokens, np.int64), np.asarray(gen, np.int16), np.asarray(lp, np.float32), routes, pixels)
    else:
        conv = (tokens, gen, lp, routes.tolist(), pixels.tolist())
    t, g, l, r, p = conv
    user = {"role": "user", "token_ids": t}
    return {
        "batch_id": "b", "group_id": "g", "group_index": 0, "row_index": 1, "num_generations": 2, "prompt_idx": 3,
        "weight_version": 4, "agent_ref": {"name": "a"}, "request": {"input": "hi"},
        "input_message_log": [user],
        "message_log": [user, {"role": "assistant", "token_ids": g, "generation_logprobs": l, "routed_experts": r,
                               "media": {"pixel_values": p}}],
        "full_result": {"reward": 1.0},
    }


def test_torch_numpy_and_list_tensors_give_identical_bytes():
    values = {form: row_encoder.encode(row_input.row(_row(form)), 1) for form in ("torch", "numpy", "lists")}
    assert values["torch"] == values["numpy"] == values["lists"]


def test_arrays_keep_their_media_dtype_where_lists_read_float32():
    row = _row("numpy")
    row["message_log"][1]["media"]["pixel_values"] = row["message_log"][1]["media"]["pixel_values"].astype(np.float64)
    media = row_input.row(row).message_log[1].media
    assert media[0][1].dtype == b"float64" and media[0][1].data.dtype == np.dtype("<f8")


def test_bfloat16_logprobs_are_widened_to_float32_exactly():
    row = _row("torch")
    row["message_log"][1]["generation_logprobs"] = torch.tensor([-0.5, -2.0], dtype=torch.bfloat16)
    lists = _row("lists")
    lists["message_log"][1]["generation_logprobs"] = [-0.5, -2.0]
    assert row_encoder.encode(row_input.row(row)) == row_encoder.encode(row_input.row(lists))


def _fastavro_bytes(value: bytes) -> bytes:
    """fastavro's own encoding of the record a framed value decodes to."""
    schema = row_completed_schema.parsed(row_completed_schema.load())
    kind, _, record = row_json.decode(value)
    name = {"row": "RolloutRow", "gym_result": "GymResult", "batch_end": "BatchEnd"}[kind]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, {"event": (f"dev.rolloutstream.v1.{name}", record)})
    return buf.getvalue()


@pytest.fixture(scope="module")
def python_vectors():
    import make_py_vectors

    return make_py_vectors.build()


@pytest.mark.parametrize("name", sorted(p.stem for p in VECTORS.glob("py-*.avro")))
def test_the_hand_written_encoder_writes_what_fastavro_writes(python_vectors, name):
    value = python_vectors[name][0]  # what the publisher sends today
    assert _fastavro_bytes(value) == value[5:]


def test_the_three_forms_also_match_fastavro():
    value = row_encoder.encode(row_input.row(_row("torch")), 1)
    assert _fastavro_bytes(value) == value[5:]


@pytest.mark.parametrize("n", [0, 1, -1, 63, -64, 64, -65, 2**31 - 1, -(2**31), 2**53 - 1, -(2**53 - 1), 2**62])
def test_zigzag_varints_match_fastavro(n):
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, {"type": "long"}, n)
    assert row_encoder.zigzag(n) == buf.getvalue()


def test_the_registered_schema_text_is_the_compact_json_of_the_file():
    schema = row_completed_schema.load()
    import json

    # JSON.stringify of this (ASCII-only) schema and Python's compact dump coincide.
    assert row_completed_schema.registered_text(schema) == json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    assert row_completed_schema.registered_text(schema).startswith('{"type":"record","name":"RowCompleted"')


def test_the_checked_in_schema_has_the_layout_the_encoder_writes():
    row_completed_schema.check_layout(row_completed_schema.load())


def test_a_schema_with_another_layout_is_refused_but_docs_and_defaults_do_not_count():
    schema = row_completed_schema.load()
    cosmetic = copy.deepcopy(schema)
    cosmetic["doc"] = "changed"
    cosmetic["fields"][0]["type"][1]["doc"] = "changed too"
    row_completed_schema.check_layout(cosmetic)
    grown = copy.deepcopy(schema)
    grown["fields"][0]["type"][1]["fields"].append({"name": "extra", "type": ["null", "string"], "default": None})
    with pytest.raises(SchemaLayoutError, match="update the encoder"):
        row_completed_schema.check_layout(grown)


def test_strided_views_and_big_endian_arrays_are_sent_as_their_values():
    base = _row("lists")
    views = _row("lists")
    views["message_log"][0]["token_ids"] = np.asarray([7, 0, 8, 0, 9, 0], dtype=np.int32)[::2]  # a strided view
    views["message_log"][1]["token_ids"] = np.asarray([10, 11], dtype=">i4")
    views["message_log"][1]["routed_experts"] = np.asarray(base["message_log"][1]["routed_experts"], np.int32).transpose(0, 2, 1).copy().transpose(0, 2, 1)
    assert row_encoder.encode(row_input.row(views)) == row_encoder.encode(row_input.row(base))


def test_every_nan_in_timing_is_written_with_the_bits_javascript_writes():
    import struct

    odd_nan = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0]  # negative, with a payload
    a, b = _row("lists"), _row("lists")
    a["timing"], b["timing"] = {"t": odd_nan}, {"t": float("nan")}
    assert row_encoder.encode(row_input.row(a)) == row_encoder.encode(row_input.row(b))
    assert b"\x00\x00\x00\x00\x00\x00\xf8\x7f" in row_encoder.encode(row_input.row(a))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_give_the_bytes_of_their_host_copies():
    host = _row("torch")
    cuda = _row("torch")
    for m in cuda["message_log"]:
        for k in ("token_ids", "generation_logprobs", "routed_experts"):
            if isinstance(m.get(k), torch.Tensor):
                m[k] = m[k].cuda()
    assert row_encoder.encode(row_input.row(cuda)) == row_encoder.encode(row_input.row(host))

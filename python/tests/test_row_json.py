"""The SPEC §9 JSON form of row-completed values, as the publisher reads and writes it."""

from __future__ import annotations

import numpy as np
import pytest

from rollout_stream import InvalidRowError, row_encoder, row_json
from test_publisher_validation import good_row


def _json_row(**messages_update) -> dict:
    r = good_row()
    r["message_log"] = [{"role": "user", "token_ids": [1, 2], **messages_update}]
    r["input_message_log"] = [{"role": "user", "token_ids": [1, 2]}]
    return r


def test_a_line_is_a_row_a_gym_result_or_a_batch_end():
    assert row_json.from_json({"batch_end": {"batch_id": "b", "num_rows": 3}}) == ("batch_end", {"batch_id": "b", "num_rows": 3})
    assert row_json.from_json({"gym_row": {}, "gym_result": {}, "batch_id": "b"})[0] == "gym_result"
    assert row_json.from_json({"gym_row": {}, "message_log": []})[0] == "row"


def test_an_iso_produced_at_is_epoch_milliseconds():
    _, args = row_json.from_json({"produced_at": "2023-11-14T22:13:20.123Z", "message_log": []})
    assert args["produced_at"] == 1700000000123
    _, args = row_json.from_json({"produced_at": "2023-11-14T23:13:20.123+01:00", "message_log": []})
    assert args["produced_at"] == 1700000000123
    with pytest.raises(InvalidRowError, match="produced_at"):
        row_json.from_json({"produced_at": "yesterday", "message_log": []})


def test_json_tensors_with_an_explicit_dtype_keep_it():
    routes = {"dtype": "int8", "shape": [2, 1, 1], "values": [-128, 127]}
    wire = row_json.wire_from_json(_json_row(routed_experts=routes))
    t = wire.message_log[0].routed_experts
    assert (t.dtype, t.shape, t.data.tobytes()) == (b"int8", [2, 1, 1], b"\x80\x7f")


@pytest.mark.parametrize(
    "update,field",
    [
        ({"token_ids": [True, 1]}, "message_log[0].token_ids"),
        ({"routed_experts": {"dtype": "int8", "shape": [2, 1, 1], "values": [0, 300]}}, "message_log[0].routed_experts"),
        ({"routed_experts": {"dtype": "int8", "shape": [3, 1, 1], "values": [0, 1]}}, "message_log[0].routed_experts"),
        ({"media": {"img": {"dtype": "float17", "shape": [1], "values": [0]}}}, "message_log[0].media.img"),
    ],
)
def test_a_json_line_that_is_not_a_valid_row_names_the_field(update, field):
    with pytest.raises(InvalidRowError) as e:
        row_json.wire_from_json(_json_row(**update))
    assert e.value.field == field


def test_nan_and_infinity_strings_become_floats_where_floats_belong():
    wire = row_json.wire_from_json(_json_row(token_ids=[1, 2], generation_logprobs=["NaN", "-Infinity"]))
    lp = wire.message_log[0].generation_logprobs
    assert np.isnan(lp[0]) and lp[1] == -np.inf and lp.dtype == np.dtype("<f4")


@pytest.mark.parametrize("x,expected", [(-0.1, -0.1), (1.401298464324817e-45, 1e-45), (3.4028234663852886e38, 3.4028235e38),
                                        (float(np.float32(1 / 3)), 0.33333334), (float("nan"), "NaN"), (-np.inf, "-Infinity")])
def test_float32_values_are_written_with_the_fewest_digits_like_typescripts_float32ToJson(x, expected):
    assert row_json.float32_to_json(x) == expected


def test_decode_then_to_json_round_trips_through_the_encoder():
    value = row_encoder.encode(row_json.wire_from_json(_json_row(generation_logprobs=[-0.5, -1e-5])), 3)
    kind, schema_id, record = row_json.decode(value)
    again = row_encoder.encode(row_json.wire_from_json(row_json.to_json(kind, record)), schema_id)
    assert (kind, schema_id, again) == ("row", 3, value)

"""materialize: jagged → padded rectangles, dense untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from builders import clean, text_group
from rollout_stream import decode_packed_body, materialize
from rollout_stream.encode import encode_packed_body


@pytest.fixture
def decoded(packed_schema):
    rec = text_group(lengths=(2, 0, 3))
    body = encode_packed_body(clean(rec), packed_schema)
    return rec, {m: decode_packed_body(body, packed_schema, jagged=m).fields for m in ("numpy", "torch")}


@pytest.mark.parametrize("mode", ["numpy", "torch"])
def test_jagged_fields_pad_on_the_right_with_their_own_pad_value(decoded, mode):
    rec, fields = decoded
    out = materialize(fields[mode], {"input_ids": -7, "generation_logprobs": 0.5})
    ids = np.asarray(out["input_ids"])
    exp = rec["_expected"]["input_ids"]
    assert ids.shape == (3, 3) and ids.dtype == np.int64
    assert ids[0].tolist() == exp[0].tolist() + [-7]
    assert ids[1].tolist() == [-7, -7, -7]
    assert ids[2].tolist() == exp[2].tolist()
    logp = np.asarray(out["generation_logprobs"])
    assert logp.dtype == np.float32 and logp[1].tolist() == [0.5] * 3
    mask = np.asarray(out["token_mask"])  # no pad value given → 0
    assert mask.dtype == np.int64 and mask[0].tolist() == [0, 0, 0]


@pytest.mark.parametrize("mode", ["numpy", "torch"])
def test_pad_to_seqlen_widens_but_never_cuts(decoded, mode):
    _, fields = decoded
    assert tuple(materialize(fields[mode], pad_to_seqlen=8)["input_ids"].shape) == (3, 8)
    assert tuple(materialize(fields[mode], pad_to_seqlen=2)["input_ids"].shape) == (3, 3)
    with pytest.raises(ValueError):
        materialize(fields[mode], pad_to_seqlen=-1)


@pytest.mark.parametrize("mode", ["numpy", "torch"])
def test_dense_fields_pass_through_unchanged(decoded, mode):
    _, fields = decoded
    out = materialize(fields[mode], {"prompt_ids_for_adv": 99}, pad_to_seqlen=16)
    for name in ("prompt_ids_for_adv", "input_lengths", "total_reward", "mask_sample"):
        assert out[name] is fields[mode][name]


def test_torch_and_numpy_materialize_agree(decoded):
    _, fields = decoded
    a = materialize(fields["numpy"], {"input_ids": 3})
    b = materialize(fields["torch"], {"input_ids": 3})
    for k in a:
        assert isinstance(b[k], torch.Tensor)
        np.testing.assert_array_equal(a[k], b[k].numpy())

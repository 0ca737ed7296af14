"""Token ids given as Python lists: the array-module fast path gives the numpy path's int32 values and errors."""

from __future__ import annotations

import numpy as np
import pytest

from rollout_stream.errors import InvalidRowError
from rollout_stream.tensor_input import token_ids


@pytest.mark.parametrize("ids", [[], [0], [5, 1, 150_000], [-(2**31), 2**31 - 1, 0, -1]])
def test_a_list_of_ints_is_the_same_little_endian_int32_array_as_its_numpy_form(ids):
    got = token_ids(ids, "t")
    want = token_ids(np.asarray(ids, dtype=np.int64), "t")
    assert got.dtype == np.dtype("<i4") and got.flags.c_contiguous and got.tobytes() == want.tobytes()


@pytest.mark.parametrize(
    "ids,words",
    [([4, 2**31], "outside int32 (min 4, max 2147483648)"), ([-(2**31) - 1], "outside int32"),
     ([1, 2.0], "must be integers"), ([True, 5], "booleans"), ([1, "2"], "must hold numbers")],
)
def test_a_list_that_is_not_int32_is_refused_naming_the_field(ids, words):
    with pytest.raises(InvalidRowError, match="must|outside|booleans") as e:
        token_ids(ids, "message_log[1].token_ids")
    assert e.value.field == "message_log[1].token_ids" and words in str(e.value)


def test_numpy_scalars_in_a_list_take_the_general_path():
    assert token_ids([np.int64(7), np.int32(-3)], "t").tolist() == [7, -3]

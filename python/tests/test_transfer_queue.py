"""TransferQueueSink against a real TransferQueue (SimpleStorage backend on a local Ray).

Needs the ``tq`` extra (``transferqueue``, ``tensordict``; installed by
``scripts/python-env.sh``). Starting Ray takes ~10-30 s, so these tests carry
the ``transferqueue`` marker (select or deselect them with ``-m``). Without
the package they fail, unless ``RS_PY_SKIP_TQ=1`` says the extra was left
out on purpose.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from builders import clean, media_group, routed_group, text_group
from rollout_stream import decode_packed_body
from rollout_stream.encode import encode_packed_body

pytestmark = pytest.mark.transferqueue


@pytest.fixture(scope="module")
def tq():
    try:
        import ray
        import transfer_queue
    except ImportError as e:
        if os.environ.get("RS_PY_SKIP_TQ") == "1":
            pytest.skip(f"RS_PY_SKIP_TQ=1 and transferqueue is not installed: {e}")
        pytest.fail(f"transferqueue is not installed ({e}); run scripts/python-env.sh or set RS_PY_SKIP_TQ=1", pytrace=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        transfer_queue.init({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}})
        yield transfer_queue
    finally:
        transfer_queue.close()
        ray.shutdown()


def rows_of(val) -> list[np.ndarray]:
    if isinstance(val, torch.Tensor):
        return [r.numpy() for r in (val.unbind() if val.is_nested else val)]
    return [np.asarray(x) for x in val]


@pytest.mark.parametrize("mode", ["torch", "numpy"])
@pytest.mark.parametrize("build", [text_group, routed_group, media_group], ids=["text", "routed-experts", "media+object"])
def test_groups_put_through_the_sink_read_back_field_by_field(tq, packed_schema, mode, build):
    from rollout_stream.transfer_queue import TransferQueueSink

    rec = clean(build())
    partition = f"p-{build.__name__}-{mode}"
    sample_ids, fields, tags = decode_packed_body(encode_packed_body(rec, packed_schema), packed_schema, jagged=mode)
    sink = TransferQueueSink(partition)
    meta = sink(sample_ids, fields, tags)
    assert sorted(meta.fields) == sorted(fields)

    back = tq.kv_batch_get(keys=sample_ids, partition_id=partition)
    assert sorted(back.keys()) == sorted(fields)
    reference = decode_packed_body(encode_packed_body(rec, packed_schema), packed_schema, jagged="numpy").fields
    for name, want in reference.items():
        got = back[name]
        if isinstance(want, np.ndarray) and want.dtype == object:
            assert list(got) == list(want), name
            continue
        want_rows = want.rows() if hasattr(want, "rows") else list(want)
        got_rows = rows_of(got)
        assert len(got_rows) == len(want_rows), name
        for g, w in zip(got_rows, want_rows):
            assert g.dtype == np.asarray(w).dtype, (name, g.dtype, np.asarray(w).dtype)
            np.testing.assert_array_equal(g, w, err_msg=name)

    stored = tq.kv_list(partition_id=partition)[partition]
    assert [stored[s] for s in sample_ids] == tags


def test_a_redelivered_group_overwrites_its_own_rows(tq, packed_schema):
    from rollout_stream.transfer_queue import TransferQueueSink

    sample_ids, fields, tags = decode_packed_body(encode_packed_body(clean(text_group()), packed_schema), packed_schema)
    sink = TransferQueueSink("p-redelivery")
    sink(sample_ids, fields, tags)
    sink(sample_ids, fields, tags)
    assert sorted(tq.kv_list(partition_id="p-redelivery")["p-redelivery"]) == sorted(sample_ids)

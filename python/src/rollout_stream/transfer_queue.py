"""``put_samples`` into TransferQueue: one ``kv_batch_put`` per call.

Only this module imports ``transfer_queue``/``tensordict`` (the ``tq`` extra);
the rest of the package works without them.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from .codec import JaggedArray


def to_tensordict(sample_ids: Sequence[str], fields: Mapping[str, Any]):
    """Packs a group's fields into a ``TensorDict`` with ``batch_size=[N]``.

    Jagged fields are ``torch.nested`` jagged tensors (a :class:`JaggedArray`
    is converted without copying), dense fields are tensors, object fields
    stay ``numpy.ndarray(dtype=object)`` (TransferQueue stores them as
    non-tensor data).
    """
    import torch
    from tensordict import TensorDict

    out: dict[str, Any] = {}
    for name, val in fields.items():
        if isinstance(val, JaggedArray):
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                values, offsets = torch.from_numpy(val.values), torch.from_numpy(val.offsets)
            out[name] = torch.nested.nested_tensor_from_jagged(values, offsets)
        elif isinstance(val, np.ndarray) and val.dtype != object:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                out[name] = torch.from_numpy(val)
        else:
            out[name] = val
    return TensorDict(out, batch_size=[len(sample_ids)])


class TransferQueueSink:
    """A ``put_samples`` that writes each call to a TransferQueue partition.

    Args:
        partition_id: The TransferQueue partition (e.g. ``"train"``).
        client: Anything with ``kv_batch_put(keys=, partition_id=, fields=, tags=)``;
            default the ``transfer_queue`` module itself, which needs
            ``transfer_queue.init()`` (and Ray) to have run in this process.

    Calling it:
        ``sink(sample_ids, fields, tags)`` returns what ``kv_batch_put`` returned
        (a ``KVBatchMeta``). Sample ids are the keys, so a redelivered group
        overwrites its own rows.

    Raises (from ``__call__``):
        Whatever ``kv_batch_put`` raises; :func:`rollout_stream.feed` then leaves
        the group uncommitted.
    """

    def __init__(self, partition_id: str, client: Any = None) -> None:
        if client is None:
            import transfer_queue as client  # noqa: PLW0127 - module-level kv API
        self.partition_id = partition_id
        self.client = client

    def __call__(self, sample_ids: Sequence[str], fields: Mapping[str, Any], tags: Sequence[Mapping[str, Any]]) -> Any:
        td = to_tensordict(sample_ids, fields)
        return self.client.kv_batch_put(
            keys=list(sample_ids),
            partition_id=self.partition_id,
            fields=td,
            tags=[dict(t) for t in tags],
        )

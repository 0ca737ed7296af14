"""``put_samples`` into NeMo-RL's data plane: one ``DataPlaneClient.put_samples`` per call.

NeMo-RL (NVIDIA-NeMo/RL) moves rollouts to its trainer through a
``DataPlaneClient`` (``nemo_rl/data_plane/interfaces.py``). Its single
controller's producer builds ``(sample_ids, fields, tags)`` with
``nemo_rl/experience/payload.py:pack_payload`` and calls
``put_samples(sample_ids, partition_id, fields, tags)`` where ``fields`` is a
``tensordict.TensorDict`` with ``batch_size=[N]``: per-token fields as
``torch.jagged`` nested tensors, per-row fields dense, ``tags`` one dict of
primitives per row with ``weight_version`` stamped on each. The decoder of
this package already yields that triple with plain tensors and arrays
(SPEC §5, §6); :class:`DataPlaneSink` only puts the fields into a
``TensorDict`` (no copy of tensor bytes) and checks what NeMo-RL's clients
would refuse, so a bad group fails here, named, before anything is written.

Only this module and :mod:`rollout_stream.transfer_queue` import
``tensordict``; it is imported when a sink is built.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable, Literal, Mapping, Sequence

import numpy as np

from .errors import RolloutStreamError
from .jagged_array import JaggedArray

# The columns NeMo-RL's own producer writes (record_to_train_batch, then
# pack_payload; routed_experts only under router replay). `only=PAYLOAD_FIELDS`
# sends exactly these and leaves our extra columns (mask_sample, truncated,
# reward/<name>, violation masks, media) out.
PAYLOAD_FIELDS: tuple[str, ...] = (
    "input_ids",
    "input_lengths",
    "generation_logprobs",
    "token_mask",
    "sample_mask",
    "prompt_ids_for_adv",
    "total_reward",
    "routed_experts",
)

ObjectFields = Literal["refuse", "non_tensor", "drop"]
_OBJECT_MODES = ("refuse", "non_tensor", "drop")
_SCALARS = (str, int, float, bool, type(None))


class DataPlaneFieldError(RolloutStreamError, TypeError):
    """A group that NeMo-RL's data plane would not take as given (nothing was written).

    ``details["field"]`` names the field or tag concerned, when there is one.
    """

    code = "data_plane_field"


def _require_tensordict() -> tuple[Any, Any, Any]:
    try:
        import torch
        from tensordict import NonTensorStack, TensorDict
    except ImportError as e:
        raise ImportError(
            "DataPlaneSink needs torch and tensordict (NeMo-RL's put_samples takes a "
            "tensordict.TensorDict): pip install 'rollout-stream[torch,tq]', or install "
            f"them beside NeMo-RL ({e})"
        ) from e
    return torch, TensorDict, NonTensorStack


class DataPlaneSink:
    """A ``put_samples(sample_ids, fields, tags)`` for :func:`rollout_stream.feed` that
    writes each call through a NeMo-RL ``DataPlaneClient``.

    Args:
        client: A NeMo-RL ``DataPlaneClient`` (``build_data_plane_client(cfg,
            bootstrap=False)`` in a process of a running job), anything with its
            ``put_samples(sample_ids, partition_id, fields=, tags=)``, or a Ray
            actor handle of one (called with ``.remote`` and waited for).
        partition_id: The data-plane partition (NeMo-RL's single controller
            uses ``"rollout_data"``).
        only: Field names to send (others are left out), e.g.
            :data:`PAYLOAD_FIELDS`; ``None`` sends every field.
        object_fields: What to do with ``object`` fields (``numpy`` object
            arrays): ``"refuse"`` (default) raises, since NeMo-RL's in-memory
            client refuses every non-tensor leaf (as an earlier version of
            its TransferQueue adapter did); ``"non_tensor"`` sends them as ``NonTensorStack``
            leaves, which its TransferQueue adapter passes through; ``"drop"``
            leaves them out.
        tag_input_lengths: Also stamp each row's ``input_lengths`` into its
            tag. NeMo-RL's own producer does not (its replay buffer keeps the
            lengths beside), but its TransferQueue adapter's ``claim_meta``
            lifts that tag into ``KVBatchMeta.sequence_lengths``, which
            ``shard_meta_for_dp`` needs: turn it on when the trainer claims
            the pipeline's samples from the partition.

    Calling it:
        ``sink(sample_ids, fields, tags)`` returns what ``client.put_samples``
        returned (NeMo-RL's ``KVBatchMeta``). ``fields`` are the decoder's:
        torch ``jagged`` nested tensors or :class:`JaggedArray`, tensors or
        arrays. They reach the client as one ``TensorDict(batch_size=[N])``,
        every dtype and byte as decoded (arrays are wrapped, not copied;
        :class:`JaggedArray` fields that shared offsets share one ragged
        dimension). Each row's tag reaches it as a new dict of plain Python
        values with an ``int`` ``weight_version``, the tag NeMo-RL's
        ``pack_payload`` stamps; our other tags ride along.

    Raises (from ``__call__``):
        DataPlaneFieldError: A field that is not a tensor (or an object field
            with ``object_fields="refuse"``), a strided nested tensor, a field
            or tag list whose row count is not N, a tag that is not a mapping
            of primitives or has no integer ``weight_version``. Nothing is
            written; :func:`rollout_stream.feed` leaves the group uncommitted.
        Exception: Whatever ``client.put_samples`` raises, likewise.

    Raises (from the constructor):
        ImportError: torch or tensordict is not installed.
        ValueError: Empty ``partition_id`` or unknown ``object_fields``.
        TypeError: ``client`` has no ``put_samples``.
    """

    def __init__(
        self,
        client: Any,
        partition_id: str,
        *,
        only: Iterable[str] | None = None,
        object_fields: ObjectFields = "refuse",
        tag_input_lengths: bool = False,
    ) -> None:
        if not isinstance(partition_id, str) or not partition_id:
            raise ValueError(f"partition_id must be a non-empty string, not {partition_id!r}")
        if object_fields not in _OBJECT_MODES:
            raise ValueError(f"object_fields must be one of {_OBJECT_MODES}, not {object_fields!r}")
        if not callable(getattr(client, "put_samples", None)):
            raise TypeError(f"client {type(client).__name__} has no put_samples(sample_ids, partition_id, fields, tags)")
        self._torch, self._tensordict, self._non_tensor_stack = _require_tensordict()
        self.client = client
        self.partition_id = partition_id
        self.only = None if only is None else frozenset(only)
        self.object_fields = object_fields
        self.tag_input_lengths = tag_input_lengths

    def __call__(self, sample_ids: Sequence[str], fields: Mapping[str, Any], tags: Sequence[Mapping[str, Any]]) -> Any:
        ids = list(sample_ids)
        n = len(ids)
        if n == 0 or not all(isinstance(s, str) for s in ids):
            raise DataPlaneFieldError("sample_ids must be a non-empty list of strings (NeMo-RL's per-sample keys)")
        if len(tags) != n:
            raise DataPlaneFieldError(f"{len(tags)} tags for {n} sample ids: NeMo-RL aligns tags 1:1 with sample_ids")
        offsets: dict[int, Any] = {}
        leaves: dict[str, Any] = {}
        for name, value in fields.items():
            if self.only is not None and name not in self.only:
                continue
            leaf = self._leaf(name, value, n, offsets)
            if leaf is not None:
                leaves[name] = leaf
        td = self._tensordict(leaves, batch_size=[n])
        row_tags = [_row_tag(t, i) for i, t in enumerate(tags)]
        if self.tag_input_lengths:
            for tag, length in zip(row_tags, _input_lengths(fields, n)):
                tag["input_lengths"] = length
        return _put(self.client, sample_ids=ids, partition_id=self.partition_id, fields=td, tags=row_tags)

    def _leaf(self, name: str, value: Any, n: int, offsets: dict[int, Any]) -> Any:
        """One field as a TensorDict leaf, or None when it is dropped."""
        torch = self._torch
        if isinstance(value, JaggedArray):
            _rows(name, len(value), n)
            key = id(value.offsets)
            if key not in offsets:
                offsets[key] = _from_numpy(torch, name, value.offsets)
            return torch.nested.nested_tensor_from_jagged(_from_numpy(torch, name, value.values), offsets[key])
        if isinstance(value, torch.Tensor):
            if value.is_nested and value.layout != torch.jagged:
                raise DataPlaneFieldError(
                    f"field {name!r} is a strided nested tensor: NeMo-RL's codec writes "
                    "layout=torch.jagged (torch.nested.nested_tensor_from_jagged)",
                    field=name,
                )
            _rows(name, value.size(0) if value.dim() else None, n)
            return value
        if isinstance(value, np.ndarray) and value.dtype == object:
            if self.object_fields == "drop":
                return None
            if self.object_fields == "refuse":
                raise DataPlaneFieldError(
                    f"field {name!r} holds Python objects, not a tensor: NeMo-RL's in-memory data plane "
                    "refuses non-tensor leaves (its TransferQueue adapter takes them as NonTensorStack: "
                    "object_fields='non_tensor'; or object_fields='drop', or per-row primitives in tags)",
                    field=name,
                )
            _rows(name, value.shape[0] if value.ndim else None, n)
            return self._non_tensor_stack(*value.tolist())
        if isinstance(value, np.ndarray):
            _rows(name, value.shape[0] if value.ndim else None, n)
            return _from_numpy(torch, name, value)
        raise DataPlaneFieldError(
            f"field {name!r} is a {type(value).__name__}, not a tensor or array: NeMo-RL's "
            "put_samples takes tensor leaves (per-row primitives go in tags)",
            field=name,
        )


def _rows(name: str, rows: int | None, n: int) -> None:
    if rows != n:
        raise DataPlaneFieldError(
            f"field {name!r} has {'no row dimension' if rows is None else f'{rows} rows'}, "
            f"not one per sample id ({n}): TensorDict(batch_size=[{n}])",
            field=name,
        )


def _from_numpy(torch: Any, name: str, arr: np.ndarray) -> Any:
    """A tensor over the array's memory, same dtype (the decoder's views are read-only
    numpy; torch shares them, as the torch decode does)."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return torch.from_numpy(arr)
    except TypeError as e:
        raise DataPlaneFieldError(f"field {name!r}: dtype {arr.dtype} has no torch equivalent", field=name, cause=e) from e


def _input_lengths(fields: Mapping[str, Any], n: int) -> list[int]:
    lengths = fields.get("input_lengths")
    if lengths is None or getattr(lengths, "shape", None) != (n,):
        raise DataPlaneFieldError(
            f"tag_input_lengths needs a dense input_lengths field of {n} rows", field="input_lengths"
        )
    return [int(x) for x in lengths.tolist()]


def _row_tag(tag: Any, row: int) -> dict[str, Any]:
    if not isinstance(tag, Mapping):
        raise DataPlaneFieldError(f"tag of row {row} is a {type(tag).__name__}, not a dict")
    out = {}
    for key, value in tag.items():
        if not isinstance(key, str):
            raise DataPlaneFieldError(f"tag key {key!r} of row {row} is not a string", field=str(key))
        out[key] = _primitive(value, key, row)
    wv = out.get("weight_version")
    if not isinstance(wv, int) or isinstance(wv, bool):
        raise DataPlaneFieldError(
            f"row {row} has weight_version {wv!r}: NeMo-RL stamps an int weight_version on every row's "
            "tag and its single controller reads min(tag['weight_version'])",
            field="weight_version",
        )
    return out


def _primitive(value: Any, key: str, row: int) -> Any:
    """Plain Python values (a tag travels to NeMo-RL's controller as per-sample metadata)."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_primitive(v, key, row) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _primitive(v, key, row) for k, v in value.items()}
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):  # a 0-d tensor
        return value.item()
    raise DataPlaneFieldError(f"tag {key!r} of row {row} is a {type(value).__name__}, not a primitive", field=key)


def _put(client: Any, **kwargs: Any) -> Any:
    """``client.put_samples(**kwargs)``, through ``.remote`` and ``ray.get`` for an actor handle
    (the two ways NeMo-RL's own callers reach a client)."""
    method = client.put_samples
    remote = getattr(method, "remote", None)
    if remote is not None:
        import ray

        return ray.get(remote(**kwargs))
    return method(**kwargs)

"""Row-wise concatenation of several decoded groups into one ``put_samples`` call."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .codec import JaggedArray, PackedGroup


def _signature(val: Any) -> tuple:
    if isinstance(val, JaggedArray):
        return ("jagged-np", val.dtype.str, val.inner_shape)
    if getattr(val, "is_nested", False):
        return ("jagged-torch", str(val.dtype), tuple(val.shape[2:]))
    if isinstance(val, np.ndarray):
        return ("np", val.dtype.str, tuple(val.shape[1:]))
    return ("torch", str(val.dtype), tuple(val.shape[1:]))


def merge_groups(groups: Sequence[PackedGroup], *, check_only: bool = False):
    """Concatenates groups row-wise: ``(sample_ids, fields, tags)`` or ``None``.

    Jagged fields concatenate their values and shift their offsets; dense and
    object fields concatenate along the first dimension. Groups merge only
    when every field has the same name, kind, dtype and trailing shape
    (``prompt_ids_for_adv`` of two groups with different prompt lengths does
    not line up, for instance).

    Args:
        groups: Decoded groups, in delivery order.
        check_only: Only test compatibility; returns ``()`` instead of the merge.

    Returns:
        The merged triple, ``()`` when ``check_only`` and compatible, or
        ``None`` when the groups do not line up.
    """
    first = groups[0]
    sig = {k: _signature(v) for k, v in first.fields.items()}
    for g in groups[1:]:
        if g.fields.keys() != first.fields.keys():
            return None
        if any(_signature(v) != sig[k] for k, v in g.fields.items()):
            return None
    if check_only:
        return ()
    sample_ids = [s for g in groups for s in g.sample_ids]
    tags = [t for g in groups for t in g.tags]
    shared: dict[tuple[int, ...], Any] = {}
    fields = {k: _concat([g.fields[k] for g in groups], shared) for k in first.fields}
    return sample_ids, fields, tags


def _concat(vals: list[Any], shared: dict[tuple[int, ...], Any] | None = None) -> Any:
    """Concatenates one field; ``shared`` maps the ids of the inputs' offsets to the
    merged offsets, so fields that shared offsets in every group share them merged
    (one ragged dim: ``input_ids * token_mask`` keeps working)."""
    shared = {} if shared is None else shared
    v0 = vals[0]
    if isinstance(v0, JaggedArray):
        key = tuple(id(v.offsets) for v in vals)
        if key not in shared:
            shared[key] = (vals, _shifted([v.offsets for v in vals], np))
        return JaggedArray(values=np.concatenate([v.values for v in vals]), offsets=shared[key][1])
    if isinstance(v0, np.ndarray):
        return np.concatenate(vals)
    import torch

    if getattr(v0, "is_nested", False):
        values = torch.cat([v.values() for v in vals])
        key = tuple(id(v.offsets()) for v in vals)
        if key not in shared:  # vals kept alive in the entry so the ids stay unique
            offsets = _shifted([v.offsets() for v in vals], torch)
            lengths = offsets.diff()
            shared[key] = (vals, offsets, int(lengths.min()), int(lengths.max()))
        _, offsets, lo, hi = shared[key]
        return torch.nested.nested_tensor_from_jagged(values, offsets, min_seqlen=lo, max_seqlen=hi)
    return torch.cat(vals)


def _shifted(offsets: list[Any], lib: Any) -> Any:
    parts, base = [offsets[0]], offsets[0][-1]
    for o in offsets[1:]:
        parts.append(o[1:] + base)
        base = base + o[-1]
    return lib.concatenate(parts) if lib is np else lib.cat(parts)

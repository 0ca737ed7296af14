"""Padded rectangular tensors from jagged fields (the trainer's view)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .codec import JaggedArray


def _is_nested(val: Any) -> bool:
    return bool(getattr(val, "is_nested", False))


def materialize(
    fields: Mapping[str, Any],
    pad_value_dict: Mapping[str, int | float | bool] | None = None,
    pad_to_seqlen: int = 0,
) -> dict[str, Any]:
    """Pads every jagged field to a rectangle; dense and object fields pass through.

    A jagged field of N rows with inner shape ``inner`` becomes
    ``[N, max(max_len, pad_to_seqlen), *inner]``: row ``i`` holds its own
    values first, then ``pad_value_dict.get(name, 0)`` (cast to the field's
    dtype). torch nested tensors give torch tensors, :class:`JaggedArray`
    gives numpy arrays; dtypes are kept. Rows are never cut: a
    ``pad_to_seqlen`` below the longest row changes nothing.

    Args:
        fields: The ``fields`` of a decoded group (or several merged groups).
        pad_value_dict: Pad value per field name (e.g. ``{"input_ids": pad_id}``); default 0.
        pad_to_seqlen: When > 0, pad the sequence dim up to at least this length.

    Returns:
        A new dict with the same keys.

    Raises:
        ValueError: ``pad_to_seqlen`` is negative.
    """
    if pad_to_seqlen < 0:
        raise ValueError(f"pad_to_seqlen must be >= 0, got {pad_to_seqlen}")
    pads = pad_value_dict or {}
    out: dict[str, Any] = {}
    for name, val in fields.items():
        pad = pads.get(name, 0)
        if isinstance(val, JaggedArray):
            out[name] = _pad_numpy(val, pad, pad_to_seqlen)
        elif _is_nested(val):
            out[name] = _pad_torch(val, pad, pad_to_seqlen)
        else:
            out[name] = val
    return out


def _pad_numpy(val: JaggedArray, pad: Any, pad_to_seqlen: int) -> np.ndarray:
    lengths = val.lengths
    n = len(lengths)
    width = max(int(lengths.max()) if n else 0, pad_to_seqlen)
    out = np.full((n, width, *val.inner_shape), pad, dtype=val.dtype)
    for i in range(n):
        out[i, : lengths[i]] = val.values[val.offsets[i] : val.offsets[i + 1]]
    return out


def _pad_torch(val: Any, pad: Any, pad_to_seqlen: int):
    import torch

    rows = val.unbind()
    n = len(rows)
    inner = tuple(rows[0].shape[1:]) if n else tuple(val.shape[2:])
    width = max(max((r.shape[0] for r in rows), default=0), pad_to_seqlen)
    out = torch.full((n, width, *inner), pad, dtype=val.dtype, device=val.device)
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
    return out

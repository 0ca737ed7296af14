"""Padded rectangular tensors from jagged fields (the trainer's view)."""

from __future__ import annotations

from typing import Any, Mapping

from .devices import fields_to, placement

try:  # numpy-free installs (a bare PyTorch box running the GPU bench) have no JaggedArray
    from .codec import JaggedArray
except ImportError:  # pragma: no cover - numpy missing
    JaggedArray = None  # type: ignore[assignment,misc]


def _is_nested(val: Any) -> bool:
    return bool(getattr(val, "is_nested", False))


def materialize(
    fields: Mapping[str, Any],
    pad_value_dict: Mapping[str, int | float | bool] | None = None,
    pad_to_seqlen: int = 0,
    *,
    device: Any = None,
) -> dict[str, Any]:
    """Pads every jagged field to a rectangle; dense and object fields pass through.

    A jagged field of N rows with inner shape ``inner`` becomes
    ``[N, max(max_len, pad_to_seqlen), *inner]``: row ``i`` holds its own
    values first, then ``pad_value_dict.get(name, 0)`` (cast to the field's
    dtype). torch nested tensors give torch tensors, :class:`JaggedArray`
    gives numpy arrays; dtypes are kept. Rows are never cut: a
    ``pad_to_seqlen`` below the longest row changes nothing.

    Nested tensors on a GPU are padded there with device ops (one
    ``torch.full`` and one ``index_copy_`` of all values at
    ``row * width + position``, positions from the offsets; no loop over
    rows); on the CPU the padding is what it always was.

    Args:
        fields: The ``fields`` of a decoded group (or several merged groups).
        pad_value_dict: Pad value per field name (e.g. ``{"input_ids": pad_id}``); default 0.
        pad_to_seqlen: When > 0, pad the sequence dim up to at least this length.
        device: ``None``/``"cpu"`` (default): pad where the data lives, nothing
            moves. A CUDA device: tensors (jagged and dense; a
            :class:`JaggedArray` becomes a torch tensor) are first moved there
            through pinned host memory (``non_blocking``), then padded on the
            device; object fields stay.

    Returns:
        A new dict with the same keys.

    Raises:
        ValueError: ``pad_to_seqlen`` is negative; a bad ``device``.
        DeviceUnavailableError: ``device`` is CUDA but CUDA is not available.
    """
    if pad_to_seqlen < 0:
        raise ValueError(f"pad_to_seqlen must be >= 0, got {pad_to_seqlen}")
    pl = placement(device)
    if pl is not None:
        fields = fields_to(fields, pl)
    pads = pad_value_dict or {}
    out: dict[str, Any] = {}
    for name, val in fields.items():
        pad = pads.get(name, 0)
        if JaggedArray is not None and isinstance(val, JaggedArray):
            out[name] = _pad_numpy(val, pad, pad_to_seqlen)
        elif _is_nested(val):
            cpu = val.device.type == "cpu" and pl is None
            out[name] = _pad_torch(val, pad, pad_to_seqlen) if cpu else pad_jagged_scatter(val, pad, pad_to_seqlen)
        else:
            out[name] = val
    return out


def _pad_numpy(val: Any, pad: Any, pad_to_seqlen: int):
    import numpy as np

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


def pad_jagged_scatter(val: Any, pad: Any, pad_to_seqlen: int = 0):
    """Pads one jagged nested tensor with device ops only (the GPU path of :func:`materialize`).

    ``out = full([N, width, *inner], pad)`` then ``out.view(N * width, *inner)
    .index_copy_(0, row * width + pos, values)`` where each token's row comes
    from ``repeat_interleave(arange(N), lengths)`` and its position is
    ``token - offsets[row]``. Width comes from the nested tensor's cached max
    row length (set by the device decode), so no device→host sync is needed
    when it is cached. Works on any device (tests run it on the CPU).

    Assumes what decoded and merged groups have: ``offsets[0] == 0`` and
    ``offsets[-1] == len(values)`` (checked when the offsets are on the
    host; otherwise, like nested tensors with holes (``lengths()`` set),
    they take the row loop of the CPU path).
    """
    import torch

    values, offsets = val.values(), val.offsets()
    if val.lengths() is not None or (
        offsets.device.type == "cpu" and (int(offsets[0]) != 0 or int(offsets[-1]) != values.shape[0])
    ):
        return _pad_torch(val, pad, pad_to_seqlen)
    dev = values.device
    n = offsets.shape[0] - 1
    inner = tuple(values.shape[1:])
    try:
        max_len = int(val._max_seqlen) if n else 0  # cached by the device decode; else one sync
    except AttributeError:  # pragma: no cover - older/newer torch without the cache property
        max_len = int(offsets.diff().max()) if n else 0
    width = max(max_len, pad_to_seqlen)
    out = torch.full((n, width, *inner), pad, dtype=values.dtype, device=dev)
    total = values.shape[0]
    if total and width:
        lengths = offsets.diff()
        rows = torch.repeat_interleave(torch.arange(n, device=dev), lengths, output_size=total)
        flat = torch.arange(total, device=dev) + rows * width - offsets[rows]
        out.view(n * width, *inner).index_copy_(0, flat, values.contiguous())
    return out

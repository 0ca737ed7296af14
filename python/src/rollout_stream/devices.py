"""``device=``: where decoded tensors go, via pinned host memory and async copies.

``device=None`` and ``device="cpu"`` change nothing (the zero-copy CPU path).
A CUDA device (``"cuda"``, ``"cuda:1"``, ``torch.device``) makes the decoder
widen each field straight into page-locked (pinned) host memory and enqueue
its host→device copy with ``non_blocking=True`` on the current CUDA stream,
so the copy of one field overlaps the decode of the next. Jagged fields come
back as ``torch.nested`` jagged tensors on the device, with their min/max
row length cached from the host offsets (``materialize`` then needs no
device→host sync to size its output).

Work enqueued later on the same stream (the default for a trainer) is
ordered after these copies; reading the tensors from another stream or from
the host needs a ``torch.cuda.current_stream().synchronize()`` first.

This module imports torch lazily and never imports numpy, fastavro or
confluent-kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .errors import DeviceUnavailableError


@dataclass(frozen=True)
class Placement:
    """A resolved target: ``device`` (a ``torch.device``) and whether to stage through pinned memory.

    Passing a ``Placement`` as ``device=`` forces the staged path even for the
    CPU (``Placement(torch.device("cpu"), pin_memory=False)``): the tests run
    the device code path that way on machines without CUDA.
    """

    device: Any
    pin_memory: bool


def placement(device: Any) -> Placement | None:
    """Resolves ``device=``: ``None`` for no device handling (``None``/``"cpu"``).

    Raises:
        ValueError: Not a device torch knows, a device type other than CPU/CUDA,
            or torch is not installed.
        DeviceUnavailableError: A CUDA device, but CUDA is not available in
            this process (no GPU, CPU-only torch) or the index does not exist.
    """
    if device is None or isinstance(device, Placement):
        return device
    try:
        import torch
    except ImportError as e:
        raise ValueError(f"device={device!r} needs torch: pip install 'rollout-stream[torch]'") from e
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise ValueError(f"device={device!r} is not a torch device: {e}") from e
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        raise ValueError(f"device must be None, 'cpu' or a CUDA device ('cuda', 'cuda:1'), not {device!r}")
    if not torch.cuda.is_available():
        raise DeviceUnavailableError(
            f"device={device!r} but CUDA is not available in this process "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}, "
            f"{torch.cuda.device_count()} visible GPUs); use device=None or 'cpu'"
        )
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise DeviceUnavailableError(f"device={device!r}: only {torch.cuda.device_count()} CUDA devices visible")
    return Placement(dev, pin_memory=True)


def is_on(t: Any, dev: Any) -> bool:
    """Whether tensor ``t`` already lives on ``dev`` (``cuda`` matches any ``cuda:i`` if unindexed)."""
    return t.device.type == dev.type and (dev.index is None or t.device.index == dev.index)


def host_buffer(shape: tuple[int, ...], dtype: Any, pl: Placement):
    """An uninitialised host tensor to decode into: pinned when ``pl`` says so."""
    import torch

    return torch.empty(shape, dtype=dtype, pin_memory=pl.pin_memory)


def upload(host: Any, pl: Placement):
    """Enqueues the copy of a host tensor to ``pl.device`` (async from pinned memory)."""
    return host.to(pl.device, non_blocking=True)


def tensor_to(t: Any, pl: Placement):
    """Moves one dense tensor to ``pl.device``; host tensors go through a pinned buffer."""
    if is_on(t, pl.device):
        return t
    if t.device.type == "cpu" and pl.pin_memory and not t.is_pinned():
        buf = host_buffer(tuple(t.shape), t.dtype, pl)
        buf.copy_(t)
        t = buf
    return upload(t, pl)


def nested_to(nt: Any, pl: Placement, offsets_seen: dict[int, tuple[Any, Any]] | None = None):
    """Moves a jagged nested tensor: values and offsets, min/max row length kept.

    ``offsets_seen`` (id of the host offsets → (host, moved)) keeps fields that
    shared one offsets tensor sharing one on the device, hence one ragged dim.
    """
    import torch

    values, offsets = nt.values(), nt.offsets()
    if is_on(values, pl.device) and is_on(offsets, pl.device):
        return nt
    seen = offsets_seen if offsets_seen is not None else {}
    hit = seen.get(id(offsets))
    if hit is None:
        hit = seen[id(offsets)] = (offsets, tensor_to(offsets, pl))
    lengths = offsets.diff()  # host offsets: no device sync
    n = int(lengths.numel())
    return torch.nested.nested_tensor_from_jagged(
        tensor_to(values, pl),
        hit[1],
        min_seqlen=int(lengths.min()) if n else 0,
        max_seqlen=int(lengths.max()) if n else 0,
    )


def fields_to(fields: Mapping[str, Any], device: Any) -> dict[str, Any]:
    """Moves every tensor of a ``fields`` dict to ``device``; object fields stay.

    Jagged fields (nested tensors or :class:`~rollout_stream.JaggedArray`)
    become nested tensors on the device, dense tensors/arrays become tensors
    there. ``device=None``/``"cpu"`` returns ``fields`` itself.

    Raises:
        ValueError, DeviceUnavailableError: See :func:`placement`.
    """
    pl = placement(device)
    if pl is None:
        return fields  # type: ignore[return-value]
    import torch

    seen: dict[int, tuple[Any, Any]] = {}
    np_offsets: dict[int, Any] = {}
    out: dict[str, Any] = {}
    for name, val in fields.items():
        if getattr(val, "is_nested", False):
            out[name] = nested_to(val, pl, seen)
        elif isinstance(val, torch.Tensor):
            out[name] = tensor_to(val, pl)
        elif type(val).__name__ == "JaggedArray":  # numpy is importable when one exists
            from .field_decode import to_torch as _to_torch

            hit = np_offsets.get(id(val.offsets))
            if hit is None:
                hit = np_offsets[id(val.offsets)] = (val.offsets, _to_torch(val.offsets))
            nt = torch.nested.nested_tensor_from_jagged(_to_torch(val.values), hit[1])
            out[name] = nested_to(nt, pl, seen)
        elif getattr(val, "dtype", None) is not None and getattr(val.dtype, "kind", "O") != "O":
            from .field_decode import to_torch as _to_torch

            out[name] = tensor_to(_to_torch(val), pl)
        else:
            out[name] = val
    return out

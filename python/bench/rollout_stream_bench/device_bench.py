"""``python -m rollout_stream bench --device DEV``: host→device copy and GPU padding vs ``tensor.to``.

Times, in one process, interleaved, the fastest of ``--repeat`` passes, over
the same groups (16 rows of 4k–32k tokens by default, optional routed
experts ``[tokens, layers, topk]`` int16):

- ``copy``: a plain ``tensor.to(device)`` of one pageable host tensor holding
  as many bytes as the groups' tensors (the yardstick; on ``--device cpu``
  a ``copy_`` into a preallocated host tensor, since ``.to("cpu")`` copies
  nothing);
- ``to-device``: :func:`rollout_stream.devices.fields_to` of each decoded
  group (pinned staging + ``non_blocking`` copies, nested tensors rebuilt);
- ``decode``: ``PackedDeserializer(device=...)`` straight from Confluent-framed
  records (only with ``--source records``: needs fastavro, numpy,
  confluent-kafka);
- ``materialize``: :func:`rollout_stream.materialize` of the device-resident
  groups (the scatter padding); also the alternative "pad on the host, then
  copy the padded tensors".

All rates are payload bytes (every tensor of the group: jagged values,
offsets, dense fields) per second. The last line is
``ratio gpu-materialize/copy: <copy seconds / materialize seconds>``.

Sources: ``records`` builds and decodes packed records like ``bench`` does;
``synth`` makes the same fields with torch alone (no numpy, fastavro or
confluent-kafka: what a bare PyTorch GPU box has); ``auto`` picks
``records`` when those are importable.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from typing import Any, Callable

from rollout_stream.devices import Placement, fields_to
from rollout_stream.materialize import _pad_torch, materialize, pad_jagged_scatter

PADS = {"input_ids": 151_643, "routed_experts": -1}


def synth_group(gen: Any, *, rows: int, min_tokens: int, max_tokens: int, routed_experts: tuple[int, int] | None) -> dict[str, Any]:
    """The fields of one decoded group, made with torch only (same names, dtypes, layouts)."""
    import torch

    lengths = torch.randint(min_tokens, max_tokens + 1, (rows,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    total = int(offsets[-1])
    prompt = min(int(torch.randint(256, 2048, (1,), generator=gen)), int(lengths.min()))
    row = torch.repeat_interleave(torch.arange(rows), lengths)
    pos = torch.arange(total) - offsets[row]
    ids = torch.randint(0, 151_000, (total,), generator=gen, dtype=torch.int64)

    def jag(values: Any) -> Any:
        return torch.nested.nested_tensor_from_jagged(values, offsets)

    fields = {
        "input_ids": jag(ids),
        "generation_logprobs": jag(-torch.rand(total, generator=gen) * 5),
        "token_mask": jag((pos >= prompt).to(torch.int64)),
        "input_lengths": lengths.to(torch.int32),
        "sample_mask": torch.ones(rows),
        "total_reward": torch.rand(rows, generator=gen),
        "mask_sample": torch.zeros(rows, dtype=torch.bool),
        "truncated": lengths >= max_tokens,
        "prompt_ids_for_adv": torch.stack([ids[int(offsets[i]) : int(offsets[i]) + prompt] for i in range(rows)]),
    }
    if routed_experts:
        layers, topk = routed_experts
        fields["routed_experts"] = jag(torch.randint(0, 128, (total, layers, topk), generator=gen, dtype=torch.int16))
    return fields


def _records_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("numpy", "fastavro", "confluent_kafka"))


def payload_bytes(fields: dict[str, Any]) -> int:
    n = 0
    seen: set[int] = set()
    for val in fields.values():
        if getattr(val, "is_nested", False):
            n += val.values().nbytes
            if id(val.offsets()) not in seen:
                seen.add(id(val.offsets()))
                n += val.offsets().nbytes
        elif hasattr(val, "nbytes") and getattr(val, "dtype", None) is not None:
            n += val.nbytes
    return n


def _passes(fns: dict[str, Callable[[], Any]], repeat: int, sync: Callable[[], None]) -> dict[str, float]:
    best = {k: float("inf") for k in fns}
    for fn in fns.values():  # warm-up: allocator caches, kernels, pinned pool
        fn()
    sync()
    for _ in range(repeat):
        for k, fn in fns.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def run(args: argparse.Namespace) -> int:
    import torch

    from rollout_stream.devices import placement

    routes = tuple(int(x) for x in args.routed_experts.split("x")) if args.routed_experts else None
    pl = placement(args.device)  # raises DeviceUnavailableError for cuda without CUDA
    cpu = pl is None
    # On the CPU the device code path is forced through a CPU Placement (no pinning).
    target = Placement(torch.device("cpu"), pin_memory=False) if cpu else pl
    dev = target.device
    sync = (lambda: torch.cuda.synchronize(dev)) if not cpu else (lambda: None)
    source = args.source
    if source == "auto":
        source = "records" if _records_available() else "synth"

    values: list[bytes] = []
    if source == "records":
        import numpy as np

        from . import bench
        from rollout_stream.deserializer import PackedDeserializer
        from rollout_stream.encode import encode_packed_value, load_packed_schema
        from rollout_stream.registry import StaticResolver

        schema = load_packed_schema()
        rng = np.random.default_rng(args.seed)
        records = [
            bench.build_group(rng, f"bench-{i}", rows=args.rows, min_tokens=args.min_tokens, max_tokens=args.max_tokens,
                              narrow=args.wire == "narrow", routed_experts=routes)
            for i in range(args.groups)
        ]
        values = [encode_packed_value(r, bench.SCHEMA_ID, schema) for r in records]
        resolver = StaticResolver({bench.SCHEMA_ID: schema})
        host_groups = [PackedDeserializer(resolver, jagged="torch").decode(v).fields for v in values]
        dev_deser = PackedDeserializer(resolver, jagged="torch", device=target)
    else:
        gen = torch.Generator().manual_seed(args.seed)
        host_groups = [
            synth_group(gen, rows=args.rows, min_tokens=args.min_tokens, max_tokens=args.max_tokens, routed_experts=routes)
            for _ in range(args.groups)
        ]
    total = sum(payload_bytes(f) for f in host_groups)
    blob = torch.empty(total, dtype=torch.uint8).fill_(7)  # pageable, like most host tensors
    dst = torch.empty_like(blob) if cpu else None
    dev_groups = [fields_to(f, target) for f in host_groups]
    sync()

    def copy() -> Any:
        return dst.copy_(blob) if cpu else blob.to(dev)

    def to_device() -> Any:
        return [fields_to(f, target) for f in host_groups]

    def mat_device() -> Any:
        if cpu:  # the device implementation, run on the host
            return [{k: pad_jagged_scatter(v, PADS.get(k, 0)) if getattr(v, "is_nested", False) else v for k, v in f.items()}
                    for f in dev_groups]
        return [materialize(f, PADS) for f in dev_groups]

    def mat_host() -> Any:
        return [{k: _pad_torch(v, PADS.get(k, 0), 0) if getattr(v, "is_nested", False) else v for k, v in f.items()}
                for f in host_groups]

    def host_pad_then_copy() -> Any:
        return [{k: (v.to(dev) if hasattr(v, "to") else v) for k, v in materialize(f, PADS).items()} for f in host_groups]

    def to_device_then_pad() -> Any:
        return [materialize(fields_to(f, target), PADS) for f in host_groups]

    fns: dict[str, Callable[[], Any]] = {"copy": copy}
    if not cpu:
        fns["to-device"] = to_device
    if values:
        fns["decode"] = lambda: [dev_deser.decode(v) for v in values]
    fns["materialize"] = mat_device
    fns["materialize-host-loop"] = mat_host
    if not cpu:
        fns["host-pad+copy"] = host_pad_then_copy
        fns["copy+device-pad"] = to_device_then_pad
    best = _passes(fns, args.repeat, sync)

    where = "CPU (no GPU: the device code path run on the host)" if cpu else f"{dev} ({torch.cuda.get_device_name(dev)})"
    print(
        f"device: {where}; torch {torch.__version__}; source {source}; {args.groups} groups x {args.rows} rows, "
        f"{args.min_tokens}-{args.max_tokens} tokens/row, routed_experts {args.routed_experts or 'none'}; "
        f"payload {total / 1e6:.1f} MB"
    )
    labels = {
        "copy": "dst.copy_(blob) (CPU memcpy)" if cpu else "tensor.to(device) (pageable)",
        "to-device": "fields_to (pinned, non_blocking)",
        "decode": "decode(device=) from records" if not cpu else "decode, staged path on CPU",
        "materialize": "materialize on device (scatter)" if not cpu else "scatter padding on CPU",
        "materialize-host-loop": "materialize on host (row loop)",
        "host-pad+copy": "pad on host, then .to(device)",
        "copy+device-pad": "fields_to, then pad on device",
    }
    copy_s = best["copy"]
    for k, s in best.items():
        ratio = "" if k == "copy" else f"  ratio {copy_s / s:.3f}"
        print(f"{k:<22} {labels[k]:<36} {total / s / 1e9:8.2f} GB/s  {s * 1e3:9.2f} ms{ratio}")
    print(f"ratio gpu-materialize/copy: {copy_s / best['materialize']:.3f}")
    return 0

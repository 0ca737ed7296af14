"""``bench --breakdown``: where a decode's time goes, step by step, against the same copy.

Each step runs over the same records as the bench, interleaved with the
``bytearray(value)`` copy and with each other, fastest of ``--repeat`` passes
per step. The steps:

- ``parse``: the Avro walk (:func:`rollout_stream.avro_body.read_parts`).
- ``passes``: only the memory passes a decode makes — one buffer per group,
  one ``np.copyto`` per field that is narrower on the wire or unaligned —
  with no Python around them: ``copy / passes`` is the most this payload's
  ratio can be on this machine.
- ``astype aligned``: the same widening with one ``astype`` per field (an
  allocation each) from an aligned copy of the wire bytes.
- ``fields numpy`` / ``fields torch``: building the fields from parsed parts
  (everything but ``parse``).
- ``nested direct`` / ``nested public``: only the jagged tensors of a group,
  around ready values and a fresh copy of its offsets (each decode makes a
  new ragged dim), with the constructor the decoder uses and with
  ``torch.nested.nested_tensor_from_jagged``.

Then, not interleaved, a decode-only loop per mode (decode, drop, next: how a
consumer runs) with its minor page faults per group. The copy between decodes
keeps the allocator's recycled memory warm; without it, memory the allocator
hands back to the kernel has to be faulted in again (~3 µs per 4 KiB page on
this VM), which the interleaved ratio does not show.
"""

from __future__ import annotations

import time
from typing import Any, Callable


def run_breakdown(
    values: list[bytes], writer: dict[str, Any], start: int, repeat: int, decoders: dict[str, Callable[[bytes], Any]]
) -> None:
    """Prints one line per step: µs per group and copy time ÷ step time; then the decode-only loops."""
    import numpy as np

    from rollout_stream.avro_body import read_parts
    from rollout_stream.codec import build_group
    from rollout_stream.field_decode import group_buffer_size, prepare_field

    modes = list(decoders)
    parts = [read_parts(v, start, writer) for v in values]
    prepared = []
    for p in parts:
        shared: dict = {}
        prepared.append([prepare_field(wf, len(p[2]), "numpy", shared, None) for wf in p[4]])
    copies = [[f for f in fs if f.plan is not None and f.at >= 0] for fs in prepared]
    aligned = [[(np.array(f.arr), f.plan.target) for f in fs] for fs in copies]

    def passes(i: int) -> None:
        fs = prepared[i]
        buf = np.empty(group_buffer_size(fs), np.uint8)
        for f in copies[i]:
            np.copyto(buf[f.at : f.at + f.copy_bytes].view(f.plan.target), f.arr, casting="unsafe")

    steps: dict[str, Callable[[int], Any]] = {
        "copy": lambda i: bytearray(values[i]),
        "parse": lambda i: read_parts(values[i], start, writer),
        "passes": passes,
        "astype aligned": lambda i: [a.astype(t) for a, t in aligned[i]],
    }
    for mode in modes:
        steps[f"fields {mode}"] = lambda i, m=mode: build_group(parts[i], m, None)
    if "torch" in modes:
        import torch

        from rollout_stream.field_decode import to_torch
        from rollout_stream.jagged_tensor import nested_from_jagged, uses_public_constructor

        jagged = []  # per group: (values, index of its offsets) per jagged field, and the distinct offsets
        for fs in prepared:
            index: dict[int, int] = {}
            pairs, offsets = [], []
            for f in fs:
                if f.offsets is None:
                    continue
                k = index.get(id(f.offsets))
                if k is None:
                    k = index[id(f.offsets)] = len(offsets)
                    offsets.append(to_torch(f.offsets))
                pairs.append((to_torch(np.zeros(f.shape, f.plan.target)), k))
            jagged.append((pairs, offsets))

        def nested(i: int, make: Callable[[Any, Any], Any]) -> list:
            pairs, offsets = jagged[i]
            fresh = [o.clone() for o in offsets]  # a decode's offsets are new: a new ragged dim each group
            return [make(v, fresh[k]) for v, k in pairs]

        steps["nested direct"] = lambda i: nested(i, nested_from_jagged)
        steps["nested public"] = lambda i: nested(i, torch.nested.nested_tensor_from_jagged)
        print(f"nested tensors: {'public torch.nested.nested_tensor_from_jagged' if uses_public_constructor() else 'direct NestedTensor constructor'}")

    best = {k: float("inf") for k in steps}
    for _ in range(repeat):
        for k, fn in steps.items():
            t0 = time.perf_counter()
            for i in range(len(values)):
                fn(i)
            best[k] = min(best[k], time.perf_counter() - t0)
    copy_s = best["copy"]
    for k, s in best.items():
        print(f"  {k:<16} {s / len(values) * 1e6:9.1f} us/group   copy/step {copy_s / s:6.3f}")
    print(f"ceiling (copy / passes): {copy_s / best['passes']:.3f}")
    for mode, decode in decoders.items():
        s, faults = _decode_only(values, decode, repeat)
        print(f"  decode-only loop jagged={mode:<6} {s / len(values) * 1e6:9.1f} us/group   "
              f"minor page faults/group {faults:.0f}")


def _decode_only(values: list[bytes], decode: Callable[[bytes], Any], repeat: int) -> tuple[float, float]:
    """Fastest pass of decode-and-drop over ``values``, and the mean minor faults per group."""
    best, total = float("inf"), 0
    for _ in range(repeat):
        f0, t0 = _minor_faults(), time.perf_counter()
        for v in values:
            decode(v)
        best = min(best, time.perf_counter() - t0)
        total += _minor_faults() - f0
    return best, total / repeat / len(values)


def _minor_faults() -> int:
    try:
        import resource
    except ImportError:  # not on Unix: no fault count
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
